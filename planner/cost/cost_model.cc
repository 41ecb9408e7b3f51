#include "planner/cost/cost_model.h"

#include "planner/cost/plan_evaluator.h"

namespace meshplan {

double UsableBytes(const GpuSpec& gpu, double memory_headroom) {
  return static_cast<double>(gpu.memory_bytes) * (1 - memory_headroom);
}

PlanCost Estimate(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
                  const ParallelPlan& plan, const EstimateOptions& options) {
  PlanEvaluator evaluator(model, cluster, training, options);
  return evaluator.EstimateBase(plan);
}

}  // namespace meshplan
