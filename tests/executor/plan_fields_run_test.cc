// Every plan field (planner/plan_fields.h) is honoured by `meshplan run` or refused by it:
// the test walks the table, so a new field fails here until it has an example plan and the
// executor either runs it (no limitation names it) or refuses it with exit 2 naming its key,
// as the table's `executor` mark says. That what is honoured is measured right is the other
// executor tests' job (memory_prediction_test.cc, zero_prefetch_test.cc, ...).
#include "executor/run_rank.h"  // first: LibTorch before Catch2

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "planner/config/framework_yaml.h"
#include "planner/plan_fields.h"
#include "tests/cli_plan.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace meshplan {
namespace {

// Per key: a model and a valid plan that sets the field to a value other than its default.
const std::map<std::string, std::pair<std::string, std::string>>& Examples() {
  static const std::map<std::string, std::pair<std::string, std::string>> kExamples = {
      {"dp", {"tiny-llama", "dp=2"}},
      {"tp", {"tiny-llama", "tp=2"}},
      {"pp", {"tiny-llama", "pp=2"}},
      {"cp", {"tiny-llama", "cp=2"}},
      {"ep", {"tiny-moe", "dp=2,ep=2"}},
      {"zero", {"tiny-llama", "dp=2,zero=3"}},
      {"sp", {"tiny-llama", "tp=2,sp=1"}},
      {"mbs", {"tiny-llama", "mbs=2"}},
      {"recompute", {"tiny-llama", "recompute=full"}},
      {"schedule", {"tiny-llama", "pp=2,schedule=gpipe"}},
      {"vpp", {"tiny-llama", "pp=2,schedule=interleaved,vpp=2"}},
      {"tp_overlap", {"tiny-llama", "tp=2,tp_overlap=1"}},
      // Valid only under a framework that overlaps an interleaved pipeline's sends.
      {"pp_overlap", {"tiny-llama", "pp=2,schedule=interleaved,vpp=2,pp_overlap=1"}},
      {"first_stage_layers", {"tiny-llama", "pp=2,first_stage_layers=1"}},
      {"last_stage_layers", {"tiny-llama", "pp=2,last_stage_layers=1"}},
      {"offload_opt", {"tiny-llama", "offload_opt=1"}},
      {"offload_act", {"tiny-llama", "offload_act=1"}},
      {"offload_params", {"tiny-llama", "dp=2,zero=3,offload_opt=1,offload_params=1"}},
      {"dp_overlap", {"tiny-llama", "dp=2,dp_overlap=0"}},
      {"prefetch", {"tiny-llama", "dp=2,zero=3,prefetch=2"}},
  };
  return kExamples;
}

TEST_CASE("meshplan run honours every plan field or refuses it with exit 2 naming it",
          "[executor][plan_fields][cli]") {
  test::ScratchDir scratch("meshplan_plan_fields_run_test");
  for (const PlanFieldSpec& field : PlanFields()) {
    INFO("plan field " << field.key);
    const auto example = Examples().find(field.key);
    REQUIRE(example != Examples().end());  // a new field: add an example plan above
    const auto& [model, plan_text] = example->second;
    INFO(model << ": " << plan_text);
    PlanFile pf = test::OneStepPlan(model, plan_text);
    if (field.id == PlanField::kPpOverlap) pf.training.framework = LoadFramework("megatron-core");
    REQUIRE_FALSE(field.is_default(pf.plan));
    REQUIRE(Validate(pf.plan, pf.model, pf.training, pf.cluster.world_size()).empty());
    const std::vector<std::string> limits = ExecutorLimitations(pf);
    if (field.executor == ExecutorSupport::kHonoured) {
      INFO((limits.empty() ? "" : limits.front()));
      CHECK(limits.empty());
      continue;
    }
    REQUIRE(field.executor == ExecutorSupport::kRefusedUnlessDefault);
    SavePlanFile(scratch.Path("plan.yaml"), pf);
    const int code = test::RunMeshplanLogged(
        scratch, "run",
        fmt::format("run '{}' --nproc {} --steps 1 --device cpu --out '{}'",
                    scratch.Path("plan.yaml"), pf.plan.world_size(), scratch.Path("m.json")));
    const std::string log = scratch.Read("run.log");
    INFO(log);
    CHECK(code == 2);
    // Refused by the executor (ExecutorLimitations: "key=value: ...") or, for a field whose
    // value the meshplan profile does not offer, by run's plan check ("key=value is not
    // offered by meshplan").
    const std::string item =
        std::string(field.key) + "=" + FormatFieldValue(field, field.get(pf.plan));
    CHECK_THAT(log, Catch::Contains(item + ": ") || Catch::Contains(item + " is not offered by meshplan"));
    CHECK_FALSE(std::filesystem::exists(scratch.Path("m.json")));
  }
}

TEST_CASE("meshplan run checkpoints every:N's blocks and refuses the op policy naming it",
          "[executor][plan_fields][recompute]") {
  CHECK(ExecutorLimitations(test::OneStepPlan("tiny-llama", "recompute=every:2")).empty());
  const std::vector<std::string> op =
      ExecutorLimitations(test::OneStepPlan("tiny-llama", "recompute=op"));
  REQUIRE(op.size() == 1);
  CHECK_THAT(op.front(), Catch::StartsWith("recompute=op: ") && Catch::Contains("every:N"));
}

}  // namespace
}  // namespace meshplan
