// meshplan-exec: the commands of meshplan that link LibTorch (`run`, `calibrate`).
// Users call them as `meshplan run ...`; meshplan hands over to this executable
// (cli/exec_handoff.h), which parses the same command line.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"meshplan (executor): train a plan for real and calibrate the cost model.",
               "meshplan"};
  app.require_subcommand(1);
  int exit_code = 0;
  meshplan::AddRunCommand(app, &exit_code);
  meshplan::AddCalibrateCommand(app, &exit_code);
  return meshplan::ParseAndRun(app, argc, argv, exit_code);
}
