// The compute of one transformer block on one rank (StepWork::block): its GEMMs, attention
// core and memory-bound kernels in each pass, and what full and selective recompute replay.
// The kernels and bytes of each block kind are listed in block_work.cc and
// docs/cost_model.md section 5. Internal to planner/cost/ (step_work.cc builds with it).
#pragma once

#include <cstdint>

#include "planner/cost/step_shape.h"
#include "planner/cost/step_work.h"

namespace meshplan {

// One linear layer (T, in) x (in, out) on this rank: its GEMM in each pass.
struct Linear {
  double in = 0, out = 0;
  bool shares_input = false;  // reads the previous linear's input (q/k/v, gate/up)
};

// The linears' GEMMs, in FP8 when `fp8` (the blocks' linears of an fp8 run).
void AddLinears(const StepShape& s, const Linear* linears, int n, bool fp8, PartWork* part);

// Kernel launches of one RMSNorm as the executor runs it (executor/model/ops.cc).
struct NormLaunches {
  int64_t fwd = 0, bwd = 0;
};
NormLaunches RmsNormLaunches(const StepShape& s);

// Forward, backward and recompute work of one transformer block.
void BlockCompute(const StepShape& s, PartWork* part);

}  // namespace meshplan
