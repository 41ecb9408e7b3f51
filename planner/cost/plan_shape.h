// PlanShape: what a plan's ranks are, derived from the plan once (MakePlanShape) and passed
// to the builders of the step's work and of its memory: the rank's local sizes (RankShape),
// its communication groups, the stage split, the layers and parameters of each distinct stage (first, last and a middle
// one: the stages the cost model evaluates), a block's parameters, and the block's op list as
// the framework lowers it.
// It follows from the plan's mesh, micro-batch, sequence parallel, schedule and stage split,
// not from its ZeRO stage, recompute policy or overlap and offload choices (SameShape): the
// search derives one per grid point and reuses it for each of those
// (planner/cost/plan_evaluator.h). A value of a few tens of KiB: keep one, pass it by
// reference. Not thread-safe to share while being rebuilt; one per thread.
#pragma once

#include <cstdint>

#include "planner/attention_impl.h"
#include "planner/cost/block_ops.h"
#include "planner/cost/param_count.h"
#include "planner/cost/pipeline_in_flight.h"
#include "planner/cost/rank_shape.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/stage_layers.h"
#include "planner/training_spec.h"

namespace meshplan {

// One pipeline stage of a rank: its blocks and chunks, how many of its blocks are MoE layers,
// its parameters and the micro-batches it holds in flight.
struct StageShape {
  int64_t layers = 0;         // LayersOfStage
  int64_t largest_chunk = 0;  // StageLayers::LargestChunkOf
  int64_t first_chunk = 0;    // blocks of its first chunk (the embedding's, on stage 0)
  int64_t last_chunk = 0;     // ... of its last chunk (the head's, on the last stage)
  int64_t moe_layers = 0;     // MoeLayersOfStage
  StageParams params;         // CountStageParams (before ZeRO)
  MicrobatchesInFlight in_flight;  // CountMicrobatchesInFlight
};

struct PlanShape {
  PlanShape() = default;
  // `plan`'s shape (MakePlanShape), each member built once in place: default-constructing
  // the members first and then assigning them costs the search a zero-fill per candidate.
  PlanShape(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan,
            AttentionImpl attention);

  RankShape rank;                // local sizes
  RankGroups groups;             // the groups it communicates in (collective_time.h)
  AttentionImpl attention = AttentionImpl::kFused;  // resolved (ResolveAttentionImpl)
  Lowering lowering;             // which kernels run the block's ops
  StageLayers layers;            // SplitLayers(model.layers, plan)
  BlockOps ops;        // StepWork's block: BuildBlockOps(model, rank, lowering)
  BlockOps dense_ops;  // MoE models: the dense-FFN block's ops (rank.experts = 0); else empty
  // The parameters of ops' and dense_ops' matrices:
  int64_t block_params = 0;        // StepWork's block on this rank (BlockParamsPerRank)
  int64_t dense_block_params = 0;  // a dense-FFN block (BlockParamsPerTpRank(model, tp, false))
  int64_t routed_expert_params = 0;  // a MoE block's X/ep routed experts with ep > 1, else 0

  // Stage 0, pp - 1 or (pp > 2) 1; any other middle stage is stage 1's equal in layers and
  // parameters, but not in MoE layers: ask for those three only.
  const StageShape& stage(int64_t index) const;

  StageShape first, last, middle;
};

// `attention`: the kernel requested (auto: planner/attention_impl.h).
PlanShape MakePlanShape(const ModelSpec& model, const TrainingSpec& training,
                        const ParallelPlan& plan, AttentionImpl attention = AttentionImpl::kAuto);
// The same into *out (no copy of the op lists: the search rebuilds one in place).
void MakePlanShape(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan,
                   AttentionImpl attention, PlanShape* out);

// Stage `index` of `plan` (of `shape`'s): the shape's own for 0, 1 and pp - 1, else derived.
StageShape StageOf(const PlanShape& shape, const ModelSpec& model, const TrainingSpec& training,
                   const ParallelPlan& plan, int64_t index);

// Whether two plans of one model and training have the same PlanShape: they differ at most in
// the ZeRO stage, the recompute policy and the overlap and offload choices.
bool SameShape(const ParallelPlan& a, const ParallelPlan& b);

}  // namespace meshplan
