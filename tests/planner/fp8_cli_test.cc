// --precision fp8 end to end: estimate names both MFUs; fp8 on a GPU without FP8 tensor
// cores (flag or plan file) exits 2 with the reason; meshplan run refuses fp8.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_run.h"

namespace meshplan {
namespace {

using test::CliResult;
using test::RunMeshplan;

TEST_CASE("estimate --precision fp8 on H100 states MFU against the bf16 and the FP8 peak",
          "[planner][cli][fp8]") {
  const std::string setup = "--model llama2-7b --cluster 8xH100 --plan dp=8,mbs=1 "
                            "--global-batch 64 --seq 4096 --precision fp8";
  const CliResult table = RunMeshplan("estimate " + setup);
  INFO(table.output);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.output, Catch::Contains("MFU (with attention, bf16 peak)") &&
                               Catch::Contains("MFU (with attention, fp8 peak)"));
  const CliResult json = RunMeshplan("estimate --format json " + setup, false);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(json.output);
  CHECK(j["mfu_fp8_peak"].get<double>() == Approx(j["mfu"].get<double>() * 989.4 / 1978.9));
}

TEST_CASE("fp8 on an A100 or A40 exits 2 with the reason", "[planner][cli][fp8]") {
  for (const char* cluster : {"8xA100", "2xa40-pcie"}) {
    const CliResult r = RunMeshplan(std::string("search --model llama2-7b --cluster ") + cluster +
                                    " --global-batch 8 --precision fp8");
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--precision") && Catch::Contains("FP8 tensor cores") &&
                             Catch::Contains("bf16"));
  }
  const CliResult estimate =
      RunMeshplan("estimate --model llama2-7b --cluster 8xA100 --plan dp=8 --precision fp8");
  CHECK(estimate.exit_code == 2);
}

TEST_CASE("a plan file with precision fp8 on an A100 cluster is refused at its line",
          "[planner][cli][fp8]") {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("meshplan_fp8_a100_" + std::to_string(getpid()) + ".yaml");
  {
    std::ofstream out(file);
    out << "model: llama2-7b\ncluster: 8xA100\ntraining:\n  global_batch: 8\n  seq_len: 4096\n"
           "  precision: fp8\nplan:\n  dp: 8\n";
  }
  const CliResult r = RunMeshplan("estimate --plan-file '" + file.string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(file.filename().string() + ":6") &&
                           Catch::Contains("precision") && Catch::Contains("FP8"));
  std::filesystem::remove(file);
}

TEST_CASE("meshplan run refuses an fp8 plan with exit 2", "[planner][cli][fp8]") {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("meshplan_fp8_run_" + std::to_string(getpid()) + ".yaml");
  {
    std::ofstream out(file);
    out << "model: llama2-7b\ncluster: 8xH100\ntraining:\n  global_batch: 8\n  seq_len: 4096\n"
           "  precision: fp8\nplan:\n  dp: 8\n";
  }
  const CliResult r = RunMeshplan("run '" + file.string() + "' --nproc 8");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  // Without meshplan-exec built, meshplan says what to build (also exit 2).
  if (r.output.find("meshplan-exec") == std::string::npos)
    CHECK_THAT(r.output, Catch::Contains("fp8") && Catch::Contains("executor"));
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace meshplan
