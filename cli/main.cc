// meshplan: plan, simulate, run and compare parallel LLM training.
// main only wires the subcommands (cli/commands.h) and turns errors into exit codes.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"
#include "planner/input_error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "meshplan: how to split LLM training over GPUs (DP, ZeRO/FSDP, TP, SP, CP, PP), "
      "whether it fits, how fast it runs, and whether reality agrees."};
  app.require_subcommand(1);
  int exit_code = 0;
  meshplan::AddEstimateCommand(app, &exit_code);
  meshplan::AddSearchCommand(app, &exit_code);
#if MESHPLAN_SIMULATOR_ENABLED
  meshplan::AddSimulateCommand(app, &exit_code);
#endif
#if MESHPLAN_GUI_ENABLED
  meshplan::AddGuiCommand(app, &exit_code);
#endif
#if MESHPLAN_EXECUTOR_ENABLED
  meshplan::AddRunCommand(app, &exit_code);
  meshplan::AddCalibrateCommand(app, &exit_code);
#endif
  meshplan::AddCompareCommand(app, &exit_code);
  meshplan::AddMeasurementsCommand(app, &exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return meshplan::kExitBadInput;
  } catch (const meshplan::InputError& e) {
    std::cerr << "meshplan: error: " << e.what() << "\n";
    return meshplan::kExitBadInput;
  }
  return exit_code;
}
