// One rank of any plan, with emulated peers (see emulate_rank.h).
#include "executor/emulate_rank.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <charconv>
#include <system_error>
#include <new>
#include <string>

#include "executor/device/training_device.h"
#include "executor/model/adamw.h"
#include "executor/model/fused_attention.h"
#include "executor/parallel/device_mesh.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/memory_model.h"
#include "planner/input_error.h"
#include "planner/mesh_layout.h"
#include "planner/names.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

const InputLocation kCommandLine{"<command line>"};

int64_t StageOf(const ParallelPlan& plan, int rank) { return CoordsOfRank(plan, rank)[MeshDim::kPp]; }

// An allocation the device refused, as bad input: the plan does not fit the device.
[[noreturn]] void DoesNotFit(int rank, const ParallelPlan& plan, const std::string& what) {
  throw InputError(kCommandLine, "--emulate-rank",
                   fmt::format("rank {} (stage {}) does not fit the device: {}", rank,
                               StageOf(plan, rank), what));
}

}  // namespace

std::vector<int> EmulatedRanks(const ParallelPlan& plan, const std::string& spec,
                               const std::string& flag) {
  const int64_t world = plan.world_size();
  std::vector<int> ranks;
  if (Lower(spec) == kAllStages) {
    for (int64_t stage = 0; stage < plan.pp; ++stage) {
      MeshCoords coords;  // dp = cp = tp = 0
      coords[MeshDim::kPp] = stage;
      ranks.push_back(static_cast<int>(RankOfCoords(plan, coords)));
    }
    return ranks;
  }
  const std::string allowed =
      fmt::format("expected a world rank from 0 to {} (the plan {} has {} ranks) or {}", world - 1,
                  ToShortPlanString(plan), world, kAllStages);
  int64_t rank = -1;
  const char* end = spec.data() + spec.size();
  const bool digits = !spec.empty() && spec.find_first_not_of("0123456789") == std::string::npos;
  const std::from_chars_result parsed =
      digits ? std::from_chars(spec.data(), end, rank) : std::from_chars_result{};
  if (!digits || parsed.ec != std::errc() || parsed.ptr != end || rank < 0 || rank >= world)
    throw InputError(kCommandLine, flag, allowed + "; got '" + spec + "'");
  ranks.push_back(static_cast<int>(rank));
  return ranks;
}

namespace {

// The detailed memory model's peak for `rank`'s stage on `device`, tensors only: what the
// run's probe counts (planner/cost/memory_model.h).
double RankPeakBytes(const PlanFile& plan_file, int rank, const at::Device& device) {
  PlanFile pf = plan_file;  // the executor runs it, whatever framework it was searched for
  pf.training.framework = LoadFramework(kExecutorFramework);
  MemoryOptions memory;
  memory.attention = ExecutorAttention(device, pf.training.precision);
  memory.fused_adamw =
      FusedAdamWBuiltIn(pf.plan.offload_optimizer ? at::Device(at::kCPU) : device);
  return EstimateStageMemory(pf.model, pf.training, pf.plan, MemoryModel::kDetailed,
                             StageOf(pf.plan, rank), memory)
      .total_bytes;
}

}  // namespace

void CheckRankFitsDevice(const PlanFile& pf, int rank, const at::Device& device,
                         const std::string& flag) {
  const double needed_bytes = RankPeakBytes(pf, rank, device);
  const int64_t device_bytes = DeviceMemoryBytes(device);
  if (device_bytes > 0 && needed_bytes > static_cast<double>(device_bytes))
    throw InputError(kCommandLine, flag,
                     fmt::format("rank {} (stage {}) needs {} by the detailed memory model, more "
                                 "than the {} of {}: the plan does not fit the device",
                                 rank, StageOf(pf.plan, rank), FormatGiB(needed_bytes, 2),
                                 FormatGiB(static_cast<double>(device_bytes), 2),
                                 TrainingDeviceName(device)));
}

void CheckCpuRanksFitHost(const PlanFile& pf, int nproc, const std::string& plan_path,
                          int64_t available_bytes) {
  double needed_bytes = 0, largest_bytes = 0;
  int largest = 0;
  for (int rank = 0; rank < nproc; ++rank) {
    const double bytes = RankPeakBytes(pf, rank, at::Device(at::kCPU));
    needed_bytes += bytes;
    if (bytes > largest_bytes) largest_bytes = bytes, largest = rank;
  }
  if (available_bytes <= 0 || needed_bytes <= static_cast<double>(available_bytes)) return;
  throw InputError({plan_path}, "plan",
                   fmt::format("the {} CPU rank(s) need {} by the detailed memory model (rank {}, "
                               "stage {}: {}), more than the {} of memory available on this host; "
                               "expected a smaller plan.mbs, more recompute, or more ranks",
                               nproc, FormatGiB(needed_bytes, 2), largest,
                               StageOf(pf.plan, largest), FormatGiB(largest_bytes, 2),
                               FormatGiB(static_cast<double>(available_bytes), 2)));
}

RankMeasurement EmulateRank(const PlanFile& pf, const RunOptions& options, int rank,
                            const EmulationOptions& emulation, CommLog* log) {
  EmulatedCommOptions comm;
  comm.time = emulation.time;
  comm.workspace = emulation.workspace;
  comm.cluster = pf.cluster;
  comm.seed = options.seed;
  GroupFactory factory = EmulatedGroupFactory(pf.plan, rank, comm);
  if (log != nullptr) factory = RecordingGroupFactory(std::move(factory), *log);
  const DeviceMesh mesh(pf.plan, rank, factory);
  try {
    return RunRank(pf, options, mesh);
  } catch (const c10::OutOfMemoryError& e) {  // CUDA's caching allocator
    DoesNotFit(rank, pf.plan, e.what_without_backtrace());
  } catch (const std::bad_alloc& e) {
    DoesNotFit(rank, pf.plan, std::string("an allocation failed (") + e.what() + ")");
  } catch (const c10::Error& e) {  // c10's CPU allocator says so in words
    const std::string what = e.what_without_backtrace();
    if (what.find("can't allocate memory") != std::string::npos) DoesNotFit(rank, pf.plan, what);
    throw;
  }
}

Measurement CombineEmulatedRanks(const PlanFile& pf, const RunOptions& options,
                                 const std::vector<RankMeasurement>& ranks, EmulatedCommTime time) {
  Measurement m = CombineRanks(CurrentEnvironment(pf, options.device), options.warmup_steps,
                               pf.training.tokens_per_step(), ranks, ToString(time));
  for (const RankMeasurement& r : ranks)
    if (m.stop_reason.empty() && !r.stop_reason.empty()) m.stop_reason = r.stop_reason;
  return m;
}

}  // namespace meshplan
