// The meshplan subcommands. Each lives in its own file (<name>_command.cc) with
// an options struct, a setup function that binds its flags, and a Run function;
// Add<Name>Command registers it on the app and stores the Run result in *exit_code.
#pragma once

#include <CLI/CLI.hpp>

namespace meshplan {

// Exit code of `meshplan search` when valid plans exist but none fits in memory.
inline constexpr int kExitNoPlanFits = 3;

void AddEstimateCommand(CLI::App& app, int* exit_code);
void AddSearchCommand(CLI::App& app, int* exit_code);
void AddSimulateCommand(CLI::App& app, int* exit_code);
void AddRunCommand(CLI::App& app, int* exit_code);
void AddCompareCommand(CLI::App& app, int* exit_code);
void AddCalibrateCommand(CLI::App& app, int* exit_code);
void AddMeasurementsCommand(CLI::App& app, int* exit_code);
void AddGuiCommand(CLI::App& app, int* exit_code);

}  // namespace meshplan
