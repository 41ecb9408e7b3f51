// How a framework runs tensor parallelism (FrameworkSpec::tp_overlap and sp_always,
// configs/frameworks/*.yaml `tp_overlap:` and `sequence_parallel:`): each shipped profile's,
// Validate's tp_overlap_offered and sp_offered rules, and the search.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/parallel_plan.h"
#include "planner/search/search.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::H100Cluster;
using testing::SpecLlama;
using testing::Training;

TEST_CASE("each profile says how its tensor parallelism runs", "[planner][framework][tp]") {
  const auto overlap = [](const char* name) { return LoadFramework(name).tp_overlap; };
  CHECK(overlap("megatron-core") == TpOverlapOffer::kWithSp);  // userbuffers need sp
  CHECK(overlap("nemo") == TpOverlapOffer::kWithSp);
  for (const char* none : {"megatron-lm-2021", "megatron-lm-2022", "torchtitan",
                           "torchtitan-2024-04", "pytorch", "deepspeed"})
    CHECK(overlap(none) == TpOverlapOffer::kNone);
  CHECK(overlap("meshplan") == TpOverlapOffer::kAny);
  CHECK(LoadFramework("torchtitan").sp_always);  // SequenceParallel norms
  CHECK(LoadFramework("torchtitan-2024-04").sp_always);
  CHECK_FALSE(LoadFramework("megatron-core").sp_always);  // --sequence-parallel is a flag
}

TEST_CASE("Validate refuses TP overlap and sp=0 where the framework does not run them",
          "[planner][framework][tp]") {
  const ModelSpec model = SpecLlama(1024, 8, 16, 1536);
  TrainingSpec training = Training(8, 512, Precision::kBf16);
  ParallelPlan plan;
  plan.dp = 2;
  plan.tp = 2;
  plan.tp_comm_overlap = true;
  training.framework = LoadFramework("megatron-core");
  std::vector<PlanViolation> refused = Validate(plan, model, training, 4);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].constraint == "tp_overlap_offered");
  CHECK(refused[0].message ==
        "tp_overlap=1 is not offered by megatron-core core_r0.8.0 without sequence parallelism; "
        "allowed: tp_overlap=1 with sp=1, or tp_overlap=0");
  plan.sequence_parallel = true;
  CHECK(Validate(plan, model, training, 4).empty());
  training.framework = LoadFramework("torchtitan");
  plan.zero_stage = 3;  // FSDP2: torchtitan's DDP runs alone
  refused = Validate(plan, model, training, 4);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].message ==
        "tp_overlap=1 is not offered by torchtitan 9dec370ad (2024-12, PyTorch 2.6 nightly, "
        "eager); allowed: tp_overlap=0");
  plan.tp_comm_overlap = false;
  CHECK(Validate(plan, model, training, 4).empty());
  plan.sequence_parallel = false;
  refused = Validate(plan, model, training, 4);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].constraint == "sp_offered");
  plan.tp = 1;  // no tensor parallelism: nothing to shard, nothing to overlap
  plan.tp_comm_overlap = true;
  CHECK(Validate(plan, model, training, 2).empty());
}

TEST_CASE("the search runs TP as the framework does", "[planner][search][tp]") {
  const ModelSpec model = SpecLlama(4096, 32, 8, 11008);
  TrainingSpec training = Training(16, 2048, Precision::kBf16);
  SearchOptions options;
  options.threads = 1;
  options.top_k = 100000;
  options.space.pins = ParsePlanPins("tp=4");
  const auto plans = [&](const char* framework) {
    training.framework = LoadFramework(framework);
    return Search(model, H100Cluster(1, 8), training, options).top;
  };
  int overlapped = 0;
  for (const RankedPlan& r : plans("meshplan")) overlapped += r.plan.tp_comm_overlap;
  CHECK(overlapped > 0);  // where every choice is offered, overlap wins somewhere here
  int megatron_overlapped = 0;
  for (const RankedPlan& r : plans("megatron-core")) {
    INFO(ToShortPlanString(r.plan));
    if (r.plan.tp_comm_overlap) CHECK(r.plan.sequence_parallel);
    megatron_overlapped += r.plan.tp_comm_overlap;
  }
  CHECK(megatron_overlapped > 0);
  bool sp_off = false;
  for (const RankedPlan& r : plans("torchtitan")) {
    INFO(ToShortPlanString(r.plan));
    CHECK_FALSE(r.plan.tp_comm_overlap);
    sp_off = sp_off || !r.plan.sequence_parallel;
  }
  CHECK_FALSE(sp_off);
}

}  // namespace
}  // namespace meshplan
