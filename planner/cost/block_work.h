// The compute of a model part on one rank (StepWork's block, embedding and head): the GEMMs,
// attention core and memory-bound kernels of its op list (planner/cost/block_ops.h) in each
// pass, and what a block's full, selective and op recompute replay (docs/cost_model.md
// section 5). Internal to planner/cost/ (step_work.cc builds with it).
#pragma once

#include "planner/cost/compute_work.h"
#include "planner/cost/step_shape.h"
#include "planner/cost/step_work.h"

namespace meshplan {

// Adds the forward, backward-input and backward-weight work of any op list to *part: the
// one reading of an op list as work (blocks, embedding, head). `op_replay` (null: not
// wanted) receives what the op recompute policy replays of it.
void AddOpListWork(const StepShape& s, const BlockOps& ops, PartWork* part,
                   ComputeWork* op_replay = nullptr);

// Forward, backward and recompute work of one transformer block, whose ops are `ops`
// (BuildBlockOps of s.rank and s.lowering).
void BlockCompute(const StepShape& s, const BlockOps& ops, PartWork* part);

}  // namespace meshplan
