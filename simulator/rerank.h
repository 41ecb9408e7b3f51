// Re-ranking plans by simulation: what `meshplan search --simulate-top K` runs on the
// best K analytic plans of a search.
//
// Each plan is simulated (no timeline) and the list is sorted by simulated step time,
// shortest first; ties keep the analytic order. A plan with choices the simulation does
// not draw (NotSimulated, simulate.h: the offloads) is not simulated: it keeps its analytic
// time, and `not_simulated` names the choices, so it is neither favoured nor penalised. Plans are simulated on `threads`
// worker threads (0 = all cores); the result does not depend on the thread count.
#pragma once

#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/model_spec.h"
#include "planner/search/pareto.h"
#include "planner/training_spec.h"
#include "simulator/simulate.h"

namespace meshplan {

struct SimulatedPlan {
  RankedPlan analytic;        // the plan with its analytic cost
  int analytic_rank = 0;      // 1-based place in the input list
  StepTimeBreakdown simulated;  // SimResult::time
  int64_t slowest_stage = 0;
  double tokens_per_s = 0;    // global tokens per step / simulated step time
  std::vector<std::string> not_simulated;  // NotSimulated(plan); non-empty: analytic time
};

std::vector<SimulatedPlan> RerankBySimulation(const ModelSpec& model, const ClusterSpec& cluster,
                                              const TrainingSpec& training,
                                              const std::vector<RankedPlan>& plans,
                                              int threads = 0);

}  // namespace meshplan
