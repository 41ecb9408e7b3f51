// RunJob: what `meshplan run` does once its flags and the plan are checked
// (cli/exec/run_command.cc checks them; this unit orchestrates the ranks).
//
//   HostLocalRanks    launcher mode: host the rendezvous store and start `nproc` copies of
//                     this process (executor/launch/launcher.h); the first rank to fail
//                     stops the others and is named, its exit code is the run's.
//   RunRankOfJob      rank mode (RANK set by us, torchrun or srun): join the store, build the
//                     device mesh, train (executor/run_rank.h), gather every rank's result on
//                     rank 0 through the store; rank 0 writes `out` atomically. The rank tells
//                     the launcher how it is doing (executor/launch/rank_status.h).
//   RunEmulatedRanks  --emulate-rank: the named ranks one after the other in this process,
//                     peers emulated (executor/emulate_rank.h); `out` and the comm logs are
//                     written once every rank has finished.
// Exit codes: 0 success; 1 a runtime failure (a loss that is not finite, after `out` was
// written; a communication or other error, printed as one line); InputError goes up to
// the command line (exit 2); the launcher's codes (124 hung, 128+signal) from HostLocalRanks.
// Not re-entrant (HostLocalRanks installs signal handlers for its duration).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/comm/communicator_factory.h"
#include "executor/device/training_device.h"
#include "executor/emulate_rank.h"
#include "executor/launch/rank_env.h"
#include "executor/run_rank.h"
#include "planner/config/config_loader.h"

namespace meshplan {

// Tests only (meshplan run's hidden --fail-* flags): rank `rank` fails at step `at_step` like a
// real crash: exit (code 3), kill (SIGKILL), hang (the main thread sleeps, heartbeats go on),
// stop (SIGSTOP: the process freezes) or nan (its parameters become NaN).
struct FaultInjection {
  int rank = -1;
  int64_t at_step = -1;
  std::string mode = "exit";
};

struct RunJob {
  RunOptions run;  // steps, data, snapshots, seed (the device is chosen per rank)
  DeviceChoice device = DeviceChoice::kAuto;
  CommBackend backend = CommBackend::kGloo;
  std::chrono::milliseconds comm_timeout{std::chrono::seconds(60)};
  std::string out = "measured.json";  // measured.json, written by rank 0
  std::string comm_log;               // "": none; else rank R writes CommLogPath(comm_log, R)
  bool comm_timing = false;
  FaultInjection fault;
};

// Where rank `rank` writes its communicator calls under --comm-log PREFIX.
std::string CommLogPath(const std::string& prefix, int rank);

// Launcher mode. `bind_cores`: LaunchOptions::bind_cores.
int HostLocalRanks(const PlanFile& plan_file, const RunJob& job, int nproc, bool bind_cores);

// Rank mode. `checked_job` checks this rank's input (it may throw InputError) and returns the
// job; it runs after the heartbeats start, so its refusal reaches the launcher like any other.
int RunRankOfJob(const PlanFile& plan_file, const RankEnv& env,
                 const std::function<RunJob()>& checked_job);

// Emulation: `ranks` (EmulatedRanks) on `device`, each already checked to fit it.
int RunEmulatedRanks(const PlanFile& plan_file, const RunJob& job, const at::Device& device,
                     const std::vector<int>& ranks, const EmulationOptions& emulation);

}  // namespace meshplan
