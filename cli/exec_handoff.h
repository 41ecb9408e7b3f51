// Handing `meshplan run|calibrate ...` over to meshplan-exec, the executable that links
// LibTorch, so that `meshplan` itself starts in milliseconds.
//
// The hand-over is an execv of the same argument list: the process keeps its pid, its
// signals and its exit code, so torchrun, srun and the launcher see one program.
// meshplan-exec is $MESHPLAN_EXEC when set, else the file next to this executable.
#pragma once

#include <optional>
#include <string>

namespace meshplan {

// True for the subcommands that live in meshplan-exec ("run", "calibrate").
bool IsExecutorCommand(const std::string& subcommand);
// True for `calibrate --from-logs ...` (argv[1] is "calibrate"): fitting a framework profile to
// logs needs no LibTorch, so meshplan does it itself (cli/calibrate_logs_command.cc).
bool CalibratesFromLogs(int argc, char** argv);

// Replaces this process with meshplan-exec and the same arguments. Returns only when that
// cannot be done: then it has printed why (what to install or set) and returns exit code 2.
int HandOverToExecutor(int argc, char** argv);

// Where meshplan-exec is looked for ($MESHPLAN_EXEC, else next to /proc/self/exe).
std::string ExecutorPath();

}  // namespace meshplan
