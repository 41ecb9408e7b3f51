// The meshplan subcommands. Each lives in its own file (<name>_command.cc) with
// an options struct, a setup function that binds its flags, and a Run function;
// Add<Name>Command registers it on the app and stores the Run result in *exit_code.
//
// Two executables share them: `meshplan` (planner, simulator, GUI, compare; no LibTorch)
// and `meshplan-exec` (run, calibrate: cli/exec/), to which `meshplan run|calibrate`
// hands over (cli/exec_handoff.h).
#pragma once

#include <CLI/CLI.hpp>

namespace meshplan {

// Exit code of `meshplan search` when valid plans exist but none fits in memory.
inline constexpr int kExitNoPlanFits = 3;

// One-line summaries of the executor's commands, shown by both executables' --help.
inline constexpr const char* kRunSummary =
    "train a plan for real (LibTorch; CPU or CUDA, Gloo or NCCL) on --nproc local ranks, or "
    "as one rank under torchrun / srun, and write the measurements (measured.json)";
inline constexpr const char* kCalibrateSummary =
    "time the executor's ops on this CPU or GPU, fit the cost model's efficiencies and write "
    "a hardware file (configs/hardware/NAME.yaml)";

void AddEstimateCommand(CLI::App& app, int* exit_code);
void AddSearchCommand(CLI::App& app, int* exit_code);
void AddSimulateCommand(CLI::App& app, int* exit_code);
void AddCompareCommand(CLI::App& app, int* exit_code);
void AddMeasurementsCommand(CLI::App& app, int* exit_code);
void AddValidateCommand(CLI::App& app, int* exit_code);
void AddShrinkCommand(CLI::App& app, int* exit_code);
void AddExportCommand(CLI::App& app, int* exit_code);
// `meshplan calibrate --from-logs` (the rest of `calibrate` is meshplan-exec's).
void AddCalibrateLogsCommand(CLI::App& app, int* exit_code);
void AddGuiCommand(CLI::App& app, int* exit_code);
// In meshplan-exec only (cli/exec/).
void AddRunCommand(CLI::App& app, int* exit_code);
void AddCalibrateCommand(CLI::App& app, int* exit_code);

// Parses argv into `app`, runs the chosen subcommand and returns the process's exit code:
// help 0; bad flags or input (CLI11 errors, InputError) 2 with one message; anything
// unexpected 1, with one line naming the command and the cause (never an abort).
// `exit_code` is where the subcommands' callbacks store their result.
int ParseAndRun(CLI::App& app, int argc, char** argv, const int& exit_code);

}  // namespace meshplan
