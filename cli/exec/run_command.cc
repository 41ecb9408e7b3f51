// `meshplan run PLAN.yaml`: train the plan for real (LibTorch; CPU or CUDA devices, Gloo
// or NCCL) and write what was measured (measured.json) for `meshplan compare`.
//
//   meshplan run plan.yaml --nproc 2 --steps 20 --warmup 3 --out measured.json
//   torchrun --nproc-per-node 2 --no-python meshplan run plan.yaml   (one rank per process)
//
// This file has the flags and their checks; the ranks are orchestrated by
// executor/launch/run_job.h. Three modes, one command line. Launcher mode (no RANK / Slurm
// variables): check the plan and the flags, then host the store and start --nproc rank
// processes of this same binary with this same command line (HostLocalRanks). Rank mode
// (RANK set, by us, torchrun or srun): check, then train one rank and gather on rank 0,
// which writes --out (RunRankOfJob). Emulation (--emulate-rank R|all-stages): no launcher
// and no store; the named ranks train one after the other in this process with emulated
// peers (RunEmulatedRanks), and --out holds those ranks.
// Exit codes: 0 success; 2 bad input (plan file, a plan the executor refuses, a
// world size that is not --nproc, flags out of range, an --out or --snapshot that cannot
// be written), found before any rank starts, or found by a rank (a token file, a damaged
// snapshot); 124 when a rank hung (executor/launch/launcher.h); otherwise the failing
// rank's code (1 for a runtime failure, such as a loss that is not finite, 128+signal when
// it was killed).

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "executor/comm/communicator_factory.h"
#include "executor/device/host_memory.h"
#include "executor/device/training_device.h"
#include "executor/emulate_rank.h"
#include "executor/launch/rank_env.h"
#include "executor/launch/run_job.h"
#include "executor/run_rank.h"
#include "executor/snapshot.h"
#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/input_error.h"
#include "planner/parallel_plan.h"

namespace meshplan {
namespace {

struct RunCommandOptions {
  std::string plan_file;
  int nproc = 0;             // 0: the plan's world size
  int64_t steps = 0;         // 0: training.steps of the plan file
  int64_t warmup = 2;
  std::string out = "measured.json";
  std::string data = "synthetic";
  std::string data_dtype = "uint16";
  int64_t save_every = 0;
  std::string snapshot;
  std::string resume;
  uint64_t seed = 1234;
  double comm_timeout_s = 60;
  std::string device = "auto";   // executor/device/training_device.h
  std::string backend = "gloo";  // executor/comm/communicator_factory.h
  std::string emulate_rank;      // "": every rank; "R" | "all-stages" (executor/emulate_rank.h)
  std::string emulated_comm = "zero";  // zero | model (executor/comm/emulated_communicator.h)
  std::string comm_log;          // "": none; else each rank writes PREFIX.rank<R>
  bool comm_timing = false;      // --comm-log lines also say when each call was issued, returned, done
  std::string cpu_bind = "auto";  // auto | cores | none (LaunchOptions::bind_cores)
  // For tests only (hidden): make one rank fail at a step.
  int fail_rank = -1;
  int64_t fail_at_step = -1;
  std::string fail_mode = "exit";
};

const InputLocation kFlags{"<command line>"};

// ---------------------------------------------------------------------------------------
// Flag ranges. Integer flags are checked as text, before CLI11 converts them: alone it
// clamps 99999999999999999999 to INT64_MAX and wraps -1 into a uint64_t. A refusal names
// the flag and the range (exit 2).

// Steps fit the 8-digit snapshot directory names (step_00000004).
constexpr int64_t kMaxSteps = kMaxSnapshotStep;
constexpr int64_t kMaxLocalRanks = 4096;
// --comm-timeout: at least a second (Gloo and the store count whole milliseconds, and a
// shorter wait fails healthy runs), at most a day.
constexpr double kMinCommTimeoutS = 1, kMaxCommTimeoutS = 86400;


// ---------------------------------------------------------------------------------------
// Output paths: checked before any rank starts, so a typo does not cost a whole run.

std::string WhyNotWritableDir(const std::filesystem::path& dir) {
  std::error_code error;
  if (!std::filesystem::exists(dir, error)) return "the directory '" + dir.string() + "' does not exist";
  if (!std::filesystem::is_directory(dir, error)) return "'" + dir.string() + "' is not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot write into '" + dir.string() + "': " + std::strerror(errno);
  return "";
}

// A file the run will create or replace: its directory exists and takes new files.
void CheckOutputFile(const char* flag, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw InputError(kFlags, flag, "needs a file path");
  std::error_code error;
  if (fs::is_directory(path, error))
    throw InputError(kFlags, flag, "'" + path + "' is a directory; expected a file path");
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (const std::string why = WhyNotWritableDir(parent); !why.empty())
    throw InputError(kFlags, flag, why + " (for '" + path + "')");
}

// A directory the run will create if needed and write into: it, or else its parent, exists
// and takes new files.
void CheckOutputDir(const char* flag, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::exists(dir, error)) {
    if (const std::string why = WhyNotWritableDir(dir); !why.empty()) throw InputError(kFlags, flag, why);
    return;
  }
  const fs::path parent = fs::path(dir).parent_path().empty() ? fs::path(".") : fs::path(dir).parent_path();
  if (const std::string why = WhyNotWritableDir(parent); !why.empty())
    throw InputError(kFlags, flag, why + " (the parent of '" + dir + "')");
}

// Every path this process will write: --out when it writes measured.json (the launcher
// checks for rank 0), --snapshot when it saves.
void CheckOutputPaths(const RunCommandOptions& options, bool writes_out) {
  if (writes_out) CheckOutputFile("--out", options.out);
  if (options.save_every > 0) CheckOutputDir("--snapshot", options.snapshot);
  if (!options.comm_log.empty()) CheckOutputFile("--comm-log", CommLogPath(options.comm_log, 0));
}

// Where the ranks train and how they talk: --device and --backend, parsed.
struct RankTarget {
  DeviceChoice device = DeviceChoice::kAuto;
  CommBackend backend = CommBackend::kGloo;
};

// Every reason not to start: a broken plan, a world size that is not --nproc, flags
// that do not fit together. Throws InputError (exit 2) naming each problem; returns the
// parsed --device and --backend.
RankTarget CheckRunnable(const PlanFile& plan_file, const RunCommandOptions& options, int nproc) {
  const std::vector<PlanViolation> violations =
      Validate(plan_file.plan, plan_file.model, plan_file.training, nproc);
  if (!violations.empty()) {
    std::string message = "the plan " + ToPlanString(plan_file.plan) + " cannot run on " +
                          std::to_string(nproc) + " ranks:";
    for (const PlanViolation& v : violations) message += "\n  " + v.constraint + ": " + v.message;
    throw InputError({options.plan_file}, "plan", message);
  }
  for (const std::string& reason : ExecutorLimitations(plan_file))
    throw InputError({options.plan_file}, "plan", reason);
  if (options.steps < 0)
    throw InputError(kFlags, "--steps", "must be >= 1 (0: the plan file's training.steps)");
  const int64_t steps = options.steps > 0 ? options.steps : plan_file.training.steps;
  if (options.warmup < 0 || options.warmup >= steps)
    throw InputError(kFlags, "--warmup",
                     "must be in 0.." + std::to_string(steps - 1) +
                         " (fewer than the " + std::to_string(steps) + " steps), got " +
                         std::to_string(options.warmup));
  if (options.save_every < 0)
    throw InputError(kFlags, "--save-every", "must be >= 0 (0: no snapshots)");
  if (options.save_every > 0 && options.snapshot.empty())
    throw InputError(kFlags, "--save-every", "needs --snapshot DIR");
  if (!(options.comm_timeout_s >= kMinCommTimeoutS && options.comm_timeout_s <= kMaxCommTimeoutS))
    throw InputError(kFlags, "--comm-timeout",
                     fmt::format("must be a finite number of seconds from {} to {}, got {}",
                                 kMinCommTimeoutS, kMaxCommTimeoutS, options.comm_timeout_s));
  std::error_code error;  // the non-throwing checks: a symlink loop is an answer, not a crash
  const auto because = [&error] { return error ? " (" + error.message() + ")" : std::string(); };
  if (options.data != "synthetic" && !std::filesystem::is_regular_file(options.data, error))
    throw InputError(kFlags, "--data",
                     "expected 'synthetic' or a token file; '" + options.data + "' is not a file" +
                         because());
  if (!options.resume.empty() && !std::filesystem::is_directory(options.resume, error))
    throw InputError(kFlags, "--resume",
                     "'" + options.resume + "' is not a directory" + because());
  RankTarget target;
  if (!ParseDeviceChoice(options.device, &target.device))
    throw InputError(kFlags, "--device",
                     std::string("expected one of: ") + kAllowedDevices + "; got '" + options.device + "'");
  if (!ParseCommBackend(options.backend, &target.backend))
    throw InputError(kFlags, "--backend",
                     std::string("expected one of: ") + kAllowedCommBackends + "; got '" +
                         options.backend + "'");
  std::string why;  // asked only when a flag needs CUDA
  const bool cuda = (target.device == DeviceChoice::kCuda || target.backend == CommBackend::kNccl) &&
                    TorchCudaAvailable(&why);
  if (target.device == DeviceChoice::kCuda && !cuda)
    throw InputError(kFlags, "--device", "cuda: " + why);
  if (target.backend == CommBackend::kNccl) {
    if (!NcclBuiltIn())
      throw InputError(kFlags, "--backend",
                       "nccl: this build has no NCCL (configure with the CUDA toolkit and "
                       "-DNCCL_ROOT=<dir with include/nccl.h>); use gloo");
    if (target.device == DeviceChoice::kCpu || !cuda)
      throw InputError(kFlags, "--backend",
                       "nccl needs every rank on a CUDA device (--device cuda or auto with a "
                       "GPU)" + (cuda ? std::string() : ": " + why) + "; use gloo");
  }
  return target;
}

// The job every rank of this run shares, from the checked flags.
RunJob MakeJob(const PlanFile& plan_file, const RunCommandOptions& options, const RankTarget& target) {
  RunJob job;
  job.run.steps = options.steps > 0 ? options.steps : plan_file.training.steps;
  job.run.warmup_steps = options.warmup;
  job.run.data = options.data;
  job.run.data_dtype = options.data_dtype;
  job.run.save_every = options.save_every;
  job.run.snapshot_dir = options.snapshot;
  job.run.resume_dir = options.resume;
  job.run.seed = options.seed;
  job.device = target.device;
  job.backend = target.backend;
  job.comm_timeout = std::chrono::milliseconds(static_cast<int64_t>(options.comm_timeout_s * 1000));
  job.out = options.out;
  job.comm_log = options.comm_log;
  job.comm_timing = options.comm_timing;
  job.fault = {options.fail_rank, options.fail_at_step, options.fail_mode};
  return job;
}

// --cpu-bind: auto binds ranks that train on the CPU (their communication shares the cores),
// by the rule the ranks choose their device with.
bool BindCores(const RunCommandOptions& options, const RankTarget& target) {
  if (options.cpu_bind != "auto") return options.cpu_bind == "cores";
  return ChooseTrainingDevice(target.device, /*local_rank=*/0).is_cpu();
}

int RunLauncher(const PlanFile& plan_file, const RunCommandOptions& options) {
  const int nproc = options.nproc > 0 ? options.nproc : static_cast<int>(plan_file.plan.world_size());
  const RankTarget target = CheckRunnable(plan_file, options, nproc);
  CheckOutputPaths(options, /*writes_out=*/true);
  if (ChooseTrainingDevice(target.device, /*local_rank=*/0).is_cpu())
    CheckCpuRanksFitHost(plan_file, nproc, options.plan_file, AvailableHostMemoryBytes());
  return HostLocalRanks(plan_file, MakeJob(plan_file, options, target), nproc,
                        BindCores(options, target));
}

int RunAsRank(const PlanFile& plan_file, const RunCommandOptions& options, const RankEnv& env) {
  return RunRankOfJob(plan_file, env, [&] {
    if (options.nproc > 0 && options.nproc != env.world_size)
      throw InputError(kFlags, "--nproc",
                       std::to_string(options.nproc) + " differs from the " + env.source +
                           " world size " + std::to_string(env.world_size));
    const RankTarget target = CheckRunnable(plan_file, options, env.world_size);
    CheckOutputPaths(options, /*writes_out=*/env.rank == 0);
    return MakeJob(plan_file, options, target);
  });
}

// --emulate-rank: everything is checked before the first rank starts, so a refusal leaves
// nothing behind.
int RunEmulated(const PlanFile& plan_file, const RunCommandOptions& options) {
  if (options.nproc > 0)
    throw InputError(kFlags, "--nproc",
                     "an emulated rank runs alone in this process; leave --nproc out");
  if (options.save_every > 0 || !options.resume.empty())
    throw InputError(kFlags, options.save_every > 0 ? "--save-every" : "--resume",
                     "snapshots are of every rank; an emulated run has none");
  const int world = static_cast<int>(plan_file.plan.world_size());
  const RankTarget target = CheckRunnable(plan_file, options, world);
  EmulationOptions emulation;
  if (!ParseEmulatedCommTime(options.emulated_comm, &emulation.time))
    throw InputError(kFlags, "--emulated-comm",
                     std::string("expected one of: ") + kAllowedEmulatedCommTimes + "; got '" +
                         options.emulated_comm + "'");
  emulation.workspace = target.backend == CommBackend::kGloo ? EmulatedWorkspace::kGloo
                                                             : EmulatedWorkspace::kNone;
  const std::vector<int> ranks = EmulatedRanks(plan_file.plan, options.emulate_rank, "--emulate-rank");
  CheckOutputPaths(options, /*writes_out=*/true);
  const at::Device device = ChooseTrainingDevice(target.device, /*local_rank=*/0);
  for (const int rank : ranks) CheckRankFitsDevice(plan_file, rank, device, "--emulate-rank");
  return RunEmulatedRanks(plan_file, MakeJob(plan_file, options, target), device, ranks, emulation);
}

int RunRun(const RunCommandOptions& options) {
  // The executor runs the plan, whatever framework it was searched for.
  const FrameworkSpec executor = LoadFramework(kExecutorFramework);
  const PlanFile plan_file = LoadPlanFile(options.plan_file, &executor);
  if (!options.emulate_rank.empty()) return RunEmulated(plan_file, options);
  if (options.emulated_comm != "zero")
    throw InputError(kFlags, "--emulated-comm", "is for emulated peers; it needs --emulate-rank");
  if (const std::optional<RankEnv> env = ReadRankEnv()) return RunAsRank(plan_file, options, *env);
  return RunLauncher(plan_file, options);
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<RunCommandOptions>();
  CLI::App* command = app.add_subcommand("run", kRunSummary);
  command->add_option("plan", options->plan_file, "the plan file (as `meshplan search --out` writes)")
      ->required();
  command->add_option("--nproc", options->nproc,
                      "local rank processes to start (default: the plan's dp*tp*pp*cp); under "
                      "torchrun/srun it must equal WORLD_SIZE")
      ->check(IntegerInRange(1, kMaxLocalRanks, "processes on this machine"));
  command->add_option("--steps", options->steps,
                      "optimizer steps (default: training.steps of the plan file)")
      ->check(IntegerInRange(0, kMaxSteps, "steps; 0: the plan file's training.steps"));
  command->add_option("--warmup", options->warmup,
                      "steps left out of the timing (the median is over the rest)")
      ->check(IntegerInRange(0, kMaxSteps, "steps, fewer than --steps"))
      ->capture_default_str();
  command->add_option("--out", options->out, "where rank 0 writes the measurements")
      ->check(OutputFile())
      ->capture_default_str();
  command->add_option("--data", options->data,
                      "synthetic (a deterministic token stream) or a token file (flat ids)")
      ->check(NonEmptyText("synthetic or a token file"))
      ->capture_default_str();
  command->add_option("--data-dtype", options->data_dtype, "token id width of --data: uint16 | uint32")
      ->check(CLI::IsMember({"uint16", "uint32"}))
      ->capture_default_str();
  command->add_option("--save-every", options->save_every,
                      "write a snapshot every K steps into --snapshot (0: never)")
      ->check(IntegerInRange(0, kMaxSteps, "steps; 0: never"))
      ->capture_default_str();
  command->add_option("--snapshot", options->snapshot, "snapshot directory")
      ->check(NonEmptyText("a snapshot directory"));
  command->add_option("--resume", options->resume, "resume from the latest snapshot in DIR")
      ->check(NonEmptyText("a snapshot directory"));
  command->add_option("--seed", options->seed, "initialisation and data seed")
      ->check(Uint64InRange("any 64-bit seed"))
      ->capture_default_str();
  command->add_option("--device", options->device,
                      "where each rank trains: auto (cuda when this LibTorch has CUDA and sees a "
                      "GPU, else cpu) | cpu | cuda (local rank i on GPU i % count)")
      ->capture_default_str();
  command->add_option("--backend", options->backend,
                      "communication: gloo (CPU, or CUDA tensors through the host) | nccl (one "
                      "GPU per rank; needs a build with NCCL)")
      ->capture_default_str();
  command->add_option("--comm-timeout", options->comm_timeout_s,
                      "seconds a rank waits for its peers (rendezvous and every collective) "
                      "before it fails, from 1 to 86400; a rank that stops (no heartbeat for "
                      "10 s) ends the run sooner")
      ->check(FiniteInRange(kMinCommTimeoutS, kMaxCommTimeoutS))
      ->capture_default_str();
  command->add_option("--emulate-rank,--emulate", options->emulate_rank,
                      "run one world rank R of the plan (0..dp*tp*pp*cp-1) alone in this "
                      "process, its peers emulated, or all-stages: the rank at dp=cp=tp=0 of "
                      "each pipeline stage in turn; measured.json then holds those ranks");
  command->add_option("--emulated-comm", options->emulated_comm,
                      "with --emulate-rank: zero (communication takes no time) | model (each "
                      "message takes the cost model's time on the plan's cluster)")
      ->capture_default_str();
  command->add_option("--cpu-bind", options->cpu_bind,
                      "with --nproc: cores (local rank r runs on the r-th of nproc equal slices "
                      "of this process's cores, when nproc <= cores) | none | auto (cores when "
                      "the ranks train on the CPU, else none)")
      ->check(CLI::IsMember({"auto", "cores", "none"}))
      ->capture_default_str();
  CLI::Option* comm_log = command->add_option("--comm-log", options->comm_log,
                      "write every communicator call of rank R (group, operation, peer, dtypes "
                      "and shapes) to PREFIX.rankR")
      ->check(NonEmptyText("a file name prefix"));
  command->add_flag("--comm-timing", options->comm_timing,
                    "with --comm-log: each line also says when the call was issued, when it "
                    "returned and when it was known complete (issued_ms=, returned_ms=, "
                    "done_ms=: ms since the rank's first call; done_ms=-1: never waited for)")
      ->needs(comm_log);
  // Hidden (empty group): for tests of failure handling only.
  command->add_option("--fail-rank", options->fail_rank, "test only: the rank that fails")
      ->group("");
  command->add_option("--fail-at-step", options->fail_at_step, "test only: the step it fails at")
      ->group("");
  command->add_option("--fail-mode", options->fail_mode, "test only: exit | kill | hang | stop | nan")
      ->check(CLI::IsMember({"exit", "kill", "hang", "stop", "nan"}))
      ->group("");
  command->callback([options, exit_code] { *exit_code = RunRun(*options); });
}

}  // namespace meshplan

