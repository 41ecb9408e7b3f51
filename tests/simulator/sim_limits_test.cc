// The simulator's bounds (planner/limits.h, docs/limits.md): a step too large to simulate
// is refused quickly with SimulationTooLarge naming the bound, before the memory it would
// take is allocated; the CLI turns it into exit code 2 naming the flag to change.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "planner/config/config_loader.h"
#include "planner/limits.h"
#include "planner/parallel_plan.h"
#include "simulator/simulate.h"
#include "tests/cli_run.h"

namespace meshplan {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// `meshplan ARGS` under `timeout 20`: a hang exits 124 and fails.
test::CliResult RunBounded(const std::string& args) {
  return test::RunShell("timeout 20 '" + std::string(MESHPLAN_BINARY) + "' " + args + " 2>&1");
}

TEST_CASE("10^9 sequences of 2 tokens are refused before the graph is built",
          "[simulator][limits]") {
  const ModelSpec model = LoadModel("llama2-7b");
  const ClusterSpec cluster = LoadCluster("8xH100");
  TrainingSpec training;
  training.global_batch = 1'000'000'000;
  training.seq_len = 2;
  const ParallelPlan plan = ParsePlanString("dp=8");
  REQUIRE(Validate(plan, model, training, cluster.world_size()).empty());
  const auto start = std::chrono::steady_clock::now();
  try {
    Simulate(model, cluster, training, plan, {.timeline = false});
    FAIL("expected SimulationTooLarge");
  } catch (const SimulationTooLarge& e) {
    CHECK_THAT(e.what(), Catch::Contains("125000000 micro-batches") &&
                             Catch::Contains("kMaxSimOps") && Catch::Contains("5000000"));
  }
  CHECK(SecondsSince(start) < 1);
}

TEST_CASE("a timeline above kMaxTraceOps is refused, the same step without one runs",
          "[simulator][limits]") {
  const ModelSpec model = LoadModel("llama2-7b");
  const ClusterSpec cluster = LoadCluster("8xH100");
  TrainingSpec training;
  training.global_batch = 1200;
  training.seq_len = 4096;
  // ~1.2M ops: a CP ring, ZeRO-3 gathers, full recompute and TP per block and micro-batch.
  const ParallelPlan plan = ParsePlanString("pp=2,tp=2,cp=2,sp=1,zero=3,recompute=full");
  REQUIRE(Validate(plan, model, training, cluster.world_size()).empty());
  CHECK_THROWS_WITH(Simulate(model, cluster, training, plan, {.timeline = true}),
                    Catch::Contains("kMaxTraceOps"));
  const SimResult sim = Simulate(model, cluster, training, plan, {.timeline = false});
  CHECK(sim.ops > kMaxTraceOps);
  CHECK(sim.ops <= kMaxSimOps);
}

TEST_CASE("simulate refuses 10^9 sequences of 2 tokens quickly, naming the bound and the flag",
          "[simulator][limits][cli]") {
  const auto start = std::chrono::steady_clock::now();
  const test::CliResult r = RunBounded("simulate --global-batch 1000000000 --seq 2");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(SecondsSince(start) < 5);
  CHECK_THAT(r.output, Catch::Contains("<command line>: --global-batch:") &&
                           Catch::Contains("kMaxSimOps") && Catch::Contains("--plan"));
  // A new file in the temp folder (an output is a new path or a regular file, never a device):
  // refused before anything is written, so it stays absent.
  const std::filesystem::path trace_file =
      std::filesystem::temp_directory_path() /
      ("meshplan_sim_limits_" + std::to_string(::getpid()) + ".json");
  const test::CliResult trace = RunBounded(
      "simulate --framework pytorch --plan pp=2,tp=2,cp=2,sp=1,zero=3,recompute=full "
      "--global-batch 1200 "
      "--trace '" + trace_file.string() + "'");
  CHECK(trace.exit_code == 2);
  CHECK_THAT(trace.output, Catch::Contains("kMaxTraceOps") && Catch::Contains("drop --trace"));
  CHECK(!std::filesystem::exists(trace_file));
}

TEST_CASE("search --simulate-top refuses a top plan too large to simulate",
          "[simulator][limits][cli]") {
  const test::CliResult r =
      RunBounded("search --global-batch 1000000000 --seq 2 --only mbs=1 --simulate-top 1");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--simulate-top") && Catch::Contains("kMaxSimOps"));
}

}  // namespace
}  // namespace meshplan
