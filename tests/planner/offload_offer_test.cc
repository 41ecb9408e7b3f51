// The offload choices a framework runs (FrameworkSpec::offload, configs/frameworks/*.yaml
// `offload:` and `offload_act_alone:`): each shipped profile's, Validate's offload_offered rule,
// and the search's offload variants.
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

using testing::SpecLlama;
using testing::Training;

TEST_CASE("each profile offers the offload of the software it names", "[planner][framework][offload]") {
  const auto offered = [](const char* name) { return OffloadCombosText(LoadFramework(name).offload); };
  CHECK(offered("megatron-core") == "act");  // cpu_offloading; no optimizer offload in core_r0.8.0
  CHECK(offered("nemo") == "act");
  CHECK(offered("megatron-lm-2021") == "");
  CHECK(offered("megatron-lm-2022") == "");
  CHECK(offered("torchtitan-2024-04") == "");
  CHECK(offered("torchtitan") == "opt+params");  // FSDP2's CPUOffloadPolicy
  CHECK(offered("pytorch") == "act, opt+params, act+opt+params");
  CHECK(offered("deepspeed") == "act, opt, act+opt, opt+params, act+opt+params");
  CHECK(offered("meshplan") == "act, opt, act+opt, params, act+params, opt+params, act+opt+params");
  CHECK(LoadFramework("megatron-core").offload.act_alone);
  CHECK(LoadFramework("nemo").offload.act_alone);
  CHECK_FALSE(LoadFramework("deepspeed").offload.act_alone);
}

TEST_CASE("Validate refuses offload the framework does not run, with what it runs",
          "[planner][framework][offload]") {
  const ModelSpec model = SpecLlama(1024, 8, 16, 1536);
  TrainingSpec training = Training(8, 512, Precision::kBf16);
  ParallelPlan plan;
  plan.dp = 2;
  plan.zero_stage = 3;
  plan.offload_activations = true;
  training.framework = LoadFramework("torchtitan");
  std::vector<PlanViolation> refused = Validate(plan, model, training, 2);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].constraint == "offload_offered");
  CHECK(refused[0].message ==
        "offload_act=1 is not offered by torchtitan 9dec370ad (2024-12, PyTorch 2.6 nightly, "
        "eager); allowed: opt+params (or nothing offloaded)");
  plan.offload_activations = false;
  plan.offload_optimizer = plan.offload_params = true;
  CHECK(Validate(plan, model, training, 2).empty());

  // megatron-core: activations only, and only with pp=1 and no recompute.
  training.framework = LoadFramework("megatron-core");
  plan = ParallelPlan{};
  plan.dp = 2;
  plan.zero_stage = 1;
  plan.offload_activations = true;
  CHECK(Validate(plan, model, training, 2).empty());
  plan.offload_optimizer = true;
  refused = Validate(plan, model, training, 2);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].message ==
        "offload_act=1,offload_opt=1 is not offered by megatron-core core_r0.8.0; allowed: act "
        "(or nothing offloaded)");
  plan.offload_optimizer = false;
  plan.recompute = RecomputePolicy(Recompute::kFull);
  refused = Validate(plan, model, training, 2);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].message ==
        "offload_act=1 is not offered by megatron-core core_r0.8.0 with pipeline parallelism or "
        "recompute; allowed there: nothing offloaded (it needs pp=1 and recompute=none)");
  plan.recompute = RecomputePolicy{};
  plan.pp = 2;
  plan.dp = 1;
  CHECK(Validate(plan, model, training, 2).size() == 1);
  // megatron-lm-2021 offloads nothing.
  training.framework = LoadFramework("megatron-lm-2021");
  plan.pp = 1;
  plan.dp = 2;
  plan.zero_stage = 0;
  refused = Validate(plan, model, training, 2);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].message ==
        "offload_act=1 is not offered by megatron-lm-2021 v2.x (SC21 artifact); allowed: nothing "
        "offloaded");
}

TEST_CASE("the search offloads only as the framework can", "[planner][search][offload]") {
  // About 6.5e9 parameters on 2 H100 (whose hardware file knows the host): some plans fit
  // only by offloading.
  const ModelSpec model = SpecLlama(4096, 16, 32, 11008);
  const ClusterSpec cluster = LoadCluster("2xH100");
  TrainingSpec training = Training(16, 4096);
  SearchOptions options;
  options.threads = 1;
  options.top_k = 100000;
  const auto offloading = [&](const char* framework) {
    training.framework = LoadFramework(framework);
    std::vector<ParallelPlan> out;
    for (const RankedPlan& r : Search(model, cluster, training, options).top) {
      INFO(framework << ": " << ToShortPlanString(r.plan));
      CHECK(OffloadOffered(training.framework.offload, r.plan));
      if (r.plan.offloads()) out.push_back(r.plan);
    }
    return out;
  };
  // deepspeed and meshplan offload here; the two frameworks that offer less never show it.
  CHECK(!offloading("deepspeed").empty());
  CHECK(!offloading("meshplan").empty());
  const std::vector<ParallelPlan> megatron = offloading("megatron-core");
  CHECK(!megatron.empty());  // activations, where it can
  for (const ParallelPlan& p : megatron) {
    CHECK_FALSE(p.offload_optimizer);
    CHECK(p.pp == 1);
    CHECK(p.recompute.kind == Recompute::kNone);
  }
  const std::vector<ParallelPlan> torchtitan = offloading("torchtitan");
  CHECK(!torchtitan.empty());  // parameters and optimizer with FSDP2
  for (const ParallelPlan& p : torchtitan) CHECK_FALSE(p.offload_activations);
}

TEST_CASE("estimate names the profiles that run a refused offload", "[planner][framework][offload][cli]") {
  const test::CliResult r = test::RunMeshplan(
      "estimate --cluster 8xH100 --framework torchtitan --plan dp=8,zero=3,offload_act=1");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("offload_offered: offload_act=1 is not offered by torchtitan") &&
                           Catch::Contains("profiles that offer it: deepspeed, meshplan, nemo, pytorch "
                                           "(--framework NAME)"));
}

}  // namespace
}  // namespace meshplan
