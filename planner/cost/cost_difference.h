// One plan's cost beside another's, term by term: what `meshplan search --explain-plan X`
// prints of X against the best plan. The terms are the cost report's (MemoryTerms,
// TimeTerms in planner/cost/cost_report.h); each line has both values and their difference
// (X minus the other), and one sentence names the largest differences:
//   "dp=2,tp=4 is 23% slower than dp=8, mostly from its pipeline bubble (+0.41 s) and
//    exposed tp communication (+0.12 s); it needs 9.10 GB more per GPU, most for
//    activations (+9.10 GB)."
// Pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/cost/cost_report.h"
#include "planner/plan_cost.h"

namespace meshplan {

struct TermDifference {
  CostTerm plan;   // this plan's line
  CostTerm other;  // the other plan's line (same key)
  double difference() const { return plan.value - other.value; }
};

struct CostDifference {
  std::string plan, other;             // ToShortPlanString of each
  std::vector<TermDifference> memory;  // the lines either plan has (not 0 on both)
  std::vector<TermDifference> time;    // the lines the report shows for either, not 0 on both
  double memory_plan = 0, memory_other = 0;  // MemoryBreakdown::total_bytes (the peak)
  double time_plan = 0, time_other = 0;      // StepTimeBreakdown::total_s
  std::string summary;                 // the sentence above
};

// `plan` with its cost beside `other` with its, for the same model.
CostDifference DiffCosts(const RankedPlan& plan, const RankedPlan& other, const ModelSpec& model);

// {plan, other, memory: [{key, name, plan, other, difference}], memory_total {...},
//  time: [...], time_total {...}, summary}; bytes and seconds.
nlohmann::json CostDifferenceToJson(const CostDifference& d);
// The lines as a table (memory in GB, time in s; the columns headed "this plan", "best
// plan" and "difference") and the sentence, indented by `indent`.
std::string FormatCostDifference(const CostDifference& d, const std::string& indent);

}  // namespace meshplan
