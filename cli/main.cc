// meshplan: plan, simulate and compare parallel LLM training (no LibTorch in this
// executable). `run` and `calibrate` are handed over to meshplan-exec (cli/exec_handoff.h), but
// `calibrate --from-logs`, which needs no LibTorch;
// main only wires the subcommands (cli/commands.h).
#include <CLI/CLI.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/exec_handoff.h"

int main(int argc, char** argv) {
  if (argc >= 2 && meshplan::IsExecutorCommand(argv[1]) && !meshplan::CalibratesFromLogs(argc, argv))
    return meshplan::HandOverToExecutor(argc, argv);

  CLI::App app{
      "meshplan: how to split LLM training over GPUs (DP, ZeRO/FSDP, TP, SP, CP, PP), "
      "whether it fits, how fast it runs, and whether reality agrees.",
      "meshplan"};
  app.require_subcommand(1);
  int exit_code = 0;
  meshplan::AddEstimateCommand(app, &exit_code);
  meshplan::AddSearchCommand(app, &exit_code);
  meshplan::AddSimulateCommand(app, &exit_code);
#if MESHPLAN_GUI_ENABLED
  meshplan::AddGuiCommand(app, &exit_code);
#endif
  // Listed for --help; argv never reaches them (handed over above).
  app.add_subcommand("run", meshplan::kRunSummary)->allow_extras();
  meshplan::AddCalibrateLogsCommand(app, &exit_code);  // calibrate --from-logs; else handed over
  meshplan::AddCompareCommand(app, &exit_code);
  meshplan::AddMeasurementsCommand(app, &exit_code);
  meshplan::AddValidateCommand(app, &exit_code);
  meshplan::AddShrinkCommand(app, &exit_code);
  meshplan::AddExportCommand(app, &exit_code);
  return meshplan::ParseAndRun(app, argc, argv, exit_code);
}
