#include "planner/cost/memory_model.h"

namespace meshplan {

MemoryBreakdown EstimateStageMemory(const ModelSpec& model, const TrainingSpec& training,
                                    const ParallelPlan& plan, MemoryModel memory_model,
                                    int64_t stage, const MemoryOptions& options) {
  return memory_model == MemoryModel::kSeed
             ? SeedStageMemory(model, training, plan, stage)
             : DetailedStageMemory(model, training, plan, stage, options);
}

MemoryBreakdown EstimateMemory(const ModelSpec& model, const TrainingSpec& training,
                               const ParallelPlan& plan, MemoryModel memory_model,
                               const MemoryOptions& options) {
  // The seed model reads no shape.
  const PlanShape shape = memory_model == MemoryModel::kDetailed
                              ? MakePlanShape(model, training, plan, options.attention)
                              : PlanShape{};
  return EstimateMemory(model, training, plan, memory_model, options, shape);
}

MemoryBreakdown EstimateMemory(const ModelSpec& model, const TrainingSpec& training,
                               const ParallelPlan& plan, MemoryModel memory_model,
                               const MemoryOptions& options, const PlanShape& shape) {
  // The detailed model's per-block terms are the same on every stage: computed once.
  DetailedBlockTerms block;
  if (memory_model == MemoryModel::kDetailed)
    block = DetailedBlockTermsOf(plan, shape);
  auto stage_memory = [&](int64_t stage) {
    return memory_model == MemoryModel::kSeed
               ? SeedStageMemory(model, training, plan, stage)
               : DetailedStageMemory(model, training, plan, stage, options, shape, block);
  };
  // Stages strictly between the first and the last hold the same parameters and
  // buffers, and every schedule holds non-increasing micro-batches in flight along
  // the pipeline (planner/cost/pipeline_in_flight.h): stage 1 bounds them all, so only
  // stages 0, 1 and pp - 1 need evaluating (ties keep the earlier stage).
  MemoryBreakdown worst = stage_memory(0);
  auto consider = [&](int64_t stage) {
    MemoryBreakdown b = stage_memory(stage);
    if (b.total_bytes > worst.total_bytes) worst = std::move(b);
  };
  if (plan.pp > 1) consider(1);
  if (plan.pp > 2) consider(plan.pp - 1);
  return worst;
}

}  // namespace meshplan
