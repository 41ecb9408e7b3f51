// Expert parallelism end to end through the built `meshplan`: estimate and search take
// ep=, the report shows the all-to-all, and a bad ep exits 2 naming the field, the value
// and the allowed values.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_run.h"

namespace meshplan {
namespace {

std::string MixtralConfig() {
  return std::string(MESHPLAN_SOURCE_DIR) + "/tests/data/hf/mixtral-8x7b/config.json";
}

constexpr const char* kSetup = " --cluster 64xH100 --global-batch 64 --seq 4096";

TEST_CASE("estimate with ep: expert states per rank shrink, the all-to-all is reported",
          "[planner][cli][moe][ep]") {
  auto json = [](const std::string& plan) {
    const test::CliResult r = test::RunMeshplan(
        "estimate --format json --model " + MixtralConfig() + kSetup + " --plan " + plan, false);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.output);
  };
  const nlohmann::json one = json("dp=8,tp=8,zero=1");
  const nlohmann::json eight = json("dp=8,tp=8,zero=1,ep=8");
  // tp=8, one stage: 32 layers x 8/ep routed experts x 3 x 4096 x 14336 / 8.
  CHECK(eight["params_total"].get<int64_t>() == 46'702'792'704);
  CHECK(one["expert_params_per_rank"].get<int64_t>() - eight["expert_params_per_rank"].get<int64_t>() ==
        32LL * 7 * 3 * 4096 * 14336 / 8);
  CHECK(one["comm_bytes_per_step"]["ep"].get<double>() == 0);
  CHECK(eight["comm_bytes_per_step"]["ep"].get<double>() > 0);
  CHECK(eight["time"]["exposed_comm_s"]["ep"].get<double>() > 0);
}

TEST_CASE("bad ep exits 2 with the field, the value and the allowed values",
          "[planner][cli][moe][ep][errors]") {
  struct Case {
    std::string model, plan;
    std::vector<std::string> says;
  };
  const Case cases[] = {
      {MixtralConfig(), "dp=8,tp=8,ep=3", {"ep_divides_dp", "ep=3 does not divide dp=8", "allowed: 1, 2, 4, 8"}},
      {MixtralConfig(), "dp=64,ep=16", {"ep_divides_experts", "moe.experts=8", "allowed with dp=64: 1, 2, 4, 8"}},
      {"llama3-8b", "dp=64,ep=2", {"ep_needs_moe", "ep=2", "allowed: ep=1"}},
      {MixtralConfig(), "dp=64,ep=0", {"factors_positive", "ep=0"}},
  };
  for (const Case& c : cases) {
    const test::CliResult r =
        test::RunMeshplan("estimate --model " + c.model + kSetup + " --plan " + c.plan);
    INFO(c.plan << "\n" << r.output);
    CHECK(r.exit_code == 2);
    for (const std::string& s : c.says) CHECK_THAT(r.output, Catch::Contains(s));
  }
  const test::CliResult text = test::RunMeshplan("estimate --model " + MixtralConfig() + kSetup +
                                                 " --plan dp=64,ep=x");
  CHECK(text.exit_code == 2);
  CHECK_THAT(text.output, Catch::Contains("ep") && Catch::Contains("integer"));
}

TEST_CASE("search ranks plans with ep and pins it", "[planner][cli][moe][ep][search]") {
  const test::CliResult r = test::RunMeshplan("search --format json --model mixtral-8x7b" +
                                                  std::string(kSetup) + " --only ep=8,tp=8",
                                              false);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  REQUIRE(j.contains("top"));
  REQUIRE_FALSE(j["top"].empty());
  for (const auto& plan : j["top"]) CHECK(plan["fields"]["ep"].get<int64_t>() == 8);
}

}  // namespace
}  // namespace meshplan
