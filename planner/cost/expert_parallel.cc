#include "planner/cost/expert_parallel.h"

#include <algorithm>

#include "planner/cost/block_linears.h"

namespace meshplan {

double LoadImbalance(const ModelSpec& model, const ParallelPlan& plan) {
  if (!model.moe.enabled() || plan.ep <= 1 || model.moe.capacity_factor > 0) return 1.0;
  // The busiest rank cannot get more than every row of its ep group: u <= ep.
  return std::min(std::max(model.moe.load_imbalance, 1.0), static_cast<double>(plan.ep));
}

ExpertParallelWork ExpertParallelOf(const ModelSpec& model, const ParallelPlan& plan,
                                    double tokens, double activation_bytes) {
  ExpertParallelWork w;
  if (!model.moe.enabled()) return w;
  w.ep = plan.ep >= 1 ? plan.ep : 1;
  w.local_experts = model.moe.experts / w.ep;
  w.imbalance = LoadImbalance(model, plan);
  w.rows_per_token = ExpertRowsPerToken(model);
  w.rows_computed = tokens * w.rows_per_token * w.imbalance;
  w.rows_dispatched = tokens * w.rows_per_token / static_cast<double>(plan.tp >= 1 ? plan.tp : 1);
  if (w.ep > 1)
    w.all_to_all_bytes = w.rows_dispatched * static_cast<double>(model.hidden) * activation_bytes;
  return w;
}

}  // namespace meshplan
