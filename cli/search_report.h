// What `meshplan search` prints about a search: the setup line, the ranked plan table,
// --explain (why candidates were removed, and the overlap / offload choices), --explain-plan
// (one plan's fate), the advice when no plan fits, and the same as JSON for --format json.
// search_command.cc runs the search and calls these.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/plan_cost.h"
#include "planner/search/search.h"
#include "planner/search/search_advice.h"
#include "planner/training_setup.h"

namespace meshplan {

// "llama2-7b on 8xH100 (8 x h100-sxm, 85.5 GB each), global batch ..., only ...".
std::string SetupLine(const TrainingSetup& s, const SearchOptions& options);

// The ranked plans as a table: memory with its main parts, the step time split, speed.
// `first_column` heads the row numbers (printed when `number_rows`).
void PrintPlanTable(const std::vector<RankedPlan>& plans, const ClusterSpec& cluster,
                    const char* first_column, bool number_rows);

// --explain: each rule's removals with an example message, then the knob choices.
void PrintExplain(const SearchResult& r, const TrainingSetup& s, const SearchOptions& options);

// --explain-plan: where the probed plan went (removed by a rule, did not fit, or ranked)
// and, when it has a cost and is not the best plan, it beside the best plan term by term
// (planner/cost/cost_difference.h).
void PrintProbe(const ProbeReport& p, const SearchResult& r, const TrainingSetup& s,
                const SearchOptions& options);

// No plan fits: the smallest plan and what would make one fit.
void PrintNoFit(const FitAdvice& advice, const SearchResult& r, const TrainingSetup& s,
                const SearchOptions& options);

// {plan, plan_short, fields, cost} of one ranked plan.
nlohmann::json RankedToJson(const RankedPlan& r);
// The whole search: setup, counts, the rules' tallies, top plans, Pareto frontier, the
// smallest plan and the probe.
nlohmann::json ResultToJson(const SearchResult& r, const TrainingSetup& s, const SearchOptions& options);
// The no-fit advice.
nlohmann::json AdviceToJson(const FitAdvice& advice);

}  // namespace meshplan
