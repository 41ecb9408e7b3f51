// A llama block's dense FFN (ModelSpec::ffn_activation): swiglu, gated, or squared-relu, two
// matrices without a gate (Nemotron). Read from model YAML and Hugging Face config.json with
// located errors; counted (parameters, FLOPs, ops, saved tensors); refused by the executor
// and written by the Megatron export.
#include <catch2/catch.hpp>

#include <string>

#include "planner/config/config_loader.h"
#include "planner/cost/block_ops.h"
#include "planner/cost/flops.h"
#include "planner/cost/param_count.h"
#include "planner/executor_support.h"
#include "planner/export/export.h"
#include "planner/input_error.h"
#include "planner/names.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

using Catch::Contains;
using test::ErrorOf;

constexpr const char* kModel =
    "block: llama\nvocab_size: 1000\nhidden: 512\nlayers: 2\nheads: 8\nffn_hidden: 2048\n";

TEST_CASE("ffn_activation: read, written back, and refused where it has no meaning",
          "[planner][config][ffn_activation]") {
  test::TempDir dir;
  CHECK(LoadModel(dir.Write("swiglu.yaml", kModel)).ffn_activation == FfnActivation::kSwiGlu);
  const ModelSpec relu2 =
      LoadModel(dir.Write("relu2.yaml", std::string(kModel) + "ffn_activation: squared-relu\n"));
  CHECK(relu2.ffn_activation == FfnActivation::kSquaredRelu);
  CHECK_FALSE(relu2.gated_ffn());
  CHECK_THAT(ModelToYaml(relu2), Contains("ffn_activation: squared-relu\n"));
  CHECK(LoadModel(dir.Write("again.yaml", ModelToYaml(relu2))) == relu2);
  CHECK(ModelToYaml(LoadModel("llama2-7b")).find("ffn_activation") == std::string::npos);

  const InputError bad = ErrorOf(
      [&] { LoadModel(dir.Write("bad.yaml", std::string(kModel) + "ffn_activation: gelu\n")); });
  CHECK(bad.field() == "ffn_activation");
  CHECK(bad.where().line == 7);
  CHECK_THAT(bad.what(), Contains("expected one of: swiglu, squared-relu; got 'gelu'"));
  const InputError gpt = ErrorOf([&] {
    LoadModel(dir.Write("gpt.yaml", "block: gpt\nvocab_size: 1000\nhidden: 512\nlayers: 2\n"
                                    "heads: 8\nffn_hidden: 2048\nmax_seq: 64\n"
                                    "ffn_activation: squared-relu\n"));
  });
  CHECK(gpt.field() == "ffn_activation");
  CHECK_THAT(gpt.what(), Contains("a gpt block has no ffn_activation"));
  const InputError moe = ErrorOf([&] {
    LoadModel(dir.Write("moe.yaml", std::string(kModel) +
                                        "ffn_activation: squared-relu\nmoe: {experts: 4, top_k: 2, "
                                        "expert_ffn_hidden: 256}\n"));
  });
  CHECK(moe.field() == "ffn_activation");
  CHECK_THAT(moe.what(), Contains("SwiGLU"));
}

TEST_CASE("ffn_activation: Hugging Face's nemotron is a squared-ReLU llama block",
          "[planner][config][hf][ffn_activation]") {
  test::TempDir dir;
  const std::string fields =
      R"("hidden_size": 4096, "intermediate_size": 16384, "num_attention_heads": 32,
         "num_key_value_heads": 32, "num_hidden_layers": 32, "vocab_size": 256000)";
  const ModelSpec m = LoadHfConfig(
      dir.Write("config.json", R"({"model_type": "nemotron", "hidden_act": "relu2", )" + fields + "}"));
  CHECK(m.block == BlockKind::kLlama);
  CHECK(m.ffn_activation == FfnActivation::kSquaredRelu);
  CHECK_FALSE(m.tied_embeddings);  // NemotronConfig's tie_word_embeddings defaults to false
  CHECK(CountParams(m) == CountParams(LoadModel("nemotron3-8b")));
  const InputError e = ErrorOf([&] {
    LoadHfConfig(dir.Write("silu.json", R"({"model_type": "nemotron", "hidden_act": "silu", )" +
                                            fields + "}"));
  });
  CHECK(e.field() == "hidden_act");
  CHECK_THAT(e.what(), Contains("'silu'") && Contains("relu2"));
}

TEST_CASE("ffn_activation: two matrices, their FLOPs, ops and saved tensors",
          "[planner][block_ops][ffn_activation]") {
  const ModelSpec swiglu = LoadModel("nemotron3-8b");
  REQUIRE_FALSE(swiglu.gated_ffn());
  ModelSpec gated = swiglu;
  gated.ffn_activation = FfnActivation::kSwiGlu;
  const int64_t E = swiglu.hidden, F = swiglu.ffn_hidden, L = swiglu.layers;
  // One E x F matrix fewer per block: the gate.
  CHECK(CountParams(gated) - CountParams(swiglu) == L * E * F);
  CHECK(BlockMatmulParams(gated) - BlockMatmulParams(swiglu) == E * F);
  // Nemotron-4 340B: 341e9 (its report's "340B"): 96 blocks of q and o (E x E), k and v
  // (E x 8 x 192), up and down (E x 4E), two norms, and untied 256,000 x E embeddings.
  const ModelSpec big = LoadModel("nemotron4-340b");
  const int64_t E4 = big.hidden;
  CHECK(CountParams(big) == 96 * (2 * E4 * E4 + 2 * E4 * 8 * 192 + 2 * E4 * 4 * E4 + 2 * E4) +
                                2 * 256000 * E4 + E4);

  TrainingSpec training;
  training.global_batch = 8;
  training.seq_len = 1024;
  training.precision = Precision::kBf16;
  const ParallelPlan plan = ParsePlanString("dp=1,tp=2");
  for (const KernelSet kernels : {KernelSet::kFused, KernelSet::kEager}) {
    CAPTURE(static_cast<int>(kernels));
    training.framework.kernels = kernels;
    const RankShape shape = MakeRankShape(swiglu, training, plan);
    const BlockOps ops = BuildBlockOps(swiglu, shape, LoweringOf(shape, AttentionImpl::kFused));
    std::vector<std::string> ffn;
    const BlockOp* activation = nullptr;
    for (const BlockOp& op : ops) {
      if (op.attention_half) continue;
      if (op.kind != OpKind::kCollective) ffn.push_back(op.name);
      if (std::string(op.name) == "squared_relu") activation = &op;
    }
    CHECK(ffn == std::vector<std::string>{"ffn_norm", "w_up", "squared_relu", "w_down",
                                          "mlp.residual"});
    REQUIRE(activation != nullptr);
    // (T, F/tp) elements of 2 bytes: fused, read + write forward and read 2, write 1 backward.
    const double elements = double(shape.T) * F / 2;
    const bool fused = kernels == KernelSet::kFused;
    CHECK(activation->forward.bytes == Approx((fused ? 4 : 8) * elements));
    CHECK(activation->backward.bytes == Approx((fused ? 6 : 20) * elements));
    CHECK(activation->forward.kernels == (fused ? 1 : 2));
    // Saved for backward in the FFN half: the norm's input and rstd, w_up's input, the
    // activation's input and w_down's input (two (B,S,F/tp) tensors, not SwiGLU's three).
    int ffn_wide = 0;
    for (const SavedTensor& t : ops.saved())
      ffn_wide += t.mlp_half && t.elements == Approx(elements);
    CHECK(ffn_wide == 2);
  }
}

TEST_CASE("ffn_activation: the executor refuses it, Megatron's export writes it",
          "[planner][export][ffn_activation]") {
  PlanFile pf;
  pf.model = LoadModel("nemotron3-8b");
  pf.cluster = LoadCluster("8xH100");
  pf.training.global_batch = 64;
  pf.training.seq_len = 4096;
  pf.training.precision = Precision::kMixed;
  pf.plan = ParsePlanString("dp=4,tp=2,sp=1");
  bool refused = false;
  for (const std::string& reason : ExecutorLimitations(pf))
    refused |= reason.starts_with("model.ffn_activation: squared-relu");
  CHECK(refused);
  const std::string flags = ExportPlan(pf, ExportTarget::kMegatron, "plan.yaml");
  CHECK_THAT(flags, Contains("--squared-relu"));
  CHECK(flags.find("--swiglu") == std::string::npos);
  // torchtitan's flavors are SwiGLU: the comment that names the flavor to pick says so.
  pf.plan = ParsePlanString("dp=4,tp=2,sp=1,zero=3");  // FSDP2 beside TP
  CHECK_THAT(ExportPlan(pf, ExportTarget::kTorchtitan, "plan.yaml"),
             Contains("FFN 16384 squared-ReLU, not gated"));
  pf.model = LoadModel("llama3-8b");
  CHECK_THAT(ExportPlan(pf, ExportTarget::kMegatron, "plan.yaml"), Contains("--swiglu"));
  CHECK(ExportPlan(pf, ExportTarget::kTorchtitan, "plan.yaml").find("squared") ==
        std::string::npos);
}

}  // namespace
}  // namespace meshplan
