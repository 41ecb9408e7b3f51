// search --explain-plan X beside the best plan, term by term (issue 34, item 3): DiffCosts
// over the cost report's terms, the sentence naming the largest differences, and the CLI's
// table and JSON.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "planner/cost/cost_difference.h"
#include "planner/cost/cost_model.h"
#include "tests/cli_run.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using test::CliResult;

RankedPlan Costed(int64_t pp, double compute_s, double bubble_s, double tp_s,
                  double activations_bytes) {
  RankedPlan r;
  r.plan.dp = 8 / pp;
  r.plan.pp = pp;
  StepTimeBreakdown& t = r.cost.time;
  t.compute_s = compute_s;
  t.bubble_s = bubble_s;
  t.exposed_comm_s[MeshDim::kTp] = tp_s;
  t.total_s = compute_s + bubble_s + tp_s;
  MemoryBreakdown& m = r.cost.memory;
  m.params_bytes = 10e9 / pp;
  m.activations_bytes = activations_bytes;
  m.total_bytes = m.params_bytes + activations_bytes;
  return r;
}

TEST_CASE("DiffCosts: each term of both plans, the difference, the largest ones named",
          "[planner][explain_plan]") {
  const ModelSpec model = testing::Spec7b();
  const RankedPlan best = Costed(1, 2.0, 0.0, 0.10, 20e9);
  const RankedPlan x = Costed(2, 2.0, 0.41, 0.22, 29.1e9);
  const CostDifference d = DiffCosts(x, best, model);
  CHECK(d.plan == "dp=4,pp=2");
  CHECK(d.other == "dp=8");
  // The lines: only those not 0 on both plans.
  std::vector<std::string> time_keys, memory_keys;
  for (const TermDifference& t : d.time) time_keys.push_back(t.plan.key);
  for (const TermDifference& t : d.memory) memory_keys.push_back(t.plan.key);
  CHECK(time_keys == std::vector<std::string>{"compute_s", "exposed_tp_s", "bubble_s"});
  CHECK(memory_keys == std::vector<std::string>{"params_bytes", "activations_bytes"});
  CHECK(d.time[2].difference() == Approx(0.41));
  CHECK(d.memory[0].difference() == Approx(-5e9));
  // 2.63 s against 2.10 s: 25% slower, from the bubble first, then TP.
  CHECK(d.summary ==
        "dp=4,pp=2 is 25% slower than dp=8, mostly from its pipeline bubble (+410.0 ms) and "
        "exposed tp communication (+120.0 ms); it needs 3.82 GiB more per GPU, most for "
        "activations (+8.48 GiB).");
  // The other way round: faster, and less memory, most from activations.
  const CostDifference back = DiffCosts(best, x, model);
  CHECK_THAT(back.summary, Catch::StartsWith("dp=8 is 20% faster than dp=4,pp=2, mostly from its "
                                             "pipeline bubble (-410.0 ms)"));
  CHECK_THAT(back.summary, Catch::EndsWith("it needs 3.82 GiB less per GPU, most from activations "
                                           "(-8.48 GiB)."));
  // The same plan: as fast, the same memory.
  CHECK(DiffCosts(best, best, model).summary ==
        "dp=8 is as fast as dp=8; it needs the same memory per GPU.");
  const nlohmann::json j = CostDifferenceToJson(d);
  CHECK(j["time"][2]["key"] == "bubble_s");
  CHECK(j["time_total"]["difference"].get<double>() == Approx(0.53));
  CHECK(j["summary"] == d.summary);
  CHECK_THAT(FormatCostDifference(d, "  "),
             Catch::Contains("pipeline bubble") && Catch::Contains("+0.4100") &&
                 Catch::Contains("activations") && Catch::Contains("+8.48"));
}

TEST_CASE("search --explain-plan prints the plan beside the best one, its terms adding up",
          "[planner][cli][explain_plan]") {
  const std::string setup =
      "search --model llama2-7b --cluster 16xH100 --global-batch 128 --top 1 --explain-plan "
      "dp=4,tp=2,pp=2";
  const CliResult table = test::RunMeshplan(setup);
  INFO(table.output);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.output, Catch::Contains("beside the best plan") &&
                               Catch::Contains("Memory per GPU (GiB)") &&
                               Catch::Contains("Step time (s)") &&
                               Catch::Contains("pipeline bubble") &&
                               Catch::Contains("% slower than"));
  const CliResult json = test::RunMeshplan(setup + " --format json", false);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(json.output);
  const nlohmann::json& d = j["probe"]["versus_best"];
  CHECK(d["other"] == j["top"][0]["plan_short"]);
  // The time lines are the whole step: their differences add up to the total's (the
  // "of which" recompute line is inside compute).
  double sum = 0;
  for (const auto& line : d["time"])
    if (line["key"] != "recompute_s") sum += line["difference"].get<double>();
  CHECK(sum == Approx(d["time_total"]["difference"].get<double>()).margin(1e-9));
  CHECK(d["time_total"]["other"].get<double>() ==
        Approx(j["top"][0]["cost"]["step_time_s"].get<double>()));
  CHECK(d["memory_total"]["plan"].get<double>() ==
        Approx(j["probe"]["cost"]["memory"]["total_bytes"].get<double>()));
  CHECK_THAT(d["summary"].get<std::string>(), Catch::Contains("mostly from its"));
  // The best plan itself has nothing to be compared with.
  const std::string best = j["top"][0]["plan"];
  const CliResult self = test::RunMeshplan(
      "search --model llama2-7b --cluster 16xH100 --global-batch 128 --top 1 --format json "
      "--explain-plan '" + best + "'", false);
  REQUIRE(self.exit_code == 0);
  CHECK_FALSE(nlohmann::json::parse(self.output)["probe"].contains("versus_best"));
}

}  // namespace
}  // namespace meshplan
