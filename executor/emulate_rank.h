// EmulateRank: one rank of a plan of any size, run for real in this process, its peers
// emulated (`meshplan run --emulate-rank R|all-stages`, docs/executor.md#emulated-ranks).
//
// The rank holds its own shard of every parameter, gradient and optimizer state, its own
// activations, and does its own compute: its DeviceMesh is built at its mesh coordinates
// (planner/mesh_layout.h) with an EmulatedCommunicator for every group of more than one
// rank (executor/comm/emulated_communicator.h), and RunRank trains it. Its peak memory and
// compute time are real; its communication takes zero time or the cost model's. Its losses
// are not the model's (what the peers would have sent is drawn, not computed).
// Bad input throws InputError (exit code 2): a rank outside the plan, a spec that is neither
// a rank nor all-stages, a stage whose predicted memory exceeds the device's, an allocation
// the device refuses during the run. Nothing is written here.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "executor/comm/emulated_communicator.h"
#include "executor/comm/recording_communicator.h"
#include "executor/run_rank.h"
#include "planner/config/config_loader.h"
#include "planner/measure/measurement.h"

namespace meshplan {

inline constexpr const char* kAllStages = "all-stages";

struct EmulationOptions {
  EmulatedCommTime time = EmulatedCommTime::kZero;
  EmulatedWorkspace workspace = EmulatedWorkspace::kGloo;  // the backend a real run would use
};

// The world ranks `spec` names, ascending: "R" (an integer, 0 <= R < world size), or
// "all-stages": the rank at dp = cp = tp = 0 of each pipeline stage. InputError naming
// `flag` otherwise.
std::vector<int> EmulatedRanks(const ParallelPlan& plan, const std::string& spec,
                               const std::string& flag);

// InputError naming `flag` when the detailed memory model's peak for `rank`'s stage
// (planner/cost/memory_model.h, tensors only) exceeds the memory of `device`
// (DeviceMemoryBytes, executor/device/training_device.h).
void CheckRankFitsDevice(const PlanFile& plan_file, int rank, const at::Device& device,
                         const std::string& flag);

// InputError at the plan file's `plan` when the detailed memory model's peaks of world
// ranks 0..nproc-1 on the CPU, added up (they share this host), exceed `available_bytes`
// (AvailableHostMemoryBytes, executor/device/host_memory.h; 0: unknown, not checked): a
// plan that cannot fit is refused before its ranks start, not by an allocation failing.
void CheckCpuRanksFitHost(const PlanFile& plan_file, int nproc, const std::string& plan_path,
                          int64_t available_bytes);

// Trains world rank `rank` of plan_file.plan alone (options as for RunRank; options.device
// is where it runs). When `log` is given, every communicator call is appended to it.
RankMeasurement EmulateRank(const PlanFile& plan_file, const RunOptions& options, int rank,
                            const EmulationOptions& emulation, CommLog* log = nullptr);

// The emulated ranks' results (ascending world ranks) -> measured.json's content, marked as
// emulated with `time`.
Measurement CombineEmulatedRanks(const PlanFile& plan_file, const RunOptions& options,
                                 const std::vector<RankMeasurement>& ranks, EmulatedCommTime time);

}  // namespace meshplan
