// Models people train today: mixtures of experts (Mixtral, Qwen3-MoE, DeepSeek-V3), heads
// wider than hidden / heads with q/k norms (Qwen3) and multi-head latent attention
// (DeepSeek-V3). Parameter counts (total and active) against the published figures,
// FLOPs that count active experts only, the loaders (config.json and YAML agree), and the
// bad-input messages. Fixtures: tests/data/hf/<model>/config.json, transcribed from the
// released Hugging Face config.json of each model (the fields meshplan reads; the rest kept
// as published).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "planner/config/config_loader.h"
#include "planner/cost/activation_memory.h"
#include "planner/cost/block_linears.h"
#include "planner/cost/compute_work.h"
#include "planner/cost/flops.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"
#include "planner/cost/step_work.h"
#include "planner/input_error.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;

std::string HfFixture(const std::string& name) {
  return std::string(MESHPLAN_SOURCE_DIR) + "/tests/data/hf/" + name;
}

using test::ErrorOf;

// A model YAML written to a temp file and loaded: its InputError.
InputError YamlError(const std::string& text) {
  const fs::path path = fs::temp_directory_path() / "meshplan_moe_model_test.yaml";
  std::ofstream(path) << text;
  const InputError e = ErrorOf([&] { LoadModel(path.string()); });
  fs::remove(path);
  return e;
}

constexpr const char* kMixtralYaml = R"(name: m
block: llama
vocab_size: 32000
hidden: 4096
layers: 32
heads: 32
kv_heads: 8
ffn_hidden: 14336
moe:
  experts: 8
  top_k: 2
  expert_ffn_hidden: 14336
)";

TEST_CASE("Mixtral 8x7B: 46,702,792,704 parameters, 12,879,925,248 active", "[planner][moe][params]") {
  // Total: the sum of the tensors in mistralai/Mixtral-8x7B-v0.1's safetensors index; the
  // paper (arXiv:2401.04088) says 47B total, 13B active; the model card 46.7B / 12.9B.
  // Active, derived: everything but 6 of the 8 experts (3 * 4096 * 14336 each) in 32 layers.
  const ModelSpec yaml = LoadModel("mixtral-8x7b");
  const ModelSpec hf = LoadHfConfig(HfFixture("mixtral-8x7b/config.json"));
  for (const ModelSpec& m : {yaml, hf}) {
    CHECK(CountParams(m) == 46'702'792'704);
    CHECK(CountActiveParams(m) == 12'879'925'248);
    CHECK(CountParams(m) - CountActiveParams(m) == 32LL * 6 * 3 * 4096 * 14336);
  }
  CHECK(hf.moe == yaml.moe);
  CHECK(hf.moe.experts == 8);
  CHECK(hf.moe.top_k == 2);
}

TEST_CASE("Qwen3-30B-A3B and Qwen3-8B have their published parameter counts",
          "[planner][moe][params]") {
  // Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated. Exact: the sum of its
  // tensors (heads of 128 on hidden 2048, q/k norms, 128 experts of 768, top-8).
  for (const ModelSpec& m : {LoadModel("qwen3-30b-a3b"), LoadHfConfig(HfFixture("qwen3-30b-a3b/config.json"))}) {
    CHECK(m.head_dim() == 128);
    CHECK(m.q_hidden() == 4096);  // wider than hidden (2048)
    CHECK(m.qk_norm);
    CHECK(CountParams(m) == 30'532'122'624);
    CHECK(CountActiveParams(m) == 3'353'032'704);
  }
  // Qwen/Qwen3-8B model card: 8.2B parameters, 6.95B without embeddings.
  for (const ModelSpec& m : {LoadModel("qwen3-8b"), LoadHfConfig(HfFixture("qwen3-8b/config.json"))}) {
    CHECK(m.attention_head_dim == 0);  // head_dim 128 == 4096 / 32
    CHECK(m.qk_norm);
    CHECK(CountParams(m) == 8'190'735'360);
    CHECK(CountParams(m) - 2LL * 151936 * 4096 == 6'946'075'648);  // "6.95B non-embedding"
    CHECK(CountActiveParams(m) == CountParams(m));
  }
  CHECK(LoadModel("qwen3-8b").moe == MoeSpec{});
}

TEST_CASE("DeepSeek-V3: 671B parameters, 37B active, MLA counted exactly",
          "[planner][moe][mla][params]") {
  // DeepSeek-V3 Technical Report (arXiv:2412.19437): 671B total, 37B activated per token;
  // the main model without its multi-token-prediction module (transformers' view).
  const ModelSpec yaml = LoadModel("deepseek-v3");
  const ModelSpec hf = LoadHfConfig(HfFixture("deepseek-v3/config.json"));
  ModelSpec renamed = yaml;
  renamed.name = hf.name;
  CHECK(hf == renamed);  // config.json and YAML describe the same model
  CHECK(CountParams(yaml) == 671'026'419'200);
  CHECK(CountActiveParams(yaml) == 37'552'297'472);
  // One MLA attention: Wq_a 7168x1536, q norm 1536, Wq_b 1536x(128*192), Wkv_a 7168x576,
  // kv norm 512, Wkv_b 512x(128*256), Wo (128*128)x7168.
  int64_t attention = 0;
  for (const BlockLinear& l : LlamaBlockLinears(yaml, false))
    if (l.role == LinearRole::kAttention) attention += l.params();
  CHECK(attention + 1536 + 512 == 187'107'328);
  // The first 3 layers are dense, the other 58 MoE.
  CHECK(yaml.moe_layers() == 58);
  CHECK_FALSE(yaml.IsMoeLayer(2));
  CHECK(yaml.IsMoeLayer(3));
}

TEST_CASE("FLOPs count the active experts only", "[planner][moe][flops]") {
  const ModelSpec m = LoadModel("mixtral-8x7b");
  // P_dense: the blocks a token passes through, the final norm and the lm_head.
  CHECK(DenseParams(m) == CountActiveParams(m) - 32000LL * 4096);
  CHECK(BlockMatmulParams(m) == 4096LL * 4096 * 2 + 2 * 4096LL * 1024 + 4096LL * 8 +
                                    2 * 3 * 4096LL * 14336);
  TrainingSpec training;
  training.global_batch = 8;
  training.seq_len = 4096;
  const StepFlops flops = StepFlopsOf(m, training, Recompute::kNone);
  const double tokens = 8.0 * 4096;
  CHECK(flops.model_no_attention == Approx(6.0 * tokens * double(DenseParams(m))).epsilon(1e-12));
  // A dense model of the same shape with all 8 experts active would cost ~3.6x more.
  ModelSpec all_active = m;
  all_active.moe.top_k = 8;
  CHECK(StepFlopsOf(all_active, training, Recompute::kNone).model_no_attention >
        3.5 * flops.model_no_attention);
  // The step's GEMMs: the routed experts are one grouped GEMM of 8 products of T*k/X rows.
  ParallelPlan plan;
  plan.micro_batch = 1;
  const StepWork work = BuildStepWork(m, training, plan);
  bool found = false;
  for (const GemmOp& g : work.block.forward.gemms)
    if (g.batch == 8) {
      found = true;
      CHECK(g.m == Approx(4096.0 * 2 / 8));  // T*k/X tokens per expert
      CHECK((g.n == 14336 || g.n == 4096));
    }
  CHECK(found);
  // The block's forward matmul FLOPs are 2 * T * BlockMatmulParams (dropless).
  CHECK(work.block.forward.matmul_flops == Approx(2.0 * 4096 * double(BlockMatmulParams(m))));
}

TEST_CASE("experts that see few tokens run slower per FLOP (tile and wave quantization)",
          "[planner][moe][compute]") {
  // Qwen3-30B-A3B, one sequence of 4096 tokens: each of the 128 experts gets T*k/X = 256 rows
  // of a 2048 x 768 GEMM, the q projection all 4096 rows of 2048 x 4096.
  const ModelSpec m = LoadModel("qwen3-30b-a3b");
  TrainingSpec training;
  training.global_batch = 1;
  training.seq_len = 4096;
  training.precision = Precision::kMixed;
  ParallelPlan plan;
  const StepWork work = BuildStepWork(m, training, plan);
  const ComputeRates rates = RatesFor(LoadGpu("h100-sxm"), Precision::kMixed);
  const GemmOp* expert = nullptr;
  const GemmOp* q = nullptr;
  for (const GemmOp& g : work.block.forward.gemms) {
    if (g.batch == 128 && expert == nullptr) expert = &g;
    if (g.batch == 1 && g.n == 4096 && q == nullptr) q = &g;
  }
  REQUIRE(expert != nullptr);
  REQUIRE(q != nullptr);
  CHECK(expert->m == 256);
  const double expert_rate = expert->flops() / GemmTime(*expert, rates);
  const double q_rate = q->flops() / GemmTime(*q, rates);
  CHECK(expert_rate < q_rate);
}

TEST_CASE("head_dim set on its own widens q and the attention core", "[planner][moe][flops]") {
  const ModelSpec m = LoadModel("qwen3-30b-a3b");
  // QK^T over D = 128 and AV over Dv = 128 for 32 heads: 2 * 32 * 256 * S, not 4 * E * S.
  CHECK(AttentionCoreForwardFlopsPerToken(m, 4096) == Approx(2.0 * 32 * 256 * 4096));
  CHECK(AttentionMatmulParams(m) == 2048LL * 4096 * 2 + 2 * 2048LL * 512);
  const ModelSpec v3 = LoadModel("deepseek-v3");
  CHECK(AttentionCoreForwardFlopsPerToken(v3, 1) == Approx(2.0 * 128 * (192 + 128)));
}

TEST_CASE("a capacity factor pads every expert's rows", "[planner][moe][flops]") {
  ModelSpec m = LoadModel("mixtral-8x7b");
  CHECK(ExpertRowsPerToken(m) == 2);  // dropless
  m.moe.capacity_factor = 1.25;
  CHECK(ExpertRowsPerToken(m) == 2.5);
}

TEST_CASE("stage parameters split dense and MoE layers exactly", "[planner][moe][params]") {
  const ModelSpec m = LoadModel("deepseek-v3");
  ParallelPlan plan;
  plan.pp = 61;  // one layer per stage: stages 0-2 dense, 3-60 MoE
  plan.tp = 1;
  CHECK(MoeLayersOfStage(m, plan, 2) == 0);
  CHECK(MoeLayersOfStage(m, plan, 3) == 1);
  CHECK(CountStageParams(m, plan, 2).experts == 0);
  CHECK(CountStageParams(m, plan, 3).experts == 257LL * 3 * 7168 * 2048);
  int64_t sum = 0;
  for (int64_t s = 0; s < plan.pp; ++s) sum += CountStageParams(m, plan, s).total();
  CHECK(sum == CountParams(m));
  ModelSpec tiny = m;  // 8 layers, interleaved over pp=2 x vpp=2: chunks of 2 layers
  tiny.layers = 8;
  ParallelPlan vpp;
  vpp.pp = 2;
  vpp.virtual_stages = 2;
  vpp.schedule = PipelineSchedule::kInterleaved;
  // Layers 0-2 are dense. Stage 0 holds chunks 0 (layers 0, 1) and 2 (4, 5): 2 MoE layers;
  // stage 1 holds chunks 1 (2, 3) and 3 (6, 7): 3 MoE layers.
  CHECK(MoeLayersOfStage(tiny, vpp, 0) == 2);
  CHECK(MoeLayersOfStage(tiny, vpp, 1) == 3);
}

TEST_CASE("detailed memory: expert states and the dispatch buffers of a MoE block",
          "[planner][moe][memory]") {
  const ModelSpec m = LoadModel("deepseek-v3");
  TrainingSpec training;
  training.global_batch = 61;
  training.seq_len = 4096;
  training.precision = Precision::kMixed;
  ParallelPlan plan;
  plan.pp = 61;  // one layer per stage: stage 2 dense, stage 3 MoE
  plan.tp = 8;
  plan.micro_batch = 1;
  const MemoryBreakdown dense = DetailedStageMemory(m, training, plan, 2);
  const MemoryBreakdown moe = DetailedStageMemory(m, training, plan, 3);
  // Model states follow the stage's own blocks: a MoE layer's 257 experts dwarf the dense FFN.
  const double moe_params = double(CountStageParams(m, plan, 3).total());
  const double dense_params = double(CountStageParams(m, plan, 2).total());
  CHECK(moe.params_bytes - dense.params_bytes == Approx(2 * (moe_params - dense_params)).epsilon(1e-6));
  CHECK(moe.optimizer_bytes / dense.optimizer_bytes == Approx(moe_params / dense_params));
  CHECK(moe_params / dense_params > 15);  // 257 experts' tp shards against a dense FFN

  // The MoE FFN's saved tensors: dropless R = B*S*k rows; a capacity factor bounds the kept
  // rows by X * capacity (the executor keeps no padding: 1.25 keeps them all, 0.5 half).
  RankShape sh = MakeRankShape(m, training, plan);
  CHECK(sh.expert_rows == 4096.0 * 8);
  CHECK(sh.expert_ffn == 2048 / 8);
  double dispatched = 0;
  for (const SavedTensor& t : BlockSavedTensors(m, sh, AttentionImpl::kFused, Recompute::kNone))
    if (std::string(t.op) == "dispatch") dispatched = t.bytes();
  CHECK(dispatched == 4096.0 * 8 * 7168 * 2);
  ModelSpec padded = m;
  padded.moe.capacity_factor = 1.25;
  CHECK(MakeRankShape(padded, training, plan).expert_rows == 4096.0 * 8);
  padded.moe.capacity_factor = 0.5;  // capacity ceil(0.5 * 4096*8 / 256) = 64 rows an expert
  CHECK(MakeRankShape(padded, training, plan).expert_rows == 256.0 * 64);
}

TEST_CASE("bad MoE input: top-k above the experts, half the fields, MoE keys in a dense type",
          "[planner][moe][errors]") {
  const InputError topk = ErrorOf([] { LoadHfConfig(HfFixture("mixtral_topk_too_large.json")); });
  CHECK(topk.field() == "num_experts_per_tok");
  CHECK_THAT(topk.what(), Catch::Contains("mixtral_topk_too_large.json") &&
                              Catch::Contains("top_k=9 with experts=8") &&
                              Catch::Contains("1 <= top_k <= experts"));
  const InputError half = ErrorOf([] { LoadHfConfig(HfFixture("mixtral_half_moe.json")); });
  CHECK(half.field() == "num_experts_per_tok");
  CHECK_THAT(half.what(), Catch::Contains("mixtral_half_moe.json") && Catch::Contains("missing") &&
                              Catch::Contains("1 <= k <= num_local_experts"));
  const InputError dense = ErrorOf([] { LoadHfConfig(HfFixture("llama_with_experts.json")); });
  CHECK(dense.field() == "num_local_experts");
  CHECK_THAT(dense.what(), Catch::Contains("model_type 'llama'") &&
                               Catch::Contains("mixtral, qwen3_moe, deepseek_v2 or deepseek_v3"));

  // A MoE type meshplan does not read is refused by its type, not as a dense model.
  const fs::path qwen2_moe = fs::temp_directory_path() / "meshplan_moe_qwen2_moe.json";
  std::ofstream(qwen2_moe) << R"({"model_type": "qwen2_moe", "num_experts": 60})";
  const InputError unsupported = ErrorOf([&] { LoadHfConfig(qwen2_moe.string()); });
  fs::remove(qwen2_moe);
  CHECK(unsupported.field() == "model_type");
  CHECK_THAT(unsupported.what(), Catch::Contains("'qwen2_moe'") && Catch::Contains("qwen3_moe"));

  // YAML: the error sits at the key inside moe, with its line.
  std::string yaml = kMixtralYaml;
  const InputError yaml_topk = YamlError(yaml.replace(yaml.find("top_k: 2"), 8, "top_k: 9"));
  CHECK(yaml_topk.field() == "moe.top_k");
  CHECK(yaml_topk.where().line == 11);
  CHECK_THAT(yaml_topk.what(), Catch::Contains("1 <= top_k <= experts"));
  std::string no_width = kMixtralYaml;
  no_width.erase(no_width.find("  expert_ffn_hidden"));
  const InputError missing = YamlError(no_width);
  CHECK(missing.field() == "moe.expert_ffn_hidden");
  CHECK_THAT(missing.what(), Catch::Contains("missing required field"));
  const InputError unknown = YamlError(std::string(kMixtralYaml) + "  experts_per_token: 2\n");
  CHECK(unknown.field() == "moe.experts_per_token");
  CHECK_THAT(unknown.what(), Catch::Contains("top_k"));  // lists the allowed keys
  std::string dense_all = kMixtralYaml;
  const InputError dense_layers = YamlError(dense_all + "  dense_layers: 32\n");
  CHECK(dense_layers.field() == "moe.dense_layers");
  CHECK_THAT(dense_layers.what(), Catch::Contains("0 <= dense_layers < layers"));
}

TEST_CASE("a plan file keeps the MoE, MLA and head_dim fields", "[planner][moe][config]") {
  for (const char* name : {"deepseek-v3", "qwen3-30b-a3b", "mixtral-8x7b"}) {
    CAPTURE(name);
    PlanFile pf;
    pf.model = LoadModel(name);
    pf.cluster = LoadCluster("8xH100");
    pf.training.global_batch = 8;
    pf.training.seq_len = 4096;
    pf.plan.dp = 8;
    const PlanFile back = PlanFileFromText(PlanFileToYaml(pf), "round_trip.yaml");
    CHECK(back.model == pf.model);
  }
}

}  // namespace
}  // namespace meshplan
