// The model's hand-written full backward against autograd of a reference forward (plain
// out-of-place ATen ops over the same flat parameter groups), every recompute mode, tied
// and untied lm_head, MHA and GQA; plus the layout and the seeded initialisation.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "executor/model/llama_model.h"
#include "executor/model/param_layout.h"
#include "planner/cost/param_count.h"
#include "tests/executor/model_pass.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

using test::RequireClose;
using test::TinySpec;

// ---------------------------------------------------------------------------------------
// Reference forward (autograd)

struct RefTables {
  at::Tensor cos, sin, mask;
};

RefTables Tables(const ModelSpec& m, int64_t S) {
  const int64_t D = m.head_dim();
  const at::Tensor inv = at::pow(10000.0, at::arange(D / 2, at::kDouble) * (-2.0 / double(D)));
  const at::Tensor ang = at::outer(at::arange(S, at::kDouble), inv);
  return {ang.cos().to(at::kFloat), ang.sin().to(at::kFloat), at::ones({S, S}, at::kBool).triu(1)};
}

at::Tensor Norm(const at::Tensor& x, const at::Tensor& w) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-5) * w;
}

at::Tensor Heads(const at::Tensor& x, int64_t n) {  // (B,S,n*D) -> (B,n,S,D)
  return x.view({x.size(0), x.size(1), n, -1}).transpose(1, 2);
}

at::Tensor Rope(const at::Tensor& x, int64_t n, const RefTables& t) {
  const at::Tensor h = Heads(x, n);
  const int64_t half = h.size(-1) / 2;
  const at::Tensor a = h.narrow(-1, 0, half), b = h.narrow(-1, half, half);
  return at::cat({a * t.cos - b * t.sin, b * t.cos + a * t.sin}, -1);
}

at::Tensor RefBlock(const ModelSpec& m, const ParamGroup& g, const at::Tensor& flat,
                    const at::Tensor& x, const RefTables& t) {
  const auto w = [&](const char* name) { return SlotView(flat, g.slot(name)); };
  const int64_t H = m.heads, K = m.kv_heads, D = m.head_dim();
  const at::Tensor h1 = Norm(x, w("attn_norm"));
  const at::Tensor q = Rope(at::matmul(h1, w("wq").t()), H, t);
  const at::Tensor k = Rope(at::matmul(h1, w("wk").t()), K, t).repeat_interleave(H / K, 1);
  const at::Tensor v = Heads(at::matmul(h1, w("wv").t()), K).repeat_interleave(H / K, 1);
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(D));
  const at::Tensor p = at::softmax(scores.masked_fill(t.mask, -std::numeric_limits<double>::infinity()), -1);
  const at::Tensor o = at::matmul(p, v).transpose(1, 2).reshape({x.size(0), x.size(1), H * D});
  const at::Tensor x2 = x + at::matmul(o, w("wo").t());
  const at::Tensor h2 = Norm(x2, w("ffn_norm"));
  const at::Tensor act = at::silu(at::matmul(h2, w("w_gate").t())) * at::matmul(h2, w("w_up").t());
  return x2 + at::matmul(act, w("w_down").t());
}

at::Tensor RefLoss(const ModelSpec& m, const ParamLayout& layout,
                   const std::vector<at::Tensor>& flats, const at::Tensor& ids,
                   const at::Tensor& targets) {
  const RefTables t = Tables(m, ids.size(1));
  const at::Tensor wte = SlotView(flats[layout.embedding_group],
                                  layout.groups[layout.embedding_group].slot("wte"));
  at::Tensor x = wte.index_select(0, ids.flatten()).view({ids.size(0), ids.size(1), m.hidden});
  for (int64_t i = 0; i < layout.num_blocks; ++i) {
    const int g = layout.first_block_group + int(i);
    x = RefBlock(m, layout.groups[g], flats[g], x, t);
  }
  const ParamGroup& hg = layout.groups[layout.head_group];
  const at::Tensor& hf = flats[layout.head_group];
  const at::Tensor lm = m.tied_embeddings ? wte : SlotView(hf, hg.slot("lm_head"));
  const at::Tensor logits = at::matmul(Norm(x, SlotView(hf, hg.slot("final_norm"))), lm.t());
  return at::cross_entropy_loss(logits.view({-1, m.vocab_size}), targets.flatten());
}

// The executor's forward + backward over the same groups: tests/executor/model_pass.h

test::ModelPass RunModel(const ModelSpec& m, const ParamLayout& layout,
                         const std::vector<at::Tensor>& flats, const at::Tensor& ids,
                         const at::Tensor& targets, Recompute recompute, double dloss) {
  test::ModelPass r = test::RunModelPass(m, layout, flats, ids, targets, recompute, dloss,
                                         AttentionImpl::kNaive, /*keep_stashes=*/true);
  for (const BlockStash& stash : r.kept) {
    if (recompute == Recompute::kFull) CHECK_FALSE(stash.h1.defined());
    if (recompute == Recompute::kSelective) CHECK_FALSE(stash.probs.defined());
    if (recompute == Recompute::kNone) CHECK(stash.probs.defined());
  }
  return r;
}

TEST_CASE("model backward equals autograd of the reference forward", "[executor][model]") {
  const bool tied = GENERATE(false, true);
  const int64_t kv_heads = GENERATE(4, 2);
  const Recompute recompute = GENERATE(Recompute::kNone, Recompute::kSelective, Recompute::kFull);
  const ModelSpec m = TinySpec(tied, kv_heads);
  const ParamLayout layout = BuildParamLayout(m, 1);
  std::vector<at::Tensor> flats, leaves;
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    flats.push_back(InitGroup(layout.groups[g], 7 + g));
    // Norm weights of 1 would hide a wrong norm-weight gradient: perturb everything.
    flats.back().add_(at::randn_like(flats.back()) * 0.05);
    leaves.push_back(flats.back().clone().requires_grad_(true));
  }
  const at::Tensor ids = at::randint(0, m.vocab_size, {2, 8}, at::kLong);
  const at::Tensor targets = at::randint(0, m.vocab_size, {2, 8}, at::kLong);
  const at::Tensor ref = RefLoss(m, layout, leaves, ids, targets);
  (ref * 0.5).backward();
  const test::ModelPass got = RunModel(m, layout, flats, ids, targets, recompute, 0.5);
  CHECK(got.loss == Approx(ref.item<double>()).epsilon(1e-5));
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    const at::Tensor want = leaves[g].grad();
    RequireClose(got.grads[g].narrow(0, 0, layout.groups[g].numel),
                 want.narrow(0, 0, layout.groups[g].numel), 1e-3, 1e-6,
                 "gradient of " + layout.groups[g].name);
  }
}

TEST_CASE("recompute modes give bit-identical losses and gradients", "[executor][model]") {
  const ModelSpec m = TinySpec(false, 2);
  const ParamLayout layout = BuildParamLayout(m, 1);
  std::vector<at::Tensor> flats;
  for (const ParamGroup& g : layout.groups) flats.push_back(InitGroup(g, 3));
  const at::Tensor ids = at::randint(0, m.vocab_size, {2, 8}, at::kLong);
  const at::Tensor targets = at::randint(0, m.vocab_size, {2, 8}, at::kLong);
  const test::ModelPass none = RunModel(m, layout, flats, ids, targets, Recompute::kNone, 1.0);
  for (Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
    const test::ModelPass r = RunModel(m, layout, flats, ids, targets, mode, 1.0);
    CHECK(r.loss == none.loss);
    for (size_t g = 0; g < flats.size(); ++g) CHECK(at::equal(r.grads[g], none.grads[g]));
  }
}

TEST_CASE("the fused attention core (scaled_dot_product_attention) equals the naive one on CPU",
          "[executor][model]") {
  const bool tied = GENERATE(false, true);
  const Recompute recompute = GENERATE(Recompute::kNone, Recompute::kSelective, Recompute::kFull);
  const ModelSpec m = TinySpec(tied, 2);
  const ParamLayout layout = BuildParamLayout(m, 1);
  std::vector<at::Tensor> flats;
  for (const ParamGroup& g : layout.groups) flats.push_back(InitGroup(g, 11));
  const at::Tensor ids = at::randint(0, m.vocab_size, {2, 8}, at::kLong);
  const at::Tensor targets = at::randint(0, m.vocab_size, {2, 8}, at::kLong);
  const test::ModelPass naive = test::RunModelPass(m, layout, flats, ids, targets, recompute, 1.0);
  const test::ModelPass fused = test::RunModelPass(m, layout, flats, ids, targets, recompute, 1.0,
                                                   AttentionImpl::kFused, /*keep_stashes=*/true);
  if (recompute == Recompute::kNone) CHECK(fused.kept[0].fused.out.defined());
  CHECK_FALSE(fused.kept[0].probs.defined());  // the fused core never materialises probs
  CHECK(fused.loss == Approx(naive.loss).epsilon(1e-6));
  RequireClose(fused.logits, naive.logits, 1e-5, 1e-6, "logits");
  for (size_t g = 0; g < layout.groups.size(); ++g)
    RequireClose(fused.grads[g], naive.grads[g], 1e-4, 1e-7, "gradient of " + layout.groups[g].name);
}

TEST_CASE("the layout holds exactly the model's parameters, padded per shard",
          "[executor][model]") {
  for (bool tied : {false, true}) {
    ModelSpec m = TinySpec(tied, 2);
    if (tied) m.attention_head_dim = 8;  // q and wo H*D = 32 wide on E = 16
    const ParamLayout one = BuildParamLayout(m, 1);
    CHECK(one.numel() == CountParams(m));
    const ParamLayout three = BuildParamLayout(m, 3);
    CHECK(three.numel() == CountParams(m));
    for (const ParamGroup& g : three.groups) {
      CHECK(g.padded_numel % 3 == 0);
      CHECK(g.padded_numel - g.numel < 3);
      CHECK(g.shard_numel * 3 == g.padded_numel);
    }
  }
}

TEST_CASE("initialisation depends on the seed and the weight, not on the sharding",
          "[executor][model]") {
  const ModelSpec m = TinySpec(false, 2);
  const ParamLayout a = BuildParamLayout(m, 1), b = BuildParamLayout(m, 4);
  for (size_t g = 0; g < a.groups.size(); ++g) {
    const at::Tensor x = InitGroup(a.groups[g], 11), y = InitGroup(b.groups[g], 11);
    CHECK(at::equal(x.narrow(0, 0, a.groups[g].numel), y.narrow(0, 0, a.groups[g].numel)));
    CHECK(y.narrow(0, a.groups[g].numel, b.groups[g].padded_numel - a.groups[g].numel)
              .abs().sum().item<double>() == 0);
  }
  const ParamGroup& block = a.groups[a.first_block_group];
  const at::Tensor x = InitGroup(block, 11), z = InitGroup(block, 12);
  CHECK_FALSE(at::equal(x, z));
  CHECK(at::equal(SlotView(x, block.slot("attn_norm")), at::ones({m.hidden})));
  const double std_wq = SlotView(x, block.slot("wq")).std().item<double>();
  CHECK(std_wq == Approx(0.02).epsilon(0.15));
  // Two blocks differ (names seed the generators).
  CHECK_FALSE(at::equal(SlotView(x, block.slot("wq")),
                        SlotView(InitGroup(a.groups[a.first_block_group + 1], 11),
                                 a.groups[a.first_block_group + 1].slot("wq"))));
}

}  // namespace
}  // namespace meshplan
