// `meshplan estimate` on mixture-of-experts models end to end: the exact total and active
// parameter counts of a Mixtral config.json in the table and the JSON, and exit code 2
// with file, field and allowed values for a broken MoE config.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_run.h"

namespace meshplan {
namespace {

std::string MixtralConfig() {
  return std::string(MESHPLAN_SOURCE_DIR) + "/tests/data/hf/mixtral-8x7b/config.json";
}

constexpr const char* kSetup =
    " --cluster 64xH100 --plan dp=8,tp=8,zero=1 --global-batch 64 --seq 4096";

TEST_CASE("estimate prints Mixtral's exact total and active parameters", "[planner][cli][moe]") {
  const test::CliResult table = test::RunMeshplan("estimate --model " + MixtralConfig() + kSetup);
  INFO(table.output);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.output, Catch::Contains("46,702,792,704") && Catch::Contains("12,879,925,248") &&
                               Catch::Contains("active per token") &&
                               Catch::Contains("of which experts"));

  const test::CliResult json =
      test::RunMeshplan("estimate --format json --model " + MixtralConfig() + kSetup, false);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(json.output);
  CHECK(j["params_total"].get<int64_t>() == 46'702'792'704);
  CHECK(j["params_active"].get<int64_t>() == 12'879'925'248);
  // tp=8, one stage: every expert's tp shard, 32 layers x 8 experts x 3 x 4096 x 14336 / 8.
  CHECK(j["expert_params_per_rank"].get<int64_t>() == 32LL * 8 * 3 * 4096 * 14336 / 8);
  // Model FLOPs: 6 x active matmul parameters (the lm_head counted, the embedding lookup not)
  // per token, plus the attention core; never all 8 experts.
  const double tokens = 64.0 * 4096;
  CHECK(j["flops_per_step_no_attention"].get<double>() ==
        Approx(6.0 * tokens * (12'879'925'248.0 - 32000.0 * 4096)).epsilon(1e-12));
}

TEST_CASE("estimate refuses a MoE config.json with top-k above its experts: exit 2",
          "[planner][cli][moe][errors]") {
  const std::string bad =
      std::string(MESHPLAN_SOURCE_DIR) + "/tests/data/hf/mixtral_topk_too_large.json";
  const test::CliResult r = test::RunMeshplan("estimate --model " + bad + kSetup);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("mixtral_topk_too_large.json") &&
                           Catch::Contains("num_experts_per_tok") &&
                           Catch::Contains("1 <= top_k <= experts"));
}

TEST_CASE("run refuses a MoE plan with cp > 1 (routing is per micro-batch): exit 2",
          "[planner][cli][moe][exec]") {
  const std::string plan =
      std::string(MESHPLAN_SOURCE_DIR) + "/tests/data/configs/plan_moe_tiny_cp2.yaml";
  const test::CliResult r = test::RunMeshplan("run " + plan + " --nproc 2");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  // Without a built meshplan-exec (no LibTorch) the hand-over says what to build instead.
  const std::string exec = std::filesystem::path(MESHPLAN_BINARY).parent_path() / "meshplan-exec";
  if (std::filesystem::exists(exec))
    CHECK_THAT(r.output, Catch::Contains("plan_moe_tiny_cp2.yaml") &&
                             Catch::Contains("cp=2 with model.moe") &&
                             Catch::Contains("allowed: cp=1"));
}

}  // namespace
}  // namespace meshplan
