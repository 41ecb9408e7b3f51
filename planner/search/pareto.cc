#include "planner/search/pareto.h"

#include <algorithm>

namespace meshplan {

namespace {

// A point as the frontier compares it.
struct Key {
  double memory;
  double tokens_per_s;
  int64_t ordinal;
};
Key KeyOf(const RankedPlan& p) {
  return {p.cost.memory.total_bytes, p.cost.tokens_per_s, p.ordinal};
}
bool Dominates(const Key& a, const Key& b) {
  if (a.memory > b.memory || a.tokens_per_s < b.tokens_per_s) return false;
  return a.memory < b.memory || a.tokens_per_s > b.tokens_per_s || a.ordinal < b.ordinal;
}

}  // namespace

bool Dominates(const RankedPlan& a, const RankedPlan& b) { return Dominates(KeyOf(a), KeyOf(b)); }

bool ParetoFrontier::Offer(const ParallelPlan& plan, const PlanCost& cost, int64_t ordinal) {
  const Key point{cost.memory.total_bytes, cost.tokens_per_s, ordinal};
  const double memory = point.memory;
  // The last point with memory <= this one has the highest tokens/s of all such points
  // (the frontier rises in both): if it does not dominate, nothing before it does.
  auto after = std::upper_bound(points_.begin(), points_.end(), memory,
                                [](double m, const RankedPlan& p) {
                                  return m < p.cost.memory.total_bytes;
                                });
  if (after != points_.begin() && Dominates(KeyOf(*std::prev(after)), point)) return false;
  // Points it dominates have memory >= its own and follow it contiguously
  // (including an exact tie just before `after`).
  auto first = after;
  if (first != points_.begin() && Dominates(point, KeyOf(*std::prev(first)))) --first;
  auto last = first;
  while (last != points_.end() && Dominates(point, KeyOf(*last))) ++last;
  first = points_.erase(first, last);
  points_.insert(first, RankedPlan{plan, cost, ordinal});
  return true;
}

void ParetoFrontier::Merge(const ParetoFrontier& other) {
  for (const RankedPlan& p : other.points_) Offer(p.plan, p.cost, p.ordinal);
}

}  // namespace meshplan
