// One memory unit and one headroom (docs/commands.md "Units"): estimate and search judge fit
// against the same usable memory by default and say so, memory reads in GiB, and the header's
// cluster line spells out what the NxGPU shorthand assumed.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/units_format.h"
#include "tests/cli_run.h"

namespace meshplan {
namespace {

TEST_CASE("estimate and search share one default headroom, state it, and show memory in GiB",
          "[planner][cli][units]") {
  const std::string setup = "--model llama2-7b --cluster 8xH100 --global-batch 64 --seq 4096";
  const ClusterSpec cluster = LoadCluster("8xH100");
  const std::string usable = FormatGiB(UsableBytes(cluster.gpu, kDefaultMemoryHeadroom), 1);

  const test::CliResult estimate = test::RunMeshplan("estimate " + setup + " --plan dp=8,zero=1");
  INFO(estimate.output);
  REQUIRE(estimate.exit_code == 0);
  CHECK_THAT(estimate.output, Catch::Contains("of " + usable + " usable (5% headroom kept free)"));
  CHECK_THAT(estimate.output, Catch::Contains("Memory per GPU") && Catch::Contains("GiB") &&
                                  !Catch::Contains(" GB "));
  const test::CliResult search = test::RunMeshplan("search " + setup + " --top 1");
  INFO(search.output);
  REQUIRE(search.exit_code == 0);
  CHECK_THAT(search.output, Catch::Contains("fit in " + usable + " per GPU (5% headroom)"));
  // What the shorthand assumed: one node of 8, the tiers by name and bandwidth.
  for (const test::CliResult* r : {&estimate, &search})
    CHECK_THAT(r->output, Catch::Contains("cluster: 1 node x 8 h100-sxm (79.6 GiB each); in a "
                                          "node NVLink4 450 GB/s, between nodes"));

  // A plan estimate calls fitting is one search keeps: the same usable memory.
  const test::CliResult json =
      test::RunMeshplan("estimate " + setup + " --plan dp=8,zero=1 --format json", false);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(json.output);
  CHECK(j["memory_headroom"].get<double>() == kDefaultMemoryHeadroom);
  CHECK(j["usable_bytes"].get<double>() == Approx(UsableBytes(cluster.gpu, kDefaultMemoryHeadroom)));
}

}  // namespace
}  // namespace meshplan
