#include "cli/search_simulate.h"

#include <fmt/format.h>

#include <algorithm>

#include "planner/cost/cost_report.h"
#include "planner/parallel_plan.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

// A rate of the analytic cost (MFU, tokens/s or model FLOP/s per GPU) at the simulated step
// time: the same tokens and FLOPs, so it scales inversely with the step time.
double Simulated(const SimulatedPlan& p, double analytic_rate) {
  return p.simulated.total_s > 0
             ? analytic_rate * p.analytic.cost.time.total_s / p.simulated.total_s
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
  fmt::print("{:>4}  {:>8}  {:<{}}  {:>11}  {:>11}  {:>7}  {:>11}  {:>10}  {:>11}  {:>5}\n",
             "sim", "analytic", "plan", width, "analytic", "simulated", "delta", "tokens/s",
             "tok/s/GPU", "TFLOP/s/GPU", "MFU");
  bool unsimulated = false;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const SimulatedPlan& p = ranked[i];
    const double a = p.analytic.cost.time.total_s, s = p.simulated.total_s;
    unsimulated = unsimulated || !p.not_simulated.empty();
    fmt::print("{:>4}  {:>8}  {:<{}}  {:>11}  {:>10}{}  {:>+6.1f}%  {:>11}  {:>10}  {:>11}  "
               "{:>4.1f}%\n",
               i + 1, p.analytic_rank, ToShortPlanString(p.analytic.plan), width, FormatMs(a, 1),
               FormatMs(s, 1), p.not_simulated.empty() ? " " : "*", PercentOf(s - a, a),
               GroupDigits(static_cast<int64_t>(p.tokens_per_s)),
               GroupDigits(static_cast<int64_t>(Simulated(p, p.analytic.cost.tokens_per_s_per_gpu))),
               FormatTflops(Simulated(p, p.analytic.cost.model_flops_per_s_per_gpu)),
               100 * Simulated(p, p.analytic.cost.mfu));
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
                   {"tokens_per_s_per_gpu", Simulated(p, p.analytic.cost.tokens_per_s_per_gpu)},
                   {"model_flops_per_s_per_gpu",
                    Simulated(p, p.analytic.cost.model_flops_per_s_per_gpu)},
                   {"mfu", Simulated(p, p.analytic.cost.mfu)},
                   {"slowest_stage", p.slowest_stage},
                   {"not_simulated", p.not_simulated},
                   {"time", StepTimeToJson(t)}});
  }
  return out;
}

}  // namespace meshplan

