// Tensor and sequence parallelism (Megatron) on 2 and 4 ranks (threads with Gloo) against
// the single-process run of the same global batch: losses and every updated weight, the
// tp shards reassembled into full weights (PlaceTpShard). Also the vocabulary-parallel
// embedding and cross-entropy, and the chunk-major RoPE / head split, against the
// single-rank ops.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "executor/data.h"
#include "executor/model/ops.h"
#include "executor/parallel/vocab_parallel_ops.h"
#include "executor/run_rank.h"
#include "executor/trainer.h"
#include "tests/executor/test_training.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

using test::RequireClose;
using test::TinySpec;

// ---------------------------------------------------------------------------------------
// Ops

// The tp Communicator of each of t threads.
void OnTpGroup(int64_t t, const std::function<void(Communicator&)>& body) {
  ParallelPlan plan;
  plan.tp = t;
  test::OnMesh(plan, [&](const DeviceMesh& mesh) { body(mesh.comm(MeshDim::kTp)); });
}

TEST_CASE("vocab-parallel cross-entropy equals the full cross-entropy", "[executor][tp]") {
  const int64_t N = 12, V = 16;
  const at::Tensor logits = at::randn({N, V}) * 3.0;
  const at::Tensor targets = at::randint(0, V, {N}, at::kLong);
  at::Tensor probs = logits.clone();
  const double want_loss = CrossEntropyForward(probs, targets).item<double>();
  const at::Tensor want_grad = CrossEntropyBackward(probs, targets, 0.5);
  for (int64_t t : {2, 4}) {
    std::vector<double> loss(static_cast<size_t>(t));
    std::vector<at::Tensor> grad(static_cast<size_t>(t));
    OnTpGroup(t, [&](Communicator& tp) {
      const int64_t r = tp.rank(), Vl = V / t;
      at::Tensor local = logits.narrow(1, r * Vl, Vl).contiguous();
      loss[static_cast<size_t>(r)] =
          VocabParallelCrossEntropyForward(local, targets, r * Vl, tp).item<double>();
      grad[static_cast<size_t>(r)] = VocabParallelCrossEntropyBackward(local, targets, r * Vl, 0.5);
    });
    for (int64_t r = 0; r < t; ++r) {
      INFO("tp=" << t << " rank " << r);
      CHECK(loss[static_cast<size_t>(r)] == Approx(want_loss).epsilon(1e-6));
      RequireClose(grad[static_cast<size_t>(r)], want_grad.narrow(1, r * (V / t), V / t), 1e-5,
                   1e-7, "dlogits");
    }
  }
}

TEST_CASE("vocab-parallel embedding equals the full embedding", "[executor][tp]") {
  const int64_t V = 16, E = 6;
  const at::Tensor ids = at::randint(0, V, {3, 5}, at::kLong);
  const at::Tensor wte = at::randn({V, E}), dx = at::randn({3, 5, E});
  const at::Tensor want = EmbeddingForward(ids, wte);
  at::Tensor want_dwte = at::zeros({V, E});
  EmbeddingBackward(dx, ids, want_dwte);
  const int64_t t = 4, Vl = V / t;
  std::vector<at::Tensor> x(t), dwte(t);
  OnTpGroup(t, [&](Communicator& tp) {
    const int64_t r = tp.rank();
    at::Tensor part = VocabParallelEmbeddingForward(ids, wte.narrow(0, r * Vl, Vl), r * Vl);
    tp.AllReduceSum(part);
    x[static_cast<size_t>(r)] = part;
    dwte[static_cast<size_t>(r)] = at::zeros({Vl, E});
    VocabParallelEmbeddingBackward(dx, ids, r * Vl, dwte[static_cast<size_t>(r)]);
  });
  for (int64_t r = 0; r < t; ++r) {
    RequireClose(x[static_cast<size_t>(r)], want, 0, 0, "x of rank " + std::to_string(r));
    RequireClose(dwte[static_cast<size_t>(r)], want_dwte.narrow(0, r * Vl, Vl), 1e-6, 1e-7,
                 "dwte of rank " + std::to_string(r));
  }
}

TEST_CASE("RoPE and head split / merge read and write chunk-major token order",
          "[executor][tp]") {
  const int64_t B = 2, S = 8, n = 3, D = 4, c = 4;
  const at::Tensor x = at::randn({B, S, n * D});
  const at::Tensor angles = at::outer(at::arange(S, at::kFloat), at::rand({D / 2}));
  const at::Tensor cos = angles.cos(), sin = angles.sin();
  // (B,S,nD) -> chunk-major (c,B,S/c,nD)
  const auto chunked = [&](const at::Tensor& t) {
    return t.view({B, c, S / c, -1}).transpose(0, 1).contiguous();
  };
  RequireClose(RopeForward(chunked(x), n, cos, sin, c), RopeForward(x, n, cos, sin), 0, 0, "rope");
  RequireClose(SplitHeads(chunked(x), n, c), SplitHeads(x, n), 0, 0, "split");
  const at::Tensor heads = at::randn({B, n, S, D});
  RequireClose(MergeHeads(heads, c), chunked(MergeHeads(heads)), 0, 0, "merge");
  RequireClose(RopeBackward(heads, cos, sin, c), chunked(RopeBackward(heads, cos, sin)), 0, 0,
               "rope backward");
}

// ---------------------------------------------------------------------------------------
// Whole training steps

struct TpCase {
  int64_t tp;
  bool sp;
  int64_t kv_heads;
  bool tied;
  Recompute recompute;
  int64_t mbs;
  int64_t global_batch;
  int64_t dp = 1;
  int zero = 0;
  int64_t head_dim = 0;  // ModelSpec::attention_head_dim (0: E / H)
};

std::string Describe(const TpCase& c) {
  return "tp=" + std::to_string(c.tp) + (c.sp ? " sp" : "") + " dp=" + std::to_string(c.dp) +
         " zero=" + std::to_string(c.zero) + " K=" + std::to_string(c.kv_heads) +
         (c.tied ? " tied" : " untied") + " mbs=" + std::to_string(c.mbs) +
         " G=" + std::to_string(c.global_batch) +
         (c.recompute == Recompute::kNone ? " none"
          : c.recompute == Recompute::kFull ? " full" : " selective") +
         (c.head_dim > 0 ? " D=" + std::to_string(c.head_dim) : "");
}

TrainingSpec Training(int64_t global_batch) { return test::TinyTraining(global_batch, 8); }

using test::Trained;

Trained Train(const ModelSpec& m, const TrainingSpec& training, const DeviceMesh& mesh) {
  return test::TrainSteps(m, training, mesh);
}

// The full weights of group g from the t tp ranks' shards.
at::Tensor Reassemble(const std::vector<const Trained*>& tp_ranks, size_t g, const ParamGroup& full) {
  at::Tensor out = at::full({full.numel}, std::nan(""), at::kFloat);
  for (const Trained* r : tp_ranks) PlaceTpShard(r->layout.groups[g], r->params[g], full, out);
  return out;
}

TEST_CASE("tensor and sequence parallelism equal the single-process run", "[executor][tp]") {
  const TpCase c = GENERATE(
      TpCase{2, false, 2, false, Recompute::kNone, 2, 4},       // GQA (Kl=1, G=2), 2 micro-batches
      TpCase{2, true, 2, true, Recompute::kSelective, 2, 2},    // GQA, sp, tied
      TpCase{2, true, 4, false, Recompute::kFull, 1, 2},        // sp, full recompute, 2 mbs
      TpCase{4, false, 4, true, Recompute::kFull, 1, 2},        // tied, 2 micro-batches
      TpCase{4, true, 4, false, Recompute::kNone, 1, 2},        // sp, 2 micro-batches
      TpCase{4, true, 4, true, Recompute::kSelective, 2, 2},
      TpCase{2, false, 2, false, Recompute::kSelective, 1, 4, 2, 1},  // dp=2 x tp=2, ZeRO-1
      TpCase{2, true, 2, true, Recompute::kNone, 1, 4, 2, 1},         // dp=2 x tp=2 sp, ZeRO-1
      TpCase{2, true, 2, false, Recompute::kSelective, 1, 2, 1, 0, 8});  // D=8 on E/H=4 (Qwen3-like)
  INFO(Describe(c));
  ModelSpec m = TinySpec(c.tied, c.kv_heads);
  m.attention_head_dim = c.head_dim;
  const TrainingSpec training = Training(c.global_batch);
  ParallelPlan plan;
  plan.tp = c.tp;
  plan.dp = c.dp;
  plan.sequence_parallel = c.sp;
  plan.zero_stage = c.zero;
  plan.micro_batch = c.mbs;
  plan.recompute = c.recompute;

  ParallelPlan single_plan = plan;
  single_plan.tp = single_plan.dp = 1;
  single_plan.sequence_parallel = false;
  single_plan.zero_stage = 0;
  const Trained want = Train(m, training, DeviceMesh(single_plan, 0, nullptr));

  std::vector<Trained> got(static_cast<size_t>(plan.world_size()));
  test::OnMesh(plan, [&](const DeviceMesh& mesh) {
    got[static_cast<size_t>(mesh.world_rank())] = Train(m, training, mesh);
  });

  const double step_tol = 1e-3 * training.learning_rate;  // as tests/executor/trainer_test.cc
  for (size_t r = 0; r < got.size(); ++r)
    for (size_t s = 0; s < want.losses.size(); ++s) {
      INFO("rank " << r << " loss of step " << s + 1);
      CHECK(got[r].losses[s] == Approx(want.losses[s]).epsilon(1e-5));
    }
  for (int64_t d = 0; d < c.dp; ++d) {
    std::vector<const Trained*> tp_ranks(static_cast<size_t>(c.tp));
    for (size_t r = 0; r < got.size(); ++r)
      if (got[r].coords[MeshDim::kDp] == d)
        tp_ranks[static_cast<size_t>(got[r].coords[MeshDim::kTp])] = &got[r];
    for (size_t g = 0; g < want.params.size(); ++g) {
      const std::string what = Describe(c) + ", dp " + std::to_string(d) + ", group " +
                               want.layout.groups[g].name;
      RequireClose(Reassemble(tp_ranks, g, want.layout.groups[g]), want.params[g], 1e-5, step_tol,
                   what);
      // Replicated weights (norms) are the same on every tp rank.
      for (const ParamSlot& slot : tp_ranks[0]->layout.groups[g].slots) {
        if (!slot.splits.empty()) continue;
        for (const Trained* r : tp_ranks)
          RequireClose(SlotView(r->params[g], slot), SlotView(tp_ranks[0]->params[g], slot), 0, 0,
                       what + " replicated " + slot.name);
      }
    }
  }
}

TEST_CASE("tp layout: shard shapes, and init slices of the single-process values",
          "[executor][tp]") {
  const ModelSpec m = TinySpec(false, 2);
  const ParamLayout full = BuildParamLayout(m, 1);
  const ParamLayout shard = BuildParamLayout(m, 1, StageRange{}, TpShard{2, 1});
  const ParamGroup& b = shard.groups[static_cast<size_t>(shard.first_block_group)];
  CHECK(b.slot("wq").shape == std::vector<int64_t>{8, 16});   // H/t * D rows
  CHECK(b.slot("wk").shape == std::vector<int64_t>{4, 16});   // K/t * D rows
  CHECK(b.slot("wo").shape == std::vector<int64_t>{16, 8});
  CHECK(b.slot("w_down").shape == std::vector<int64_t>{16, 12});
  CHECK(b.slot("ffn_norm").shape == std::vector<int64_t>{16});
  CHECK(shard.groups[0].slot("wte").shape == std::vector<int64_t>{16, 16});
  for (size_t g = 0; g < full.groups.size(); ++g) {
    const at::Tensor want = InitGroup(full.groups[g], 9).narrow(0, 0, full.groups[g].numel);
    std::vector<Trained> ranks(2);
    std::vector<const Trained*> ptrs;
    for (int64_t r = 0; r < 2; ++r) {
      ranks[static_cast<size_t>(r)].layout = BuildParamLayout(m, 1, StageRange{}, TpShard{2, r});
      ranks[static_cast<size_t>(r)].params.resize(full.groups.size());
      ranks[static_cast<size_t>(r)].params[g] =
          InitGroup(ranks[static_cast<size_t>(r)].layout.groups[g], 9);
      ptrs.push_back(&ranks[static_cast<size_t>(r)]);
    }
    RequireClose(Reassemble(ptrs, g, full.groups[g]), want, 0, 0, full.groups[g].name);
  }
  CHECK_THROWS_AS(BuildParamLayout(m, 1, StageRange{}, TpShard{3, 0}), std::invalid_argument);
}

TEST_CASE("meshplan run refuses tp not dividing the vocabulary, with the reason",
          "[executor][tp]") {
  PlanFile pf;
  pf.model = TinySpec(false, 2);
  pf.training = Training(4);
  pf.plan.tp = 2;
  CHECK(ExecutorLimitations(pf).empty());
  pf.model.vocab_size = 33;
  const std::vector<std::string> reasons = ExecutorLimitations(pf);
  REQUIRE(reasons.size() == 1);
  CHECK_THAT(reasons[0], Catch::Contains("tp=2") && Catch::Contains("model.vocab_size=33"));
}

}  // namespace
}  // namespace meshplan
