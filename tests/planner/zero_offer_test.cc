// The ZeRO stages a framework offers (FrameworkSpec::zero, configs/frameworks/*.yaml `zero:`):
// each shipped profile's, Validate's zero_offered rule, and the search's grid.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/input_error.h"
#include "planner/parallel_plan.h"
#include "planner/plan_fields.h"
#include "planner/search/plan_space.h"
#include "planner/search/search.h"
#include "tests/planner/cost_test_specs.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

using testing::H100Cluster;
using testing::SpecLlama;
using testing::Training;

TEST_CASE("each profile offers the ZeRO stages of the software it names", "[planner][framework]") {
  using Stages = std::vector<int>;
  CHECK(OfferedZeroStages(LoadFramework("megatron-core").zero) == Stages{0, 1});  // core_r0.8.0
  CHECK(OfferedZeroStages(LoadFramework("megatron-lm-2021").zero) == Stages{0});
  CHECK(OfferedZeroStages(LoadFramework("megatron-lm-2022").zero) == Stages{0, 1});
  // torchtitan: DDP or FSDP2 resharding after forward; under pipeline parallelism FSDP2 keeps
  // the gathered blocks (reshard_after_forward=False) and DDP is refused.
  const FrameworkSpec torchtitan = LoadFramework("torchtitan");
  CHECK(OfferedZeroStages(ZeroOfferFor(torchtitan, 1)) == Stages{0, 3});
  CHECK(OfferedZeroStages(ZeroOfferFor(torchtitan, 2)) == Stages{2});
  // ... and with tensor or context parallelism only FSDP2: its DDP runs alone.
  CHECK(OfferedZeroStages(ZeroOfferFor(torchtitan, 1, /*tp=*/2)) == Stages{3});
  CHECK(OfferedZeroStages(ZeroOfferFor(torchtitan, 1, 1, /*cp=*/2)) == Stages{3});
  CHECK(OfferedZeroStages(ZeroOfferFor(torchtitan, 2, 2)) == Stages{2});  // pp decides first
  for (const char* all : {"meshplan", "pytorch", "deepspeed", "nemo"})
    CHECK(OfferedZeroStages(LoadFramework(all).zero) == Stages{0, 1, 2, 3});
  for (const char* all : {"meshplan", "pytorch", "nemo"})
    CHECK_FALSE(LoadFramework(all).zero_pipelined.has_value());  // the same with pipelines
  // DeepSpeed's PipelineEngine takes ZeRO-1 at most.
  CHECK(OfferedZeroStages(ZeroOfferFor(LoadFramework("deepspeed"), 2)) == Stages{0, 1});
  CHECK(OfferedZeroStagesText(torchtitan.zero) == "0, 3");
}

TEST_CASE("Validate refuses a ZeRO stage the framework does not offer, unless nothing is sharded",
          "[planner][framework][zero]") {
  const ModelSpec model = SpecLlama(1024, 8, 16, 1536);
  TrainingSpec training = Training(8, 512, Precision::kBf16);
  training.framework = LoadFramework("torchtitan");
  ParallelPlan plan;
  plan.dp = 2;
  plan.zero_stage = 1;
  const std::vector<PlanViolation> refused = Validate(plan, model, training, 2);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].constraint == "zero_offered");
  CHECK(refused[0].message ==
        "zero=1 is not offered by torchtitan 9dec370ad (2024-12, PyTorch 2.6 nightly, eager); "
        "allowed: 0, 3");
  for (int stage : {0, 3}) {
    plan.zero_stage = stage;
    CHECK(Validate(plan, model, training, 2).empty());
  }
  // With pipeline stages the stages it offers there (zero_pipelined), and only those.
  plan.pp = 2;
  for (int stage : {0, 1, 3}) {
    plan.zero_stage = stage;
    const std::vector<PlanViolation> pipelined = Validate(plan, model, training, 4);
    REQUIRE(pipelined.size() == 1);
    CHECK(pipelined[0].message ==
          "zero=" + std::to_string(stage) +
              " is not offered by torchtitan 9dec370ad (2024-12, PyTorch 2.6 nightly, eager) "
              "with pp > 1; allowed: 2");
  }
  plan.zero_stage = 2;
  CHECK(Validate(plan, model, training, 4).empty());
  plan.pp = 1;
  CHECK(Validate(plan, model, training, 2).size() == 1);  // zero=2 without a pipeline
  // DDP beside tensor parallelism: refused, naming where.
  plan.tp = 2;
  plan.sequence_parallel = true;
  plan.zero_stage = 0;
  const std::vector<PlanViolation> with_tp = Validate(plan, model, training, 4);
  REQUIRE(with_tp.size() == 1);
  CHECK(with_tp[0].message ==
        "zero=0 is not offered by torchtitan 9dec370ad (2024-12, PyTorch 2.6 nightly, eager) "
        "with tp or cp > 1; allowed: 3");
  plan.zero_stage = 3;
  CHECK(Validate(plan, model, training, 4).empty());
  plan.tp = 1;
  plan.sequence_parallel = false;
  // One weight replica: zero=1 shards nothing, so it is the same plan as zero=0.
  plan.dp = 1;
  plan.zero_stage = 1;
  CHECK(Validate(plan, model, training, 1).empty());
}

TEST_CASE("the search tries the ZeRO stages the framework offers, a pinned other one is refused",
          "[planner][search][zero]") {
  const ModelSpec model = SpecLlama(1024, 8, 16, 1536);
  const ClusterSpec cluster = H100Cluster(1, 2);
  TrainingSpec training = Training(8, 512, Precision::kBf16);
  SearchOptions options;
  options.threads = 1;
  options.top_k = 1000;
  for (const char* framework : {"megatron-core", "torchtitan", "meshplan"}) {
    INFO(framework);
    training.framework = LoadFramework(framework);
    const SearchResult result = Search(model, cluster, training, options);
    REQUIRE(!result.top.empty());
    std::vector<bool> seen(4, false);
    for (const RankedPlan& r : result.top) {
      if (r.plan.weight_replicas() == 1) continue;  // one replica: every stage is stage 0
      seen[r.plan.zero_stage] = true;
      INFO(ToShortPlanString(r.plan));
      CHECK(ZeroOfferFor(training.framework, r.plan.pp, r.plan.tp, r.plan.cp).offers(r.plan.zero_stage));
    }
    // Two GPUs: a pipelined plan has one replica, so only the unpipelined offer shows.
    for (int stage = 0; stage <= 3; ++stage) CHECK(seen[stage] == training.framework.zero.offers(stage));
  }
  // torchtitan on 8 GPUs with --only pp=2: every plan with replicas runs zero=2.
  training.framework = LoadFramework("torchtitan");
  options.space.pins = ParsePlanPins("pp=2");
  const SearchResult pipelined = Search(model, H100Cluster(1, 8), training, options);
  REQUIRE(!pipelined.top.empty());
  int sharded = 0;
  for (const RankedPlan& r : pipelined.top) {
    if (r.plan.weight_replicas() == 1) continue;
    CHECK(r.plan.zero_stage == 2);
    ++sharded;
  }
  CHECK(sharded > 0);
  // ... and with --only tp=2 every plan with replicas runs FSDP2 (zero=3): the grid holds no
  // DDP plan for Validate to refuse.
  options.space.pins = ParsePlanPins("tp=2");
  const SearchResult with_tp = Search(model, H100Cluster(1, 8), training, options);
  REQUIRE(!with_tp.top.empty());
  for (const RankedPlan& r : with_tp.top)
    if (r.plan.weight_replicas() > 1 && r.plan.pp == 1) CHECK(r.plan.zero_stage == 3);
  CHECK(with_tp.constraints[static_cast<int>(PlanConstraint::kZeroOffered)].removed == 0);
  options.space.pins = {};
  // megatron-core core_r0.8.0 has no FSDP: --only zero=3 leaves only the one-replica meshes.
  training.framework = LoadFramework("megatron-core");
  options.space.pins = ParsePlanPins("zero=3");
  const SearchResult pinned = Search(model, cluster, training, options);
  const ConstraintTally& tally =
      pinned.constraints[static_cast<int>(PlanConstraint::kZeroOffered)];
  CHECK(tally.removed > 0);
  REQUIRE(tally.example.has_value());
  CHECK(tally.example->weight_replicas() > 1);
  for (const RankedPlan& r : pinned.top) CHECK(r.plan.weight_replicas() == 1);
}

TEST_CASE("a plan file is validated under the framework that runs it", "[planner][framework][zero]") {
  // No framework: key on a GPU cluster: megatron-core, which has no ZeRO-2.
  const std::string text =
      "model: tiny-llama\ncluster: 2xH100\ntraining: {global_batch: 4, seq_len: 128}\n"
      "plan: {dp: 2, zero: 2}\n";
  try {
    PlanFileFromText(text, "plan.yaml");
    FAIL("a ZeRO-2 plan under megatron-core was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("zero=2 is not offered by megatron-core core_r0.8.0") &&
                             Catch::Contains("profiles that offer it: deepspeed, meshplan, nemo, "
                                             "pytorch (training.framework: NAME)"));
  }
  // meshplan run (and compare of its runs): the executor runs it, under `meshplan`.
  const FrameworkSpec executor = LoadFramework(kExecutorFramework);
  const PlanFile run = PlanFileFromText(text, "plan.yaml", &executor);
  CHECK(run.training.framework.name == "meshplan");
  CHECK(run.plan.zero_stage == 2);
}

}  // namespace
}  // namespace meshplan
