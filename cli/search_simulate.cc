#include "cli/search_simulate.h"

#if MESHPLAN_SIMULATOR_ENABLED

#include <fmt/format.h>

#include <algorithm>

#include "planner/cost_report.h"
#include "planner/parallel_plan.h"

namespace meshplan {
namespace {

std::string Ms(double s) { return fmt::format("{:.1f} ms", s * 1e3); }

// MFU scales inversely with the step time for the same FLOPs.
double SimulatedMfu(const SimulatedPlan& p) {
  return p.simulated.total_s > 0
             ? p.analytic.cost.mfu * p.analytic.cost.time.total_s / p.simulated.total_s
             : 0;
}

}  // namespace

std::vector<SimulatedPlan> SimulateTopPlans(const Setup& setup, const std::vector<RankedPlan>& top,
                                            int k, int threads) {
  const std::vector<RankedPlan> first(top.begin(),
                                      top.begin() + std::min<size_t>(top.size(), std::max(k, 0)));
  return RerankBySimulation(setup.model, setup.cluster, setup.training, first, threads);
}

void PrintSimulatedRanking(const std::vector<SimulatedPlan>& ranked) {
  size_t width = 4;
  for (const SimulatedPlan& p : ranked) width = std::max(width, ToShortPlanString(p.analytic.plan).size());
  fmt::print("\nRe-ranked by simulation (the best {} analytic plans, one step each):\n",
             ranked.size());
  fmt::print("{:>4}  {:>8}  {:<{}}  {:>11}  {:>11}  {:>7}  {:>11}  {:>5}\n", "sim", "analytic",
             "plan", width, "analytic", "simulated", "delta", "tokens/s", "MFU");
  for (size_t i = 0; i < ranked.size(); ++i) {
    const SimulatedPlan& p = ranked[i];
    const double a = p.analytic.cost.time.total_s, s = p.simulated.total_s;
    fmt::print("{:>4}  {:>8}  {:<{}}  {:>11}  {:>11}  {:>+6.1f}%  {:>11}  {:>4.1f}%\n", i + 1,
               p.analytic_rank, ToShortPlanString(p.analytic.plan), width, Ms(a), Ms(s),
               a > 0 ? 100 * (s - a) / a : 0.0, GroupDigits(static_cast<int64_t>(p.tokens_per_s)),
               100 * SimulatedMfu(p));
  }
}

nlohmann::json SimulatedRankingToJson(const std::vector<SimulatedPlan>& ranked) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < ranked.size(); ++i) {
    const SimulatedPlan& p = ranked[i];
    const StepTimeBreakdown& t = p.simulated;
    out.push_back({{"rank", i + 1},
                   {"analytic_rank", p.analytic_rank},
                   {"plan", ToPlanString(p.analytic.plan)},
                   {"plan_short", ToShortPlanString(p.analytic.plan)},
                   {"analytic_step_s", p.analytic.cost.time.total_s},
                   {"simulated_step_s", t.total_s},
                   {"tokens_per_s", p.tokens_per_s},
                   {"mfu", SimulatedMfu(p)},
                   {"slowest_stage", p.slowest_stage},
                   {"time",
                    {{"compute_s", t.compute_s},
                     {"recompute_s", t.recompute_s},
                     {"exposed_comm_s", PerMeshDimToJson(t.exposed_comm_s)},
                     {"bubble_s", t.bubble_s},
                     {"optimizer_s", t.optimizer_s},
                     {"total_s", t.total_s}}}});
  }
  return out;
}

}  // namespace meshplan

#endif  // MESHPLAN_SIMULATOR_ENABLED
