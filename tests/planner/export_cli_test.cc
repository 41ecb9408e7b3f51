// `meshplan export` and `search --export` on the command line: an unknown target and a plan
// the target cannot express exit 2 saying why, and leave no file behind (nor touch one).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

using Catch::Contains;
using test::CliResult;
using test::RunMeshplan;
using test::TempDir;

// A plan file for llama3-8b on 8 H100; `framework` "" leaves the GPU's default.
std::string PlanYaml(const std::string& plan_keys, const std::string& framework = "") {
  return "model: llama3-8b\ncluster: 8xH100\ntraining:\n  global_batch: 64\n  seq_len: 4096\n"
         "  precision: mixed\n" +
         (framework.empty() ? "" : "  framework: " + framework + "\n") + "plan:\n" + plan_keys;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_CASE("export: an unknown target exits 2 listing the allowed ones", "[planner][cli][export]") {
  TempDir dir;
  const std::string plan = dir.Write("plan.yaml", PlanYaml("  dp: 8\n"));
  const CliResult r = RunMeshplan("export " + plan + " --to nemo");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains("nemo"));
  CHECK_THAT(r.output, Contains("megatron, megatron-bridge, torchtitan, deepspeed, torchrun"));
  CHECK(RunMeshplan("export " + plan).exit_code == 2);  // --to is required
}

TEST_CASE("export: an inexpressible plan exits 2 naming knob, value and target, no file written",
          "[planner][cli][export]") {
  TempDir dir;
  // A plan meshplan's executor runs (zb_h1), which torchtitan's pipelining cannot express.
  const std::string plan = dir.Write(
      "plan.yaml", PlanYaml("  dp: 4\n  pp: 2\n  zero: 1\n  schedule: zb_h1\n", "meshplan"));
  const std::string out = (dir.path / "job.toml").string();
  const CliResult r = RunMeshplan("export " + plan + " --to torchtitan --out " + out);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains(plan + ": schedule: zb_h1 cannot be expressed in torchtitan"));
  CHECK_FALSE(std::filesystem::exists(out));
  // An existing file is left as it was.
  std::ofstream(out) << "keep me\n";
  CHECK(RunMeshplan("export " + plan + " --to torchtitan --out " + out).exit_code == 2);
  CHECK(Read(out) == "keep me\n");
  for (const auto& entry : std::filesystem::directory_iterator(dir.path))  // no temporary left
    CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("export: a bad plan file exits 2 at its file", "[planner][cli][export]") {
  TempDir dir;
  const std::string plan = dir.Write("plan.yaml", PlanYaml("  dp: 3\n"));  // 3 != 8 GPUs
  const CliResult r = RunMeshplan("export " + plan + " --to megatron");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains(plan));
}

TEST_CASE("export: --out writes the text whole, --json wraps it", "[planner][cli][export]") {
  TempDir dir;
  const std::string plan = dir.Write("plan.yaml", PlanYaml("  dp: 8\n  zero: 1\n"));
  const CliResult printed = RunMeshplan("export " + plan + " --to deepspeed", false);
  REQUIRE(printed.exit_code == 0);
  CHECK(nlohmann::json::parse(printed.output)["zero_optimization"]["stage"] == 1);
  const std::string out = (dir.path / "ds_config.json").string();
  const CliResult written = RunMeshplan("export " + plan + " --to deepspeed --out " + out, false);
  CHECK(written.exit_code == 0);
  CHECK(Read(out) == printed.output);
  const CliResult json = RunMeshplan("export " + plan + " --to deepspeed --json", false);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(json.output);
  CHECK(j["target"] == "deepspeed");
  CHECK(j["text"] == printed.output);
}

TEST_CASE("search --export writes the best plan for the target, or nothing when it cannot",
          "[planner][cli][export]") {
  TempDir dir;
  const std::string out = (dir.path / "args.sh").string();
  const std::string plan = (dir.path / "best.yaml").string();
  const CliResult r = RunMeshplan(
      "search --model llama3-8b --cluster 8xH100 --global-batch 64 --framework meshplan --only "
      "recompute=full,pp=1,prefetch=1,offload_act=0,offload_opt=0 "
      "--out " +
      plan + " --export megatron --export-out " + out);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(Read(out), Contains("--recompute-granularity full\n"));
  // The exported file is what `meshplan export` writes for the saved plan (the path aside).
  const CliResult again = RunMeshplan("export " + plan + " --to megatron", false);
  CHECK(again.output == Read(out));
  // torchtitan does not offer `selective`: nothing is written.
  const std::string refused = (dir.path / "job.toml").string();
  const CliResult no = RunMeshplan(
      "search --model llama3-8b --cluster 8xH100 --global-batch 64 --framework meshplan --only "
      "recompute=selective,zero=3,prefetch=1,offload_act=0,offload_opt=0,tp=1 "
      "--export torchtitan --export-out " +
      refused);
  CHECK(no.exit_code == 2);
  CHECK_THAT(no.output, Contains("recompute: selective cannot be expressed in torchtitan"));
  CHECK_FALSE(std::filesystem::exists(refused));
  CHECK(RunMeshplan("search --export-out " + refused).exit_code == 2);  // needs --export
}

}  // namespace
}  // namespace meshplan
