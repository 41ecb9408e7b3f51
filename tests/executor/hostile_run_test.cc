// `meshplan run` and `calibrate` at the edges (docs/limits.md "Outputs", "Ambiguity",
// "Threads and the host"): input at fault exits 2 naming the flag or the file, never 1 with
// a raw LibTorch error; special files never block a run; a resumed run that would measure
// nothing is refused. Every command runs under `timeout 120`, so a hang fails.
#include "executor/device/host_memory.h"  // first: LibTorch before Catch2

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "planner/config/config_loader.h"
#include "tests/cli_plan.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;

// `meshplan ARGS` under `timeout 120`, stderr joined.
test::CliResult RunBounded(const std::string& args) {
  return test::RunShell("timeout 120 '" + std::string(MESHPLAN_BINARY) + "' " + args + " 2>&1");
}

// A one-step tiny-llama plan on one CPU rank, saved as plan.yaml in `scratch`.
std::string SaveTinyPlan(const test::ScratchDir& scratch, int64_t steps = 1) {
  PlanFile pf = test::OneStepPlan("tiny-llama", "dp=1");
  pf.training.steps = steps;
  SavePlanFile(scratch.Path("plan.yaml"), pf);
  return scratch.Path("plan.yaml");
}

// Trains `plan` for `steps` steps with a snapshot at the last one into `snap`.
void SaveSnapshot(const test::ScratchDir& scratch, const std::string& plan, const std::string& snap,
                  int steps) {
  const test::CliResult r = RunBounded(
      fmt::format("run '{}' --device cpu --steps {} --warmup 0 --save-every {} --snapshot '{}' "
                  "--out '{}'", plan, steps, steps, snap, scratch.Path("snapshot_run.json")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

TEST_CASE("5. run --data through a symlink loop exits 2 naming --data",
          "[executor][hostile][cli]") {
  test::ScratchDir scratch("meshplan_hostile_run");
  const std::string plan = SaveTinyPlan(scratch);
  fs::create_symlink(scratch.Path("b"), scratch.Path("a"));
  fs::create_symlink(scratch.Path("a"), scratch.Path("b"));
  const test::CliResult r =
      RunBounded(fmt::format("run '{}' --device cpu --warmup 0 --data '{}' --out '{}'", plan,
                             scratch.Path("a"), scratch.Path("m.json")));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--data") && !Catch::Contains("unexpected"));
}

TEST_CASE("5. calibrate: a shape past the host's memory and cuda without a GPU exit 2",
          "[executor][hostile][cli]") {
  for (const std::string shapes : {"99999999x99999999", "1000000x1000000"}) {
    const test::CliResult r = RunBounded("calibrate --quick --shapes " + shapes);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--shapes") && !Catch::Contains("Exception raised"));
  }
  if (!fs::exists("/dev/nvidia0")) {
    const test::CliResult r = RunBounded("calibrate --device cuda --quick");
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--device"));
  }
}

TEST_CASE("3. run: --out to a FIFO or a symlink to a directory is refused untouched, a FIFO "
          "as --resume's latest or rank file is refused at once",
          "[executor][hostile][cli]") {
  test::ScratchDir scratch("meshplan_hostile_run");
  const std::string plan = SaveTinyPlan(scratch, 2);
  REQUIRE(::mkfifo(scratch.Path("fifo").c_str(), 0600) == 0);
  fs::create_directory(scratch.dir / "sub");
  fs::create_directory_symlink(scratch.dir / "sub", scratch.dir / "link");
  for (const std::string& out : {scratch.Path("fifo"), scratch.Path("link"), std::string()}) {
    const test::CliResult r =
        RunBounded(fmt::format("run '{}' --device cpu --out '{}'", plan, out));
    INFO(out << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--out"));
  }
  CHECK(fs::is_fifo(scratch.Path("fifo")));
  CHECK(fs::is_symlink(scratch.Path("link")));

  // A snapshot at step 1, then its `latest` and its rank file replaced by FIFOs.
  const std::string snap = scratch.Path("snap");
  SaveSnapshot(scratch, plan, snap, 1);
  const fs::path rank_file = fs::path(snap) / "step_00000001" / "rank_00000.bin";
  REQUIRE(fs::exists(rank_file));
  fs::remove(rank_file);
  REQUIRE(::mkfifo(rank_file.c_str(), 0600) == 0);
  const std::string resume = fmt::format("run '{}' --device cpu --steps 2 --warmup 0 --resume '{}' "
                                         "--out '{}'", plan, snap, scratch.Path("m2.json"));
  test::CliResult r = RunBounded(resume);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("regular file"));
  fs::remove(fs::path(snap) / "latest");
  REQUIRE(::mkfifo((fs::path(snap) / "latest").c_str(), 0600) == 0);
  r = RunBounded(resume);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("FIFO"));
}

TEST_CASE("7. run --resume with --steps at or behind the snapshot exits 2, not 'measured 0 "
          "steps'", "[executor][hostile][cli]") {
  test::ScratchDir scratch("meshplan_hostile_run");
  const std::string plan = SaveTinyPlan(scratch, 2);
  const std::string snap = scratch.Path("snap");
  SaveSnapshot(scratch, plan, snap, 2);
  for (const int steps : {1, 2}) {
    const test::CliResult r = RunBounded(
        fmt::format("run '{}' --device cpu --steps {} --warmup 0 --resume '{}' --out '{}'", plan,
                    steps, snap, scratch.Path("m2.json")));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--steps") && Catch::Contains("step 2"));
    CHECK_THAT(r.output, !Catch::Contains("measured 0 steps"));
  }
  const test::CliResult r = RunBounded(fmt::format(
      "run '{}' --device cpu --steps 3 --warmup 0 --resume '{}' --out '{}'", plan, snap,
      scratch.Path("m3.json")));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("measured 1 steps"));
}

TEST_CASE("6. run refuses a plan whose CPU ranks cannot fit the host's available memory, "
          "before any rank starts", "[executor][hostile][cli]") {
  test::ScratchDir scratch("meshplan_hostile_run");
  PlanFile pf = test::OneStepPlan("tiny-llama", "dp=1,mbs=1000000");
  pf.training.global_batch = 1'000'000;
  SavePlanFile(scratch.Path("plan.yaml"), pf);
  REQUIRE(AvailableHostMemoryBytes() > 0);
  const test::CliResult r =
      RunBounded(fmt::format("run '{}' --device cpu --warmup 0 --out '{}'",
                             scratch.Path("plan.yaml"), scratch.Path("m.json")));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("plan.yaml") && Catch::Contains("available") &&
                           Catch::Contains("plan.mbs"));
  CHECK_THAT(r.output, !Catch::Contains("Exception raised") && !Catch::Contains("ranks of"));
  CHECK(!fs::exists(scratch.Path("m.json")));
}

}  // namespace
}  // namespace meshplan
