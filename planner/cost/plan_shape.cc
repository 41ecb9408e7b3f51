#include "planner/cost/plan_shape.h"

#include <cassert>
#include <new>
#include <type_traits>

namespace meshplan {
namespace {

// `dense_block_params`: PlanShape::dense_block_params.
StageShape StageShapeOf(const ModelSpec& model, const TrainingSpec& training,
                        const ParallelPlan& plan, const StageLayers& split, int64_t stage,
                        int64_t dense_block_params) {
  StageShape s;
  s.layers = split.Of(stage);
  s.largest_chunk = split.LargestChunkOf(stage);
  s.first_chunk = split.ChunkOf(stage, 0);
  s.last_chunk = split.ChunkOf(stage, split.vpp - 1);
  s.moe_layers = MoeLayersOfStage(model, plan, stage);
  s.params = CountStageParams(model, plan, stage, s.layers, s.moe_layers, dense_block_params);
  s.in_flight = CountMicrobatchesInFlight(plan, model.layers,
                                          plan.num_microbatches(training.global_batch), stage);
  return s;
}

}  // namespace

const StageShape& PlanShape::stage(int64_t index) const {
  if (index == 0) return first;
  if (index == layers.pp - 1) return last;
  assert(index == 1 && "PlanShape holds stages 0, 1 and pp - 1");
  return middle;
}

void MakePlanShape(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan,
                   AttentionImpl attention, PlanShape* out) {
  PlanShape& p = *out;
  // Built in place, as the op lists below (a 280-byte copy otherwise).
  static_assert(std::is_trivially_destructible_v<RankShape>);
  ::new (&p.rank) RankShape(MakeRankShape(model, training, plan));
  p.groups = RankGroupsOf(plan);
  p.attention = ResolveAttentionImpl(attention, training.framework, training.precision);
  p.lowering = LoweringOf(p.rank, p.attention);
  p.layers = SplitLayers(model.layers, plan);
  // Built in place: a BlockOps is several KiB that assignment would copy item by item.
  static_assert(std::is_trivially_destructible_v<BlockOps>);
  ::new (&p.ops) BlockOps(BuildBlockOps(model, p.rank, p.lowering));
  if (p.rank.experts > 0) {
    RankShape dense = p.rank;
    dense.experts = 0;  // the dense FFN of width F/tp
    p.dense_ops = BuildBlockOps(model, dense, p.lowering);
  } else if (p.dense_ops.size() > 0) {
    p.dense_ops = BlockOps();  // (a zeroed value: only when *out held a MoE shape)
  }
  // The parameters of the matrices the op lists hold (BlockOps::linears()).
  const bool moe = p.rank.experts > 0;
  p.block_params = BlockParamsPerRank(model, plan.tp, plan.ep, moe, p.ops.linears());
  // A dense model's block is the dense-FFN block.
  p.dense_block_params =
      moe ? BlockParamsPerRank(model, plan.tp, 1, false, p.dense_ops.linears()) : p.block_params;
  p.routed_expert_params =
      plan.ep > 1 && moe ? RoutedExpertParamsPerRank(model, plan.tp, plan.ep) : 0;
  const int64_t dense = p.dense_block_params;
  p.first = StageShapeOf(model, training, plan, p.layers, 0, dense);
  p.last = plan.pp == 1 ? p.first : StageShapeOf(model, training, plan, p.layers, plan.pp - 1, dense);
  p.middle = plan.pp > 2 ? StageShapeOf(model, training, plan, p.layers, 1, dense) : StageShape{};
}

PlanShape MakePlanShape(const ModelSpec& model, const TrainingSpec& training,
                        const ParallelPlan& plan, AttentionImpl attention) {
  PlanShape p;
  MakePlanShape(model, training, plan, attention, &p);
  return p;
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
