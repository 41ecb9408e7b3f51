// The ranks of one `meshplan run` (see run_job.h).
#include "executor/launch/run_job.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "executor/comm/comm_error.h"
#include "executor/comm/recording_communicator.h"
#include "executor/comm/rendezvous.h"
#include "executor/launch/launcher.h"
#include "executor/launch/rank_status.h"
#include "executor/parallel/device_mesh.h"
#include "executor/snapshot.h"
#include "executor/trainer.h"
#include "planner/atomic_file.h"
#include "planner/input_error.h"
#include "planner/measure/measurement.h"
#include "planner/parallel_plan.h"

namespace meshplan {
namespace {

void WriteCommLog(const RunJob& job, int rank, const CommLog& log) {
  WriteFileAtomically(CommLogPath(job.comm_log, rank), CommLogText(log));
}

void WriteMeasurement(const RunJob& job, const Measurement& measurement) {
  WriteFileAtomically(job.out, MeasurementToJson(measurement).dump(2) + "\n");
  std::cout << FormatMeasurementSummary(measurement) << std::flush;
}

// The fault of job.fault, when this rank is at its step.
void MaybeFail(const FaultInjection& fault, int rank, int64_t step, Trainer& trainer) {
  if (rank != fault.rank || step != fault.at_step) return;
  std::cerr << "failing on purpose (--fail-rank " << rank << " --fail-at-step " << step
            << " --fail-mode " << fault.mode << ")" << std::endl;
  if (fault.mode == "nan") {
    trainer.engine().Owned(0).params.fill_(std::numeric_limits<double>::quiet_NaN());
    return;
  }
  if (fault.mode == "kill") std::raise(SIGKILL);
  if (fault.mode == "stop") std::raise(SIGSTOP);
  if (fault.mode == "hang" || fault.mode == "stop")
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  std::_Exit(3);
}

void PrintRankError(const RankEnv& env, const std::string& what) {
  std::cerr << "meshplan run: rank " << env.rank << " of " << env.world_size << ": error: " << what
            << std::endl;
}

// `key` in the store, waited for at most `timeout`; a peer that never sets it is a
// communication failure.
std::vector<uint8_t> WaitAndGet(c10d::Store& store, const std::string& key,
                                std::chrono::milliseconds timeout) {
  try {
    store.wait({key}, timeout);
    return store.get(key);
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw CommError("waiting for '" + key + "' in the rendezvous store: " +
                    (c10_error != nullptr ? c10_error->what_without_backtrace() : e.what()));
  }
}

// One rank's run: join, train, gather on rank 0, write job.out. Returns the exit code (1
// when training stopped on a loss that is not finite, after job.out was written).
int TrainRank(const PlanFile& plan_file, const RunJob& job, const RankEnv& env,
              RankStatus& status) {
  RunOptions run = job.run;
  run.device = ChooseTrainingDevice(job.device, env.local_rank);
  auto store = ConnectRendezvousStore(env, job.comm_timeout);
  CommOptions comm;
  comm.gloo = GlooOptionsForRank(env, job.comm_timeout);
  // CPU ranks: communication shares the compute cores, so nothing is overlapped
  // (executor/comm/gloo_communicator.h; the cost model's comm_overlaps_compute: false).
  if (!run.device.is_cuda()) comm.gloo = ForRanksOnComputeCores(comm.gloo);
  comm.nccl_timeout = job.comm_timeout;
  comm.cuda_device = run.device.is_cuda() ? run.device.index() : -1;
  CommLog comm_log;  // --comm-log: outlives the mesh's communicators
  comm_log.timed = job.comm_timing;
  GroupFactory factory = MakeGroupFactory(job.backend, store, env.rank, comm);
  if (!job.comm_log.empty()) factory = RecordingGroupFactory(std::move(factory), comm_log);
  DeviceMesh mesh(plan_file.plan, env.rank, factory);
  status.Milestone();  // the mesh is joined

  run.milestone = [&status] { status.Milestone(); };
  run.tamper = [&fault = job.fault, rank = env.rank](int64_t step, Trainer& trainer) {
    MaybeFail(fault, rank, step, trainer);
  };
  const RankMeasurement mine = RunRank(plan_file, run, mesh);
  if (!job.comm_log.empty()) WriteCommLog(job, env.rank, comm_log);

  // Gather on rank 0 through the store (it outlives the ranks under a launcher).
  const std::string key_prefix = "meshplan/run/rank_result/";
  const std::string written_key = "meshplan/run/written";
  const std::string payload = RankMeasurementToJson(mine).dump();
  store->set(key_prefix + std::to_string(env.rank),
             std::vector<uint8_t>(payload.begin(), payload.end()));
  if (env.rank != 0) {
    if (mine.stop_reason.empty()) return 0;
    // Stopped early: rank 0 reports it, once job.out is written; this rank waits for that
    // (exiting first would make the launcher stop rank 0 before it writes).
    WaitAndGet(*store, written_key, job.comm_timeout);
    status.ReportFailure(FailureKind::kPeer, "stopped with the others: " + mine.stop_reason);
    PrintRankError(env, "training stopped: " + mine.stop_reason);
    return 1;
  }
  std::vector<RankMeasurement> ranks;
  for (int r = 0; r < env.world_size; ++r) {
    const std::vector<uint8_t> bytes =
        WaitAndGet(*store, key_prefix + std::to_string(r), job.comm_timeout);
    ranks.push_back(RankMeasurementFromJson(
        nlohmann::json::parse(std::string(bytes.begin(), bytes.end()))));
  }
  const Measurement measurement = CombineRankMeasurements(plan_file, run, ranks);
  WriteMeasurement(job, measurement);
  if (measurement.stop_reason.empty()) return 0;
  const std::string why = fmt::format("training stopped at {}; {} holds the {} step(s) done before",
                                      measurement.stop_reason, job.out, measurement.steps);
  status.ReportFailure(FailureKind::kOwn, why);
  store->set(written_key, std::vector<uint8_t>{1});
  PrintRankError(env, why);
  return 1;
}

}  // namespace

std::string CommLogPath(const std::string& prefix, int rank) {
  return prefix + ".rank" + std::to_string(rank);
}

int HostLocalRanks(const PlanFile& plan_file, const RunJob& job, int nproc, bool bind_cores) {
  StoreServer store("127.0.0.1", 0, job.comm_timeout);
  LaunchOptions launch;
  launch.nproc = nproc;
  launch.exe = SelfExe();
  launch.argv = SelfArgv();
  launch.master_port = store.port();
  launch.bind_cores = bind_cores;
  // A CPU profile's rates are those of a rank with its threads (meshplan calibrate --threads).
  const int threads = plan_file.cluster.gpu.threads_per_rank;
  launch.threads_per_rank = threads;
  std::cout << fmt::format("meshplan run: {} ranks of {} ({}), rendezvous at 127.0.0.1:{}\n",
                           nproc, plan_file.model.name, ToPlanString(plan_file.plan),
                           store.port())
            << std::flush;
  if (const int cores = UsableCores(); nproc > cores)
    std::cerr << fmt::format(
        "meshplan run: warning: {} ranks on {} cores: the ranks take turns on the cores, so a "
        "CPU rank's step time\n  measures that contention (about {:.1f}x longer than with a core "
        "each) and `compare` reads the prediction as\n  too fast; memory is unaffected. Run at "
        "most {} ranks to time the plan (meshplan shrink --nproc {}).\n",
        nproc, cores, static_cast<double>(nproc) / cores, cores, cores);
  else if (threads > 0 && int64_t{nproc} * threads > cores)
    std::cerr << fmt::format(
        "meshplan run: warning: {} ranks of {} threads (the profile's threads_per_rank) on {} "
        "cores: the threads take turns\n  on the cores, so the step measures that contention, "
        "not the profile's rates; calibrate with --threads {} for {} ranks.\n",
        nproc, threads, cores, std::max(1, cores / nproc), nproc);
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp != nullptr && threads > 0 &&
                                                        std::string(omp) != std::to_string(threads))
    std::cerr << fmt::format(
        "meshplan run: warning: OMP_NUM_THREADS={} is set and wins, but the profile's rates are "
        "those of {} thread(s) per rank\n  (threads_per_rank): `compare` will put a prediction "
        "for {} beside this measurement.\n",
        omp, threads, threads);
  const LaunchResult result = LaunchLocalRanks(launch);
  if (result.exit_code != 0) {
    std::cerr << "meshplan run: failed: " << result.failure;
    if (!result.interrupted) {
      std::string stopped;
      for (size_t r = 0; r < result.ranks.size(); ++r)
        if (result.ranks[r].stopped_by_launcher)
          stopped += (stopped.empty() ? "" : ", ") + std::to_string(r);
      if (!stopped.empty()) std::cerr << "; stopped ranks " << stopped;
    }
    std::cerr << "\n";
    return result.exit_code;
  }
  std::cout << "meshplan run: " << nproc << " ranks finished; measurements in " << job.out
            << "\n";
  return 0;
}

int RunRankOfJob(const PlanFile& plan_file, const RankEnv& env,
                 const std::function<RunJob()>& checked_job) {
  RankStatus status;  // heartbeats from now on, when the launcher gave us a status pipe
  try {
    return TrainRank(plan_file, checked_job(), env, status);
  } catch (const SnapshotRefusedElsewhere& e) {
    status.ReportFailure(FailureKind::kPeer, e.what());
    throw;
  } catch (const InputError& e) {
    status.ReportFailure(FailureKind::kOwn, e.what());
    throw;
  } catch (const CommError& e) {  // a peer failed or hung: the launcher names that one
    status.ReportFailure(FailureKind::kPeer, e.what());
    PrintRankError(env, e.what());
    return 1;
  } catch (const std::exception& e) {
    status.ReportFailure(FailureKind::kOwn, e.what());
    PrintRankError(env, e.what());
    return 1;
  }
}

int RunEmulatedRanks(const PlanFile& plan_file, const RunJob& job, const at::Device& device,
                     const std::vector<int>& ranks, const EmulationOptions& emulation) {
  RunOptions run = job.run;
  run.device = device;
  const int world = static_cast<int>(plan_file.plan.world_size());
  std::vector<RankMeasurement> results;
  std::vector<CommLog> logs(ranks.size());
  for (CommLog& log : logs) log.timed = job.comm_timing;
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::cout << fmt::format("meshplan run: rank {} of {} ({}), stage {}, peers emulated, "
                             "communication {}\n",
                             ranks[i], world, ToShortPlanString(plan_file.plan),
                             CoordsOfRank(plan_file.plan, ranks[i])[MeshDim::kPp],
                             ToString(emulation.time))
              << std::flush;
    results.push_back(EmulateRank(plan_file, run, ranks[i], emulation,
                                  job.comm_log.empty() ? nullptr : &logs[i]));
  }
  const Measurement measurement = CombineEmulatedRanks(plan_file, run, results, emulation.time);
  if (!job.comm_log.empty())
    for (size_t i = 0; i < ranks.size(); ++i) WriteCommLog(job, ranks[i], logs[i]);
  WriteMeasurement(job, measurement);
  if (measurement.stop_reason.empty()) return 0;
  std::cerr << "meshplan run: training stopped at " << measurement.stop_reason << "\n";
  return 1;
}

}  // namespace meshplan
