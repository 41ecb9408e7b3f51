// One real rank with emulated peers (`meshplan run --emulate-rank`), against the same rank
// of a real multi-rank CPU run: for DP, ZeRO-1/2/3, TP+SP, CP and PP plans of tiny-llama
// (S=32, fp32) the emulated rank's peak memory is within 1% of the real rank's, and its
// communicator calls (group, operation, peer, dtypes and shapes; `--comm-log`) are the same
// sequence. Both runs are `meshplan run` processes, one per rank for the real run, so each
// counting allocator sees one rank's tensors only.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "planner/config/config_loader.h"
#include "planner/measure/measurement.h"
#include "planner/mesh_layout.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;

// A scratch directory for one test.
struct Scratch : test::ScratchDir {
  Scratch() : test::ScratchDir("meshplan_emulate_test") {}
};

// tiny-llama (V=8192 E=256 L=4 H=8 K=4 F=688), S=32, fp32, one step.
PlanFile TinyPlan(const ParallelPlan& plan, int64_t microbatches) {
  PlanFile pf;
  pf.model = LoadModel("tiny-llama");
  pf.cluster = LoadCluster(std::to_string(plan.world_size()) + "xa40");
  pf.training.global_batch = plan.dp * plan.micro_batch * microbatches;
  pf.training.seq_len = 32;
  pf.training.precision = Precision::kFp32;
  pf.training.steps = 1;
  pf.plan = plan;
  return pf;
}

const RankMeasurement& RankOf(const Measurement& m, int rank) {
  for (const RankMeasurement& r : m.ranks)
    if (r.rank == rank) return r;
  FAIL("rank " << rank << " is not in the measurement");
  return m.ranks.front();
}

struct EmulationCase {
  std::string name;
  ParallelPlan plan;
  int64_t microbatches = 1;
  std::string emulate = "1";  // --emulate-rank
};

ParallelPlan Plan(const std::string& text) { return ParsePlanString(text); }

TEST_CASE("an emulated rank has the peak memory and the communicator calls of the same rank "
          "in a real run",
          "[executor][emulate]") {
  const std::vector<EmulationCase> cases = {
      {"dp", Plan("dp=2"), 1, "1"},
      {"zero1", Plan("dp=2,zero=1"), 2, "1"},
      {"zero2 (gloo's reduce-scatter temporary, 4 ranks)", Plan("dp=4,zero=2"), 1, "3"},
      {"zero3", Plan("dp=2,zero=3"), 1, "0"},
      {"tp+sp (4 ranks)", Plan("tp=4,sp=1"), 1, "2"},
      {"cp", Plan("cp=2"), 1, "1"},
      {"pp 1f1b, every stage", Plan("pp=2"), 2, "all-stages"},
  };
  for (const EmulationCase& c : cases) {
    SECTION(c.name) {
      Scratch scratch;
      const PlanFile pf = TinyPlan(c.plan, c.microbatches);
      SavePlanFile(scratch.Path("plan.yaml"), pf);
      const std::string common = fmt::format("run '{}' --steps 1 --warmup 0 --device cpu",
                                             scratch.Path("plan.yaml"));
      INFO(c.name << ": " << ToPlanString(pf.plan));
      REQUIRE(test::RunMeshplanLogged(scratch, "real",
                       fmt::format("{} --nproc {} --out '{}' --comm-log '{}'", common,
                                   pf.plan.world_size(), scratch.Path("real.json"),
                                   scratch.Path("real")) ) == 0);
      const int emulated_exit = test::RunMeshplanLogged(
          scratch, "emulated",
          fmt::format("{} --emulate-rank {} --out '{}' --comm-log '{}'", common, c.emulate,
                      scratch.Path("emulated.json"), scratch.Path("emulated")));
      INFO(scratch.Read("emulated.log"));
      REQUIRE(emulated_exit == 0);
      const Measurement real = LoadMeasurement(scratch.Path("real.json"));
      const Measurement emulated = LoadMeasurement(scratch.Path("emulated.json"));
      CHECK(emulated.emulated_comm == "zero");
      REQUIRE_FALSE(emulated.ranks.empty());
      for (const RankMeasurement& mine : emulated.ranks) {
        const RankMeasurement& theirs = RankOf(real, mine.rank);
        INFO("rank " << mine.rank << ": emulated peak " << mine.peak_memory_bytes
                     << " B, real peak " << theirs.peak_memory_bytes << " B");
        CHECK(std::abs(double(mine.peak_memory_bytes - theirs.peak_memory_bytes)) <=
              0.01 * double(theirs.peak_memory_bytes));
        const std::string log = fmt::format(".rank{}", mine.rank);
        const std::string real_calls = scratch.Read("real" + log);
        CHECK_FALSE(real_calls.empty());
        CHECK(scratch.Read("emulated" + log) == real_calls);
      }
    }
  }
}

TEST_CASE("meshplan run --emulate-rank refuses a rank outside the plan, flags that do not fit "
          "emulation and a plan too big for the device, writing nothing",
          "[executor][emulate]") {
  Scratch scratch;
  ParallelPlan plan = Plan("dp=2");
  SavePlanFile(scratch.Path("plan.yaml"), TinyPlan(plan, 1));
  const std::string out = scratch.Path("m.json");
  for (const char* bad : {"2", "-1", "x", "99999999999999999999"}) {
    INFO("--emulate-rank " << bad);
    CHECK(test::RunMeshplanLogged(scratch, "bad", fmt::format("run '{}' --emulate-rank={} --steps 1 --warmup 0 --device cpu --out '{}'",
                                               scratch.Path("plan.yaml"), bad, out)) == 2);
    CHECK_THAT(scratch.Read("bad.log"), Catch::Contains("--emulate-rank") &&
                                            Catch::Contains("0 to 1") &&
                                            Catch::Contains("all-stages"));
    CHECK_FALSE(fs::exists(out));
  }
  const std::string flags = " --steps 1 --warmup 0 --device cpu --out '" + out + "'";
  CHECK(test::RunMeshplanLogged(scratch, "flags", "run '" + scratch.Path("plan.yaml") + "' --emulate-rank 0 "
                                   "--emulated-comm fast" + flags) == 2);
  CHECK_THAT(scratch.Read("flags.log"), Catch::Contains("--emulated-comm") && Catch::Contains("zero, model"));
  CHECK(test::RunMeshplanLogged(scratch, "flags", "run '" + scratch.Path("plan.yaml") + "' --emulated-comm model" +
                                   flags) == 2);
  CHECK_THAT(scratch.Read("flags.log"), Catch::Contains("needs --emulate-rank"));
  CHECK(test::RunMeshplanLogged(scratch, "flags", "run '" + scratch.Path("plan.yaml") + "' --emulate-rank 0 "
                                   "--nproc 2" + flags) == 2);
  CHECK_THAT(scratch.Read("flags.log"), Catch::Contains("--nproc"));
  CHECK_FALSE(fs::exists(out));
  // A 70B model on one CPU rank: over a terabyte of fp32 weights, gradients and AdamW
  // states by the memory model, refused before anything is allocated.
  PlanFile huge = TinyPlan(Plan("dp=1"), 1);
  huge.model = LoadModel("llama3-70b");
  huge.cluster = LoadCluster("1xa40");
  huge.training.seq_len = 4096;
  SavePlanFile(scratch.Path("huge.yaml"), huge);
  CHECK(test::RunMeshplanLogged(scratch, "huge", fmt::format("run '{}' --emulate-rank 0 --steps 1 --warmup 0 --device cpu --out '{}' "
                                              "--comm-log '{}'",
                                              scratch.Path("huge.yaml"), out, scratch.Path("log"))) == 2);
  CHECK_THAT(scratch.Read("huge.log"), Catch::Contains("does not fit the device") &&
                                           Catch::Contains("stage 0"));
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(scratch.Path("log.rank0")));
}

}  // namespace
}  // namespace meshplan
