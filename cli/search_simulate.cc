#include "cli/search_simulate.h"

#include <fmt/format.h>

#include <algorithm>

#include "planner/cost/cost_report.h"
#include "planner/parallel_plan.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

// MFU scales inversely with the step time for the same FLOPs.
double SimulatedMfu(const SimulatedPlan& p) {
  return p.simulated.total_s > 0
             ? p.analytic.cost.mfu * p.analytic.cost.time.total_s / p.simulated.total_s
             : 0;
}

}  // namespace

std::vector<SimulatedPlan> SimulateTopPlans(const TrainingSetup& setup, const std::vector<RankedPlan>& top,
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
  bool unsimulated = false;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const SimulatedPlan& p = ranked[i];
    const double a = p.analytic.cost.time.total_s, s = p.simulated.total_s;
    unsimulated = unsimulated || !p.not_simulated.empty();
    fmt::print("{:>4}  {:>8}  {:<{}}  {:>11}  {:>10}{}  {:>+6.1f}%  {:>11}  {:>4.1f}%\n", i + 1,
               p.analytic_rank, ToShortPlanString(p.analytic.plan), width, FormatMs(a, 1),
               FormatMs(s, 1), p.not_simulated.empty() ? " " : "*", PercentOf(s - a, a),
               GroupDigits(static_cast<int64_t>(p.tokens_per_s)), 100 * SimulatedMfu(p));
  }
  if (unsimulated)
    fmt::print("* offloading plans are not simulated (the simulator does not draw host copies): "
               "their analytic time is shown\n");
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
                   {"not_simulated", p.not_simulated},
                   {"time", StepTimeToJson(t)}});
  }
  return out;
}

}  // namespace meshplan

