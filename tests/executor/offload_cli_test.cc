// `meshplan run` and `meshplan compare` on offloading plans: an offload_opt plan runs on CPU
// ranks and writes each rank's host bytes (the offloaded optimizer shard, apart from the
// device peak), which compare shows beside the prediction; offload_act and offload_params,
// which the executor does not build, are refused with exit 2 naming the key.
#include "executor/model/adamw.h"  // first: LibTorch before Catch2

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "planner/config/config_loader.h"
#include "planner/cost/memory_model.h"
#include "planner/measure/measurement.h"
#include "tests/cli_plan.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;

PlanFile TinyPlan(const std::string& plan_text) { return test::OneStepPlan("tiny-llama", plan_text); }

TEST_CASE("meshplan run writes the host bytes of an offload_opt plan and compare shows them",
          "[executor][offload][cli]") {
  test::ScratchDir scratch("meshplan_offload_cli_test");
  const PlanFile pf = TinyPlan("dp=2,zero=1,offload_opt=1");
  SavePlanFile(scratch.Path("plan.yaml"), pf);
  const int run = test::RunMeshplanLogged(scratch, "run",
                           fmt::format("run '{}' --nproc 2 --steps 1 --warmup 0 --device cpu --out '{}'",
                                       scratch.Path("plan.yaml"), scratch.Path("m.json")));
  INFO(scratch.Read("run.log"));
  REQUIRE(run == 0);
  const Measurement m = LoadMeasurement(scratch.Path("m.json"));
  REQUIRE(m.ranks.size() == 2);
  MemoryOptions options;  // the host AdamW kernel of this LibTorch (fused: no workspace)
  options.fused_adamw = FusedAdamWBuiltIn(at::kCPU);
  const MemoryBreakdown predicted =
      EstimateStageMemory(pf.model, pf.training, pf.plan, MemoryModel::kDetailed, 0, options);
  REQUIRE(predicted.host_optimizer_bytes > 0);
  for (const RankMeasurement& r : m.ranks) {
    INFO("rank " << r.rank);
    // The host side is counted from the tensors: exactly the planner's figure.
    CHECK(static_cast<double>(r.host_optimizer_bytes) == predicted.host_optimizer_bytes);
    CHECK(r.peak_memory_bytes > 0);
  }
  CHECK_THAT(scratch.Read("m.json"), Catch::Contains("\"host_optimizer_bytes\""));

  const int compare = test::RunMeshplanLogged(scratch, "compare",
                               fmt::format("compare '{}' '{}' --tolerance 100", scratch.Path("plan.yaml"),
                                           scratch.Path("m.json")));
  const std::string table = scratch.Read("compare.log");
  INFO(table);
  CHECK(compare == 0);
  CHECK_THAT(table, Catch::Contains("peak memory rank 1 (stage 0)"));
  CHECK_THAT(table, Catch::Contains("host memory rank 1 (stage 0)"));
}

TEST_CASE("meshplan run refuses the offload choices the executor does not build with exit 2",
          "[executor][offload][cli][errors]") {
  test::ScratchDir scratch("meshplan_offload_cli_test");
  for (const std::string plan : {"dp=2,offload_act=1", "dp=2,zero=3,offload_opt=1,offload_params=1"}) {
    INFO(plan);
    SavePlanFile(scratch.Path("bad.yaml"), TinyPlan(plan));
    CHECK(test::RunMeshplanLogged(scratch, "bad", fmt::format("run '{}' --nproc 2 --steps 1 --device cpu --out '{}'",
                                               scratch.Path("bad.yaml"), scratch.Path("m.json"))) == 2);
    const std::string log = scratch.Read("bad.log");
    INFO(log);
    CHECK_THAT(log, Catch::Contains(plan.find("offload_act") != std::string::npos
                                        ? "offload_act=1: the executor keeps saved activations"
                                        : "offload_params=1: the executor keeps the ZeRO-3"));
    CHECK_FALSE(fs::exists(scratch.Path("m.json")));
  }
}

}  // namespace
}  // namespace meshplan
