// `meshplan search --simulate-top K`: the best K plans of the analytic search re-ranked
// by the event simulator (simulator/rerank.h), as a table and as JSON.
// search_command.cc calls it.
#pragma once


#include <nlohmann/json.hpp>
#include <vector>

#include "cli/setup_options.h"
#include "planner/search/pareto.h"
#include "simulator/rerank.h"

namespace meshplan {

// Simulates the first k of `top` (analytic order) on `threads` threads (0 = all cores).
std::vector<SimulatedPlan> SimulateTopPlans(const TrainingSetup& setup, const std::vector<RankedPlan>& top,
                                            int k, int threads);

// "Re-ranked by simulation": simulated rank, analytic rank, plan, both step times and
// their difference, simulated tokens/s (in all and per GPU), model TFLOP/s per GPU and MFU.
void PrintSimulatedRanking(const std::vector<SimulatedPlan>& ranked);

// [{rank, analytic_rank, plan, plan_short, analytic_step_s, simulated_step_s,
//   tokens_per_s, tokens_per_s_per_gpu, model_flops_per_s_per_gpu, mfu, slowest_stage,
//   time {...}}], best first.
nlohmann::json SimulatedRankingToJson(const std::vector<SimulatedPlan>& ranked);

}  // namespace meshplan

