#include "planner/cost/plan_shape.h"

#include <cassert>
#include <memory>
#include <type_traits>

namespace meshplan {
namespace {

// `dense_block_params`: PlanShape::dense_block_params. Every field named once (no zero-fill).
StageShape StageShapeOf(const ModelSpec& model, const TrainingSpec& training,
                        const ParallelPlan& plan, const StageLayers& split, int64_t stage,
                        int64_t dense_block_params) {
  const int64_t layers = split.Of(stage);
  const int64_t moe_layers = MoeLayersOfStage(model, plan, stage);
  return StageShape{
      .layers = layers,
      .largest_chunk = split.LargestChunkOf(stage),
      .first_chunk = split.ChunkOf(stage, 0),
      .last_chunk = split.ChunkOf(stage, split.vpp - 1),
      .moe_layers = moe_layers,
      .params = CountStageParams(model, plan, stage, layers, moe_layers, dense_block_params),
      .in_flight = CountMicrobatchesInFlight(plan, model.layers,
                                             plan.num_microbatches(training.global_batch), stage),
  };
}

// A MoE rank's dense-FFN block (the FFN of width F/tp in place of its experts); else none.
BlockOps DenseFfnOps(const ModelSpec& model, const RankShape& rank, const Lowering& lowering) {
  if (rank.experts > 0) {
    RankShape dense = rank;
    dense.experts = 0;
    return BuildBlockOps(model, dense, lowering);
  }
  BlockOps none;  // default-initialised: `BlockOps()` would zero-fill all its KiB
  return none;
}

}  // namespace

const StageShape& PlanShape::stage(int64_t index) const {
  if (index == 0) return first;
  if (index == layers.pp - 1) return last;
  assert(index == 1 && "PlanShape holds stages 0, 1 and pp - 1");
  return middle;
}

PlanShape::PlanShape(const ModelSpec& model, const TrainingSpec& training,
                     const ParallelPlan& plan, AttentionImpl requested)
    : rank(MakeRankShape(model, training, plan)),
      groups(RankGroupsOf(plan)),
      attention(ResolveAttentionImpl(requested, training.framework, training.precision)),
      lowering(LoweringOf(rank, attention)),
      layers(SplitLayers(model.layers, plan)),
      ops(BuildBlockOps(model, rank, lowering)),
      dense_ops(DenseFfnOps(model, rank, lowering)),
      block_params(BlockParamsPerRank(model, plan.tp, plan.ep, rank.experts > 0, ops.linears())),
      // A dense model's block is the dense-FFN block.
      dense_block_params(rank.experts > 0
                             ? BlockParamsPerRank(model, plan.tp, 1, false, dense_ops.linears())
                             : block_params),
      routed_expert_params(plan.ep > 1 && rank.experts > 0
                               ? RoutedExpertParamsPerRank(model, plan.tp, plan.ep)
                               : 0),
      first(StageShapeOf(model, training, plan, layers, 0, dense_block_params)),
      last(plan.pp == 1 ? first
                        : StageShapeOf(model, training, plan, layers, plan.pp - 1,
                                       dense_block_params)),
      middle(plan.pp > 2 ? StageShapeOf(model, training, plan, layers, 1, dense_block_params)
                         : StageShape{}) {}

void MakePlanShape(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan,
                   AttentionImpl attention, PlanShape* out) {
  // Rebuilt in place: a PlanShape is tens of KiB that assignment would copy.
  static_assert(std::is_trivially_destructible_v<PlanShape>);
  std::construct_at(out, model, training, plan, attention);
}

PlanShape MakePlanShape(const ModelSpec& model, const TrainingSpec& training,
                        const ParallelPlan& plan, AttentionImpl attention) {
  return PlanShape(model, training, plan, attention);
}

StageShape StageOf(const PlanShape& shape, const ModelSpec& model, const TrainingSpec& training,
                   const ParallelPlan& plan, int64_t index) {
  if (index == 0 || index == 1 || index == plan.pp - 1) return shape.stage(index);
  return StageShapeOf(model, training, plan, shape.layers, index, shape.dense_block_params);
}

bool SameShape(const ParallelPlan& a, const ParallelPlan& b) {
  // Every field but those the shape does not follow (the header's list).
  ParallelPlan x = a;
  x.zero_stage = b.zero_stage;
  x.recompute = b.recompute;
  x.tp_comm_overlap = b.tp_comm_overlap;
  x.pp_comm_overlap = b.pp_comm_overlap;
  x.dp_comm_overlap = b.dp_comm_overlap;
  x.zero3_prefetch = b.zero3_prefetch;
  x.offload_optimizer = b.offload_optimizer;
  x.offload_activations = b.offload_activations;
  x.offload_params = b.offload_params;
  return x == b;
}

}  // namespace meshplan
