// The compute of one transformer block on one rank (StepWork::block): the GEMMs, attention
// core and memory-bound kernels of its op list (planner/cost/block_ops.h) in each pass, and
// what full and selective recompute replay (docs/cost_model.md section 5). Internal to
// planner/cost/ (step_work.cc builds with it).
#pragma once

#include "planner/cost/compute_work.h"
#include "planner/cost/step_shape.h"
#include "planner/cost/step_work.h"

namespace meshplan {

// A linear layer's GEMM in each pass, from its forward (rows, in) x (in, out) = `forward`
// (m = rows, n = out, k = in): backward input (rows, out) x (out, in), backward weight
// (in, rows) x (rows, out).
void AddLinearGemms(const GemmOp& forward, PartWork* part);

// Forward, backward and recompute work of one transformer block, whose ops are `ops`
// (BuildBlockOps of s.rank and s.lowering).
void BlockCompute(const StepShape& s, const BlockOps& ops, PartWork* part);

}  // namespace meshplan
