// The error band printed beside a prediction (planner/validate/error_band.h).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "planner/validate/error_band.h"
#include "tests/cli_run.h"

namespace meshplan {
namespace {

ValidatedRow Row(const std::string& framework, const std::string& gpu, double error_pct) {
  ValidatedRow row;
  row.framework = framework;
  row.gpu = gpu;
  row.error_pct = error_pct;
  return row;
}

TEST_CASE("the band is the mean |error| of one framework's time rows on one GPU generation",
          "[planner][validation][band]") {
  ValidationReport report;
  ValidatedTable tokens;
  tokens.figure = PublishedFigure::kTokensPerGpu;
  tokens.rows = {Row("megatron-core", "h100-sxm", +10), Row("megatron-core", "h100-pcie", -20),
                 Row("megatron-core", "a100-80gb", 50), Row("torchtitan", "h100-sxm", 40)};
  ValidatedRow oom = Row("megatron-core", "h100-sxm", 0);
  oom.has_published = false;  // a run with no figure counts for nothing
  tokens.rows.push_back(oom);
  ValidatedTable memory;  // memory rows are not the step time's band
  memory.figure = PublishedFigure::kActivationMemory;
  memory.rows = {Row("megatron-core", "h100-sxm", 90)};
  report.tables = {tokens, memory};
  const ErrorBand band = ErrorBandOf(report, "megatron-core", "h100");
  CHECK(band.runs == 2);
  CHECK(band.mape_pct == Approx(15));
  CHECK(DescribeBand(band) == "+-15%: megatron-core on h100, 2 published runs");
  const ErrorBand none = ErrorBandOf(report, "deepspeed", "h100");
  CHECK(none.runs == 0);
  CHECK(DescribeBand(none) == "no published run of deepspeed on h100 backs this prediction");
  CHECK(GpuGeneration("a100-80gb") == "a100");
}

TEST_CASE("estimate and search print the band validate measured, or that none backs them",
          "[planner][validation][band][cli]") {
  // NeMo 24.07's H100 table backs the nemo profile with its own runs.
  const test::CliResult estimate = test::RunMeshplan("estimate --framework nemo --format json");
  REQUIRE(estimate.exit_code == 0);
  const nlohmann::json band = nlohmann::json::parse(estimate.output)["error_band"];
  CHECK(band["framework"] == "nemo");
  CHECK(band["generation"] == "h100");
  CHECK(band["runs"].get<int>() > 0);
  CHECK(band["runs_of"] == "");
  // No published run used megatron-core (the GPU default); nemo is built on it, so its band
  // is NeMo's runs predicted under megatron-core, and says so. On A100 no run of megatron-core
  // or of a framework built on it exists.
  const test::CliResult by_default = test::RunMeshplan("estimate --format json");
  REQUIRE(by_default.exit_code == 0);
  const nlohmann::json borrowed = nlohmann::json::parse(by_default.output)["error_band"];
  CHECK(borrowed["framework"] == "megatron-core");
  CHECK(borrowed["runs_of"] == "nemo");
  CHECK(borrowed["runs"] == band["runs"]);
  CHECK(borrowed["mape_pct"].get<double>() > 0);
  CHECK(borrowed["mape_pct"] != band["mape_pct"]);  // predicted under megatron-core, not nemo
  const test::CliResult text = test::RunMeshplan("estimate");
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.output, Catch::Contains("published runs of nemo (built on megatron-core)"));
  const test::CliResult a100 = test::RunMeshplan("estimate --cluster 8xA100-80GB");
  REQUIRE(a100.exit_code == 0);
  CHECK_THAT(a100.output, Catch::Contains("no published run of megatron-core on a100"));
  // torchtitan's A100 runs ran its April 2024 version (torchtitan-2024-04, version_of:
  // torchtitan): they back the later profile's band on A100, predicted under it.
  const test::CliResult titan =
      test::RunMeshplan("estimate --framework torchtitan --cluster 8xA100-80GB --format json");
  REQUIRE(titan.exit_code == 0);
  const nlohmann::json earlier = nlohmann::json::parse(titan.output)["error_band"];
  CHECK(earlier["runs_of"] == "torchtitan-2024-04");
  CHECK(earlier["relation"] == "an earlier version of");
  CHECK(earlier["runs"].get<int>() == 8);
  const test::CliResult search = test::RunMeshplan("search --framework deepspeed --top 1");
  REQUIRE(search.exit_code == 0);
  CHECK_THAT(search.output, Catch::Contains("Step times: no published run of deepspeed on h100"));
  CHECK_THAT(search.output, Catch::Contains("tok/s/GPU"));
}

}  // namespace
}  // namespace meshplan
