// Per-GPU figures (issue 34, item 1): tokens/s per GPU and model TFLOP/s per GPU in the cost
// model, estimate, search (table, JSON, --dump) and validate, and the FLOP convention they
// state (torchtitan's count: docs/cost_model.md section 4). compare's: compare_test.cc.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "planner/cost/cost_model.h"
#include "planner/cost/flops.h"
#include "planner/names.h"
#include "planner/validate/validation.h"
#include "tests/cli_run.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using test::CliResult;

TEST_CASE("PerGpuRate divides by GPUs and seconds, Utilization is it over the peak",
          "[planner][flops][per_gpu]") {
  CHECK(PerGpuRate(1200, 4, 3) == Approx(100));
  CHECK(PerGpuRate(1200, 0, 3) == 0);
  CHECK(PerGpuRate(1200, 4, 0) == 0);
  CHECK(Utilization(1200, 4, 400, 3) == Approx(0.25));
  CHECK(Utilization(1200, 4, 0, 3) == 0);
}

TEST_CASE("model FLOPs per token are torchtitan's get_num_flop_per_token",
          "[planner][flops][per_gpu]") {
  // torchtitan: 6 * num_params (the embedding left out) + 12 * l * h * q * t, the causal
  // mask not subtracted. For an untied model P_dense is that num_params.
  const ModelSpec m = testing::Spec7b();
  const int64_t seq = 4096;
  const double num_params = 7'257'206'784.0 - 50257.0 * 4096;  // without the embedding
  const double l = 48, h = 32, q = 4096 / 32, t = seq;
  const double torchtitan = 6 * num_params + 12 * l * h * q * t;
  const StepFlops f = StepFlopsOf(m, testing::Training(8, seq), Recompute::kNone);
  CHECK(f.model / (8.0 * seq) == Approx(torchtitan).epsilon(1e-12));
  // Megatron-LM's current count halves the core attention (causal): 12*l*h*q*t / 2 less.
  CHECK(f.model / (8.0 * seq) - 6 * l * h * q * t == Approx(torchtitan - 6 * l * h * q * t));
}

TEST_CASE("Estimate fills tokens/s and model FLOP/s per GPU", "[planner][cost][per_gpu]") {
  const ModelSpec m = testing::Spec7b();
  const ClusterSpec c = testing::H100Cluster(2);
  const TrainingSpec t = testing::Training(64, 2048);
  ParallelPlan p;
  p.dp = 4;
  p.tp = 4;
  const PlanCost cost = Estimate(m, c, t, p);
  REQUIRE(cost.time.total_s > 0);
  CHECK(cost.tokens_per_s_per_gpu == Approx(cost.tokens_per_s / 16));
  CHECK(cost.model_flops_per_s_per_gpu ==
        Approx(cost.model_flops_per_step / cost.time.total_s / 16));
  CHECK(cost.model_flops_per_s_per_gpu / c.gpu.peak_flops_bf16 == Approx(cost.mfu));
}

TEST_CASE("validate's per-GPU figures are the cost model's", "[planner][validation][per_gpu]") {
  const PublishedRuns runs = LoadPublishedRuns(
      std::string(MESHPLAN_SOURCE_DIR) + "/configs/validation/published_runs.yaml");
  bool tokens_seen = false, tflops_seen = false;
  for (const PublishedTable& table : runs.tables) {
    const ValidatedTable v = PredictPublishedTable(table);
    if (v.rows.empty()) continue;
    const ValidatedRow& row = v.rows.front();
    if (table.figure == PublishedFigure::kTokensPerGpu) {
      tokens_seen = true;
      CHECK(row.predicted == Approx(row.cost.tokens_per_s_per_gpu));
    }
    if (table.figure == PublishedFigure::kTflopsPerGpu) {
      tflops_seen = true;
      CHECK(row.predicted * 1e12 ==
            Approx(PerGpuRate(MegatronFlopsPerIteration(table.rows.front().setup.model,
                                                        table.rows.front().setup.training),
                              row.gpus, row.cost.time.total_s)));
    }
  }
  CHECK(tokens_seen);
  CHECK(tflops_seen);
}

TEST_CASE("estimate and search print the per-GPU figures with the FLOP convention",
          "[planner][cli][per_gpu]") {
  const std::string setup = "--model llama2-7b --cluster 16xH100 --global-batch 64";
  const CliResult table = test::RunMeshplan("estimate " + setup + " --plan dp=4,tp=4");
  INFO(table.output);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.output, Catch::Contains("tokens/s per GPU") &&
                               Catch::Contains("model TFLOP/s per GPU") &&
                               Catch::Contains(kModelFlopsConvention));
  const CliResult json =
      test::RunMeshplan("estimate " + setup + " --plan dp=4,tp=4 --format json", false);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json cost = nlohmann::json::parse(json.output);
  CHECK(cost["tokens_per_s_per_gpu"].get<double>() ==
        Approx(cost["tokens_per_s"].get<double>() / 16));
  CHECK(cost["model_flops_per_s_per_gpu"].get<double>() ==
        Approx(cost["flops_per_step"].get<double>() / cost["step_time_s"].get<double>() / 16));

  const CliResult search = test::RunMeshplan("search " + setup + " --top 3");
  INFO(search.output);
  REQUIRE(search.exit_code == 0);
  CHECK_THAT(search.output, Catch::Contains("tok/s/GPU") && Catch::Contains("TFLOP/s/GPU") &&
                                Catch::Contains(kModelFlopsConvention));
  const CliResult search_json = test::RunMeshplan("search " + setup + " --top 3 --format json", false);
  REQUIRE(search_json.exit_code == 0);
  const nlohmann::json s = nlohmann::json::parse(search_json.output);
  for (const auto& t : s["top"])
    CHECK(t["cost"]["model_flops_per_s_per_gpu"].get<double>() ==
          Approx(t["cost"]["mfu"].get<double>() * 989.4e12).epsilon(1e-3));
  for (const auto& point : s["pareto"])
    CHECK(point["tokens_per_s_per_gpu"].get<double>() ==
          Approx(point["tokens_per_s"].get<double>() / 16));
}

TEST_CASE("search --simulate-top rates the simulated step per GPU", "[planner][cli][per_gpu]") {
  const CliResult r = test::RunMeshplan(
      "search --model llama2-7b --cluster 8xH100 --global-batch 32 --top 2 --simulate-top 2 "
      "--format json",
      false);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  REQUIRE(j["simulated"].size() == 2);
  for (const auto& p : j["simulated"]) {
    const double step = p["simulated_step_s"];
    CHECK(p["tokens_per_s_per_gpu"].get<double>() == Approx(32.0 * 4096 / step / 8));
    CHECK(p["model_flops_per_s_per_gpu"].get<double>() ==
          Approx(p["mfu"].get<double>() * 989.4e12).epsilon(1e-3));
  }
}

TEST_CASE("search --dump has the per-GPU columns", "[planner][cli][per_gpu]") {
  const test::ScratchDir scratch("per_gpu_dump");
  const std::string path = scratch.Path("all.csv");
  const CliResult r = test::RunMeshplan(
      "search --model llama2-7b --cluster 8xH100 --global-batch 32 --top 1 --dump '" + path + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(path);
  std::string header, row;
  REQUIRE(std::getline(in, header));
  REQUIRE(std::getline(in, row));
  CHECK_THAT(header, Catch::Contains(",tokens_per_s,tokens_per_s_per_gpu,model_flops_per_s_per_gpu,mfu,"));
}

}  // namespace
}  // namespace meshplan
