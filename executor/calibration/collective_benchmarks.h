// Collective micro-benchmarks over a Communicator: all-reduce, reduce-scatter and
// all-gather of fp32 buffers of the given sizes, timed the way planner/cost/collective_time.h
// prices them (the full buffer; the ring factor and steps are the fit's business).
//
// BenchmarkCollectives is collective: every rank of `comm` calls it with the same sizes
// and repeats (the repeat count is fixed, not adaptive, so every rank runs the same
// sequence). Each repeat starts after a barrier and ends when the collective is complete
// on this rank (device synchronised); the sample is the median over repeats.
// BenchmarkCollectivesInProcess runs `ranks` threads of this process over Gloo (a shared
// HashStore, loopback TCP): the CPU profile's "network" between ranks sharing the machine.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "executor/comm/communicator.h"
#include "planner/measure/calibration_fit.h"

namespace meshplan {

std::vector<CollectiveSample> BenchmarkCollectives(Communicator& comm, const at::Device& device,
                                                   const std::vector<int64_t>& buffer_bytes,
                                                   int repeats);

// Rank 0's samples. Throws std::runtime_error when a rank fails.
std::vector<CollectiveSample> BenchmarkCollectivesInProcess(int ranks,
                                                            const std::vector<int64_t>& buffer_bytes,
                                                            int repeats);

}  // namespace meshplan
