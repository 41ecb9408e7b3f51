// Collective micro-benchmarks: all-reduce, reduce-scatter and all-gather of fp32 buffers,
// timed as a training run meets them, and fitted by the caller to a network tier
// (planner/measure/calibration_fit.h FitNetworkTier; the ring factor and steps are the
// fit's business, the sample is the full buffer).
//
// As a run meets them: every repeat is a compute chunk on the rank's own thread (a matmul of
// about 0.04 to 2.4 ms on one CPU core, five sizes in turn: a collective's cost depends on the
// compute before it) followed by the collective, with no barrier between repeats, so the
// ranks arrive when their compute ends, a rank that arrives first
// waits as a run's rank does (spinning: executor/comm/gloo_communicator.h), and the
// collective passes through the same threads (the communicator's, Gloo's) while the peer's
// compute holds its core. A collective's cost is the loop's time less the time of the same
// loop without it (both ranks computing), per repeat; the sample is the median over rounds.
// Measured this way on a 2-vCPU VM (before the waiters spun) a small collective cost 2-4
// times what it cost between threads of one process that meet after a barrier
// (docs/validation/cpu_ranks.md).
//
// BenchmarkCollectives is collective: every rank of `comm` calls it with the same plan.
// BenchmarkCollectivesInRanks starts `ranks` processes of this executable, with its own
// command line (executor/launch/launcher.h) and kCollectiveRankEnv set; the executable must
// call RunCollectiveBenchmarkRank when IsCollectiveBenchmarkRank() (meshplan calibrate
// does, first thing). The ranks meet over Gloo on loopback TCP, one intra-op thread each
// when they share the cores and each bound to its own cores (the launcher's OMP_NUM_THREADS
// rule and bind_cores, as `meshplan run` starts CPU ranks).
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "executor/comm/communicator.h"
#include "planner/measure/calibration_fit.h"

namespace meshplan {

struct CollectiveBenchmarkPlan {
  std::vector<int64_t> buffer_bytes;  // full buffer of each sample
  // Sides of the square fp32 matmuls computed before each collective, one per repeat in
  // turn (the default: 128 to 512, about 0.04 to 2.4 ms on one core).
  std::vector<int64_t> chunk_sides = {128, 192, 256, 384, 512};
  int repeats = 8;                    // chunk + collective pairs per timed loop
  int rounds = 3;                     // timed loops per sample (the median is kept)
};
CollectiveBenchmarkPlan DefaultCollectiveBenchmark(bool quick);

std::vector<CollectiveSample> BenchmarkCollectives(Communicator& comm, const at::Device& device,
                                                   const CollectiveBenchmarkPlan& plan);

// The environment variable that makes a process a benchmark rank; its value is the file
// rank 0 writes the samples to.
inline constexpr char kCollectiveRankEnv[] = "MESHPLAN_COLLECTIVE_BENCHMARK_RANK";
bool IsCollectiveBenchmarkRank();

// Rank 0's samples of the plan the ranks' command line (this process's) gives them.
// Throws std::runtime_error when a rank fails or the ranks time out.
std::vector<CollectiveSample> BenchmarkCollectivesInRanks(int ranks, std::chrono::milliseconds timeout);

// A rank's side: join the launcher's store, benchmark, and (rank 0) write the samples.
void RunCollectiveBenchmarkRank(const CollectiveBenchmarkPlan& plan, std::chrono::milliseconds timeout);

}  // namespace meshplan
