// `meshplan run` on mixture-of-experts plans: an emulated rank of an expert-parallel plan
// (alone, and with tensor and sequence parallelism) runs and all-to-alls over its ep group;
// bad MoE input (ep on a dense model, ep not dividing the experts, cp with experts) is
// refused with exit 2 naming the field, its value and the allowed values, before anything
// runs.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "planner/config/config_loader.h"
#include "planner/measure/measurement.h"
#include "tests/cli_plan.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;

// A scratch directory for one test.
struct Scratch : test::ScratchDir {
  Scratch() : test::ScratchDir("meshplan_moe_cli_test") {}
};

// tiny-moe (8 experts top-2, one shared, layer 0 dense), S=32, fp32, one step.
PlanFile TinyMoePlan(const std::string& plan_text, const std::string& model = "tiny-moe") {
  return test::OneStepPlan(model, plan_text);
}

TEST_CASE("meshplan run --emulate-rank runs one rank of an expert-parallel plan",
          "[executor][moe][emulate]") {
  const std::string plan = GENERATE(std::string("dp=4,ep=2,zero=1"),
                                    std::string("dp=2,tp=2,ep=2,sp=1,zero=1"));
  INFO(plan);
  Scratch scratch;
  SavePlanFile(scratch.Path("plan.yaml"), TinyMoePlan(plan));
  const int exit_code = test::RunMeshplanLogged(
      scratch, "emulated",
      fmt::format("run '{}' --steps 1 --warmup 0 --device cpu --emulate-rank 1 --out '{}' "
                  "--comm-log '{}'",
                  scratch.Path("plan.yaml"), scratch.Path("m.json"), scratch.Path("calls")));
  INFO(scratch.Read("emulated.log"));
  REQUIRE(exit_code == 0);
  const Measurement m = LoadMeasurement(scratch.Path("m.json"));
  REQUIRE(m.ranks.size() == 1);
  CHECK(m.ranks[0].peak_memory_bytes > 0);
  const std::string calls = scratch.Read("calls.rank1");
  INFO(calls.substr(0, 2000));
  CHECK_THAT(calls, Catch::Contains("all_to_all"));  // token dispatch over the ep group
  if (plan.find("sp=1") != std::string::npos)
    CHECK_THAT(calls, Catch::Contains("all_gather") && Catch::Contains("reduce_scatter"));
}

TEST_CASE("meshplan run refuses bad expert-parallel input with exit 2", "[executor][moe][errors]") {
  Scratch scratch;
  struct Bad {
    PlanFile pf;
    int nproc;
    std::vector<std::string> says;
  };
  const std::vector<Bad> cases = {
      {TinyMoePlan("dp=2,ep=2", "tiny-llama"), 2, {"ep=2", "dense", "allowed: ep=1"}},
      {TinyMoePlan("dp=3,ep=3"), 3, {"ep=3", "moe.experts=8", "allowed"}},
      {TinyMoePlan("dp=1,cp=2"), 2, {"cp=2 with model.moe", "allowed: cp=1"}},
  };
  for (const Bad& c : cases) {
    INFO(ToPlanString(c.pf.plan) << " on " << c.pf.model.name);
    SavePlanFile(scratch.Path("bad.yaml"), c.pf);
    CHECK(test::RunMeshplanLogged(scratch, "bad", fmt::format("run '{}' --nproc {} --steps 1 --device cpu --out '{}'",
                                               scratch.Path("bad.yaml"), c.nproc,
                                               scratch.Path("m.json"))) == 2);
    const std::string log = scratch.Read("bad.log");
    INFO(log);
    for (const std::string& s : c.says) CHECK_THAT(log, Catch::Contains(s));
    CHECK_FALSE(fs::exists(scratch.Path("m.json")));
  }
}

}  // namespace
}  // namespace meshplan
