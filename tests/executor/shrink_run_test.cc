// `meshplan shrink` end to end on this CPU: the README's best 8 x H100 plan and a Mixtral
// expert-parallel plan, each scaled down, trained by `meshplan run` and compared. The peak
// memory of every rank is within compare's tolerance; step time is compared too (exit 1
// when it misses is a result, not an error: the CPU profile's timing is judged elsewhere).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace meshplan {
namespace {

void ShrinkRunCompare(const std::string& search, int nproc) {
  const test::ScratchDir scratch("shrink_run");
  const std::string big = scratch.Path("big.yaml");
  const std::string dir = scratch.Path("small");
  REQUIRE(test::RunMeshplan(search + " --top 1 --threads 1 --out '" + big + "'").exit_code == 0);
  const test::CliResult shrink = test::RunMeshplan(
      "shrink '" + big + "' --nproc " + std::to_string(nproc) + " --out-dir '" + dir + "'");
  INFO(shrink.output);
  REQUIRE(shrink.exit_code == 0);
  const std::string plan = dir + "/plan.yaml";
  const test::CliResult run = test::RunMeshplan("run '" + plan + "' --nproc " +
                                                std::to_string(nproc) + " --device cpu --steps 3 "
                                                "--warmup 1 --out '" + dir + "/measured.json'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const test::CliResult compare =
      test::RunMeshplan("compare '" + plan + "' '" + dir + "/measured.json' --format json", false);
  INFO(compare.output);
  REQUIRE(compare.exit_code <= 1);
  int memory_figures = 0;
  const nlohmann::json comparison = nlohmann::json::parse(compare.output);
  for (const nlohmann::json& f : comparison["figures"]) {
    const std::string name = f["figure"];
    if (name.rfind("peak memory", 0) != 0) continue;
    ++memory_figures;
    INFO(name);
    CHECK(f["status"] == "within");
  }
  CHECK(memory_figures == nproc);
}

TEST_CASE("shrink: the README's best 8 x H100 plan runs on 2 CPU ranks and compares",
          "[executor][shrink]") {
  ShrinkRunCompare("search", 2);
}

TEST_CASE("shrink: a Mixtral expert-parallel plan runs on 4 CPU ranks and compares",
          "[executor][shrink][moe]") {
  ShrinkRunCompare("search --model mixtral-8x7b --cluster 64xH100 --global-batch 256 --seq 4096 "
                   "--only ep=8",
                   4);
}

}  // namespace
}  // namespace meshplan
