// The pipeline schedules a framework runs (FrameworkSpec::schedules, configs/frameworks/*.yaml
// `schedules:`): each shipped profile's, Validate's schedule_offered rule, and the search's grid.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/parallel_plan.h"
#include "planner/search/search.h"
#include "tests/cli_run.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::H100Cluster;
using testing::SpecLlama;
using testing::Training;

TEST_CASE("each profile offers the pipeline schedules of the software it names",
          "[planner][framework][schedule]") {
  const auto offered = [](const char* name) {
    return OfferedSchedulesText(LoadFramework(name).schedules);
  };
  for (const char* megatron : {"megatron-core", "nemo", "megatron-lm-2021", "megatron-lm-2022"})
    CHECK(offered(megatron) == "1f1b, interleaved");
  CHECK(offered("torchtitan") == "gpipe, 1f1b, interleaved");
  CHECK(offered("pytorch") == "gpipe, 1f1b, interleaved");
  CHECK(offered("deepspeed") == "1f1b");
  CHECK(offered("torchtitan-2024-04") == "");  // no pipeline parallelism
  CHECK(offered("meshplan") == "gpipe, 1f1b, interleaved, zb_h1");
}

TEST_CASE("Validate refuses a schedule the framework does not run, and pp where it has none",
          "[planner][framework][schedule]") {
  const ModelSpec model = SpecLlama(1024, 8, 16, 1536);
  TrainingSpec training = Training(8, 512, Precision::kBf16);
  training.framework = LoadFramework("megatron-core");
  ParallelPlan plan;
  plan.pp = 2;
  plan.schedule = PipelineSchedule::kZeroBubbleH1;
  std::vector<PlanViolation> refused = Validate(plan, model, training, 2);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].constraint == "schedule_offered");
  CHECK(refused[0].message ==
        "schedule=zb_h1 is not offered by megatron-core core_r0.8.0; allowed: 1f1b, interleaved");
  plan.schedule = PipelineSchedule::k1F1B;
  CHECK(Validate(plan, model, training, 2).empty());
  plan.pp = 1;  // one stage runs no schedule: nothing to refuse
  plan.schedule = PipelineSchedule::kGpipe;
  CHECK(Validate(plan, model, training, 1).empty());
  training.framework = LoadFramework("torchtitan-2024-04");
  plan.pp = 2;
  plan.schedule = PipelineSchedule::k1F1B;
  refused = Validate(plan, model, training, 2);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].message ==
        "pp=2: torchtitan-2024-04 157a12c56 (2024-04, PyTorch 2.4 nightly, eager) runs no "
        "pipeline parallelism; allowed: pp=1");
}

TEST_CASE("the search tries the schedules the framework runs", "[planner][search][schedule]") {
  const ModelSpec model = SpecLlama(1024, 8, 16, 1536);
  TrainingSpec training = Training(16, 512, Precision::kBf16);
  SearchOptions options;
  options.threads = 1;
  options.top_k = 100000;
  options.space.pins = ParsePlanPins("pp=2");
  for (const char* framework : {"megatron-core", "deepspeed", "meshplan"}) {
    INFO(framework);
    training.framework = LoadFramework(framework);
    const SearchResult result = Search(model, H100Cluster(1, 8), training, options);
    REQUIRE(!result.top.empty());
    std::vector<bool> seen(4, false);
    for (const RankedPlan& r : result.top) seen[static_cast<int>(r.plan.schedule)] = true;
    for (int s = 0; s < 4; ++s) CHECK(seen[s] == training.framework.schedules.offers(s));
    // The grid holds only those: none is left for Validate to refuse.
    CHECK(result.constraints[static_cast<int>(PlanConstraint::kScheduleOffered)].removed == 0);
  }
  // No pipeline parallelism: every pipelined candidate is refused by schedule_offered.
  training.framework = LoadFramework("torchtitan-2024-04");
  const SearchResult none = Search(model, H100Cluster(1, 8), training, options);
  CHECK(none.top.empty());
  CHECK(none.constraints[static_cast<int>(PlanConstraint::kScheduleOffered)].removed > 0);
}

TEST_CASE("estimate names the profiles that run a refused schedule", "[planner][framework][schedule][cli]") {
  const test::CliResult r =
      test::RunMeshplan("estimate --cluster 8xH100 --plan dp=4,pp=2,zero=1,schedule=zb_h1");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("schedule_offered: schedule=zb_h1 is not offered by "
                                       "megatron-core core_r0.8.0; allowed: 1f1b, interleaved") &&
                           Catch::Contains("profiles that offer it: meshplan (--framework NAME)"));
}

}  // namespace
}  // namespace meshplan
