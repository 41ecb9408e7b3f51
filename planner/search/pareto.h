// ParetoFrontier: the plans that no other plan beats on both memory per GPU (lower is
// better) and tokens/s (higher is better), i.e. the memory-vs-throughput trade-off.
//
// A point dominates another when it is no worse on both and better on one; exact
// ties are broken by the lower ordinal (planner/search/plan_space.h), so the frontier is
// one well-defined set whatever order the points are offered in (the search's
// threads each build one and merge them). Kept sorted by memory ascending, which
// makes tokens/s strictly ascending too. Not thread-safe: one per thread.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"

namespace meshplan {

class ParetoFrontier {
 public:
  // Adds the point unless the frontier dominates it, dropping the points it dominates.
  // O(log n) when rejected (the common case), O(n) when kept. Returns true when kept.
  bool Offer(const ParallelPlan& plan, const PlanCost& cost, int64_t ordinal);
  void Merge(const ParetoFrontier& other);
  const std::vector<RankedPlan>& points() const { return points_; }

 private:
  std::vector<RankedPlan> points_;
};

// a dominates b (see above).
bool Dominates(const RankedPlan& a, const RankedPlan& b);

}  // namespace meshplan
