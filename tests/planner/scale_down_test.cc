// ScaleDown (`meshplan shrink`): the mesh reduced to N ranks keeping every factor it can,
// a tiny model of the same family, a plan meshplan's executor trains; and the model and
// cluster writers it uses read back to the same specs.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <utility>

#include "planner/config/config_loader.h"
#include "planner/executor_support.h"
#include "planner/input_error.h"
#include "planner/parallel_plan.h"
#include "planner/scale_down.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace meshplan {
namespace {

PlanFile Big(const std::string& model, const std::string& cluster, const std::string& plan,
             int64_t global_batch = 512) {
  PlanFile p;
  p.model = LoadModel(model);
  p.cluster = LoadCluster(cluster);
  p.training.global_batch = global_batch;
  p.training.seq_len = 4096;
  p.plan = ParsePlanString(plan, "test");
  return p;
}

ClusterSpec Cpu(int64_t ranks) {
  ClusterSpec c = LoadCluster("1xcpu-ci");
  c.gpus_per_node = ranks;
  return c;
}

TEST_CASE("shrink divides dp first and keeps every other factor at 2 or more",
          "[planner][shrink]") {
  const ScaledDown a = ScaleDown(Big("llama2-7b", "8xH100", "dp=8,zero=1"), Cpu(2), true);
  CHECK(ToPlanString(a.plan.plan) == ToPlanString(ParsePlanString("dp=2,zero=1", "t")));
  const ScaledDown b =
      ScaleDown(Big("llama3-70b", "64xH100", "dp=2,tp=8,pp=4,sp=1,schedule=interleaved,vpp=5"),
                Cpu(8), true);
  // 64 -> 8 ranks: dp is at 2 already, so tp gives 8 -> 2 and pp 4 -> 2; none below 2.
  CHECK(b.plan.plan.dp == 2);
  CHECK(b.plan.plan.tp == 2);
  CHECK(b.plan.plan.pp == 2);
  CHECK(b.plan.plan.schedule == PipelineSchedule::kInterleaved);
  CHECK(b.plan.plan.virtual_stages == 5);
  CHECK(b.plan.plan.sequence_parallel);
  CHECK(b.plan.model.layers == 2 * 5 * 2);  // 2 layers per chunk
  CHECK(b.plan.training.global_batch == 2 * 2 * 2);  // 2 micro-batches per stage per dp rank
  // Down to 1 only when nothing else can give.
  const ScaledDown c = ScaleDown(Big("llama3-70b", "64xH100", "dp=8,tp=8"), Cpu(1), true);
  CHECK(c.plan.plan.world_size() == 1);
  CHECK_FALSE(c.plan.plan.sequence_parallel);
}

TEST_CASE("shrink keeps the model's family: attention grouping, MoE routing, tied embeddings",
          "[planner][shrink]") {
  const ScaledDown mha = ScaleDown(Big("llama2-7b", "8xH100", "dp=8"), Cpu(2), true);
  CHECK(mha.plan.model.heads == mha.plan.model.kv_heads);
  const ScaledDown gqa = ScaleDown(Big("llama3-8b", "8xH100", "dp=2,tp=4"), Cpu(4), true);
  CHECK(gqa.plan.model.heads == 4 * gqa.plan.model.kv_heads);  // llama3's group of 4
  CHECK(gqa.plan.model.kv_heads % gqa.plan.plan.tp == 0);
  CHECK(gqa.plan.model.heads >= 8);
  CHECK(gqa.plan.model.ffn_hidden % gqa.plan.plan.tp == 0);
  CHECK(gqa.plan.model.vocab_size % gqa.plan.plan.tp == 0);

  const PlanFile mixtral = Big("mixtral-8x7b", "64xH100", "dp=32,cp=2,ep=8,zero=1", 256);
  const ScaledDown moe = ScaleDown(mixtral, Cpu(4), true);
  CHECK(moe.plan.model.moe.enabled());
  CHECK(moe.plan.model.moe.top_k == mixtral.model.moe.top_k);
  CHECK(moe.plan.plan.cp == 1);  // the executor's mixture of experts runs with cp=1
  CHECK(moe.plan.plan.dp == 4);
  CHECK(moe.plan.plan.ep == 4);
  CHECK(moe.plan.model.moe.experts == 2 * moe.plan.plan.ep);
  CHECK(moe.plan.training.precision == Precision::kFp32);
  CHECK_FALSE(moe.changes.empty());
}

TEST_CASE("shrink's plan is one meshplan run trains, the changes named",
          "[planner][shrink]") {
  // Qwen3 has q/k norms; zb_h1, recompute=op and tp_overlap are not the executor's.
  const ScaledDown q = ScaleDown(
      Big("qwen3-8b", "64xH100", "dp=4,tp=4,pp=4,sp=1,schedule=zb_h1,recompute=op,tp_overlap=1"),
      Cpu(8), true);
  CHECK(ExecutorLimitations(q.plan).empty());
  const std::string changes = [&] {
    std::string all;
    for (const std::string& c : q.changes) all += c + "; ";
    return all;
  }();
  CHECK_THAT(changes, Catch::Contains("zb_h1 -> 1f1b") && Catch::Contains("recompute op") &&
                          Catch::Contains("tp_overlap") && Catch::Contains("qk_norm off"));
  // DeepSeek-V3: MLA and a router bias.
  const ScaledDown d = ScaleDown(Big("deepseek-v3", "1024xH100-ib", "dp=64,tp=8,pp=2,ep=64", 1024),
                                 Cpu(4), true);
  CHECK(ExecutorLimitations(d.plan).empty());
  CHECK_FALSE(d.plan.model.mla.enabled());
  // Nemotron: a squared-ReLU FFN, which the executor does not build.
  const ScaledDown n = ScaleDown(Big("nemotron3-8b", "64xH100", "dp=32,tp=2,sp=1"), Cpu(4), true);
  CHECK(ExecutorLimitations(n.plan).empty());
  CHECK(n.plan.model.gated_ffn());
  bool named = false;
  for (const std::string& c : n.changes) named |= c.starts_with("ffn_activation squared-relu -> swiglu");
  CHECK(named);
}

TEST_CASE("shrink refuses a rank count that cannot keep the layout", "[planner][shrink]") {
  const PlanFile big = Big("llama2-7b", "8xH100", "dp=8");
  CHECK_THROWS_WITH(ScaleDown(big, Cpu(3), true),
                    Catch::Contains("--nproc") || Catch::Contains("divisor of 8"));
  CHECK_THROWS_AS(ScaleDown(big, Cpu(16), true), InputError);
}

TEST_CASE("a model and a cluster written as files read back to the same specs",
          "[planner][config][shrink]") {
  for (const char* name :
       {"llama3-70b", "mixtral-8x7b", "deepseek-v3", "qwen3-8b", "gpt3-175b", "nemotron4-340b"}) {
    INFO(name);
    const ModelSpec m = LoadModel(name);
    CHECK(ModelFromYamlText(ModelToYaml(m), "m.yaml") == m);
  }
  for (const char* name : {"8xH100", "1024xh100-ib", "cpu-1x", "2xa40-pcie"}) {
    INFO(name);
    const ClusterSpec c = LoadCluster(name);
    CHECK(ClusterFromYamlText(ClusterToYaml(c), "c.yaml") == c);
  }
}

TEST_CASE("meshplan shrink writes three files that load as the plan, or exits 2 naming the flag",
          "[planner][shrink][cli]") {
  const test::ScratchDir scratch("shrink_cli");
  const std::string plan = std::string(MESHPLAN_SOURCE_DIR) + "/configs/plans/example-7b-8xh100.yaml";
  const test::CliResult ok = test::RunMeshplan("shrink '" + plan + "' --nproc 4 --format json --out-dir '" +
                                               scratch.Path("out") + "'");
  INFO(ok.output);
  REQUIRE(ok.exit_code == 0);
  const PlanFile small = LoadPlanFile(scratch.Path("out/plan.yaml"));
  CHECK(small.plan.world_size() == 4);
  CHECK(small.plan.tp == 2);  // dp=2,tp=4 -> dp 2 kept, tp 4 -> 2
  CHECK(small.model == LoadModel(scratch.Path("out/model.yaml")));
  CHECK(small.cluster == LoadCluster(scratch.Path("out/cluster.yaml")));
  const std::pair<std::string, std::string> bad[] = {{"--nproc 3", "--nproc"},
                                                      {"--nproc 0", "--nproc"},
                                                      {"--nproc 4 --device tpu", "--device"},
                                                      {"--nproc 4 --out-dir ''", "--out-dir"}};
  for (const auto& [flags, named] : bad) {
    INFO(flags);
    const std::string out =
        flags.find("--out-dir") == std::string::npos ? " --out-dir '" + scratch.Path("bad") + "'" : "";
    const test::CliResult r = test::RunMeshplan("shrink '" + plan + "' " + flags + out);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(named));
  }
  CHECK_FALSE(std::filesystem::exists(scratch.Path("bad")));
  const test::CliResult missing = test::RunMeshplan("shrink /nonexistent.yaml --nproc 2");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.output, Catch::Contains("/nonexistent.yaml"));
}

}  // namespace
}  // namespace meshplan
