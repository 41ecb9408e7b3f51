// Context parallelism: the zigzag split, ring attention (forward and backward) on cp = 2 and
// 4 ranks against the single-rank attention ops on the full sequence, and whole training
// steps with cp = 2, 4 and dp = 2 x cp = 2 (ZeRO 1 and 2) against the single-process run.
// Ranks are threads, each with its own Gloo communicators over one HashStore.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <cmath>
#include <string>
#include <vector>

#include "executor/data.h"
#include "executor/model/ops.h"
#include "executor/parallel/context_split.h"
#include "executor/parallel/ring_attention.h"
#include "executor/trainer.h"
#include "tests/executor/test_training.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

using test::RequireClose;
using test::TinySpec;

TEST_CASE("zigzag split: rank r holds chunks r and 2cp-1-r", "[executor][cp]") {
  CHECK(at::equal(LocalPositions(8, 1, 0), at::arange(8, at::kLong)));
  const std::vector<int64_t> r0{0, 1, 14, 15}, r1{2, 3, 12, 13}, r3{6, 7, 8, 9};
  CHECK(at::equal(LocalPositions(16, 4, 0), at::tensor(r0)));
  CHECK(at::equal(LocalPositions(16, 4, 1), at::tensor(r1)));
  CHECK(at::equal(LocalPositions(16, 4, 3), at::tensor(r3)));
  CHECK_THROWS_AS(LocalPositions(12, 4, 0), std::invalid_argument);  // 12 % 8 != 0
  CHECK_THROWS_AS(LocalPositions(16, 4, 4), std::invalid_argument);
  // Selecting tokens: every position exactly once over the ranks.
  const at::Tensor full = at::arange(32, at::kLong).view({2, 16});
  std::vector<at::Tensor> parts;
  for (int r = 0; r < 4; ++r) parts.push_back(SelectLocalTokens(full, 4, r));
  CHECK(at::equal(std::get<0>(at::cat(parts, 1).sort(1)), full));
  CHECK(at::equal(parts[1], full.index_select(1, LocalPositions(16, 4, 1))));
}

// ---------------------------------------------------------------------------------------
// Ring attention vs the single-rank attention core

struct AttentionCase {
  int64_t cp;
  int64_t kv_heads;  // H = 4: 2 is GQA (G = 2), 4 is MHA
};

TEST_CASE("ring attention forward and backward equal full-sequence attention",
          "[executor][cp][ops]") {
  const AttentionCase c = GENERATE(AttentionCase{1, 2}, AttentionCase{2, 2}, AttentionCase{2, 4},
                                   AttentionCase{4, 2}, AttentionCase{4, 4});
  INFO("cp=" << c.cp << " kv_heads=" << c.kv_heads);
  const int64_t B = 2, H = 4, K = c.kv_heads, S = 16, D = 8;
  at::manual_seed(7);
  const at::Tensor q = at::randn({B, H, S, D}), k = at::randn({B, K, S, D});
  const at::Tensor v = at::randn({B, K, S, D}), dout = at::randn({B, H, S, D});
  const at::Tensor mask = at::ones({S, S}, at::kBool).triu_(1);
  at::Tensor probs;
  const at::Tensor want_out = AttentionForward(q, k, v, mask, &probs);
  // lse from the scores (GQA: query head h uses kv head h / G).
  const at::Tensor k_rep = k.repeat_interleave(H / K, 1);
  const at::Tensor want_lse = (at::matmul(q, k_rep.transpose(-2, -1)) / std::sqrt(static_cast<double>(D)))
                                  .masked_fill(mask, -INFINITY)
                                  .logsumexp(-1);
  const AttentionGrads want = AttentionBackward(dout, q, k, v, std::move(probs));

  struct Got {
    at::Tensor out, lse, dq, dk, dv;
  };
  std::vector<Got> got(static_cast<size_t>(c.cp));
  ParallelPlan plan;
  plan.cp = c.cp;
  test::OnMesh(plan, [&](const DeviceMesh& mesh) {
    Communicator& cp = mesh.comm(MeshDim::kCp);
    const at::Tensor pos = LocalPositions(S, c.cp, cp.rank());
    const auto local = [&](const at::Tensor& t) { return t.index_select(2, pos).contiguous(); };
    const int64_t Sc = S / c.cp;
    const at::Tensor local_mask = at::ones({Sc, Sc}, at::kBool).triu_(1);
    Got& g = got[static_cast<size_t>(cp.rank())];
    const at::Tensor lq = local(q), lk = local(k), lv = local(v);
    g.out = RingAttentionForward(lq, lk, lv, local_mask, cp, &g.lse);
    const AttentionGrads grads =
        RingAttentionBackward(local(dout), lq, lk, lv, g.out, g.lse, local_mask, cp);
    g.dq = grads.dq;
    g.dk = grads.dk;
    g.dv = grads.dv;
  });
  for (int64_t r = 0; r < c.cp; ++r) {
    const at::Tensor pos = LocalPositions(S, c.cp, r);
    const auto local = [&](const at::Tensor& t) { return t.index_select(2, pos); };
    const Got& g = got[static_cast<size_t>(r)];
    const std::string rank = "rank " + std::to_string(r);
    REQUIRE(g.out.defined());
    RequireClose(g.out, local(want_out), 1e-5, 1e-6, rank + " out");
    RequireClose(g.lse, local(want_lse), 1e-5, 1e-6, rank + " lse");
    RequireClose(g.dq, local(want.dq), 1e-5, 1e-6, rank + " dq");
    RequireClose(g.dk, local(want.dk), 1e-5, 1e-6, rank + " dk");
    RequireClose(g.dv, local(want.dv), 1e-5, 1e-6, rank + " dv");
  }
}

// ---------------------------------------------------------------------------------------
// Training

using test::Trained;

// 2*cp divides the sequence for cp = 2 and 4.
TrainingSpec Training(int64_t global_batch) { return test::TinyTraining(global_batch, 16); }

Trained Train(const ModelSpec& m, const TrainingSpec& training, const DeviceMesh& mesh) {
  return test::TrainSteps(m, training, mesh);
}

struct CpCase {
  int64_t dp, cp;
  int zero;
  int64_t mbs, global_batch;
  Recompute recompute;
  bool tied;
};

std::string Describe(const CpCase& c) {
  return "dp=" + std::to_string(c.dp) + " cp=" + std::to_string(c.cp) +
         " zero=" + std::to_string(c.zero) + " mbs=" + std::to_string(c.mbs) +
         " G=" + std::to_string(c.global_batch) +
         (c.recompute == Recompute::kNone   ? " none"
          : c.recompute == Recompute::kFull ? " full"
                                            : " selective") +
         (c.tied ? " tied" : " untied");
}

TEST_CASE("context parallel training equals the single-process run", "[executor][cp][trainer]") {
  const CpCase c = GENERATE(
      CpCase{1, 2, 0, 2, 4, Recompute::kNone, false}, CpCase{1, 2, 0, 1, 2, Recompute::kFull, true},
      CpCase{1, 2, 0, 2, 2, Recompute::kSelective, false},
      CpCase{1, 4, 0, 1, 2, Recompute::kNone, true}, CpCase{1, 4, 0, 2, 2, Recompute::kFull, false},
      CpCase{2, 2, 1, 1, 4, Recompute::kNone, false}, CpCase{2, 2, 2, 1, 4, Recompute::kFull, true},
      // ZeRO-3 over cp alone: the prefetched all-gathers share the cp communicator with
      // ring attention's sends and receives.
      CpCase{1, 2, 3, 1, 2, Recompute::kNone, false});
  INFO(Describe(c));
  const ModelSpec m = TinySpec(c.tied, 2);
  const TrainingSpec training = Training(c.global_batch);
  ParallelPlan plan;
  plan.dp = c.dp;
  plan.cp = c.cp;
  plan.zero_stage = c.zero;
  plan.micro_batch = c.mbs;
  plan.recompute = c.recompute;
  ParallelPlan single = plan;
  single.dp = single.cp = 1;
  single.zero_stage = 0;
  single.recompute = Recompute::kNone;
  single.micro_batch = c.mbs * c.dp;  // the same global batch, one process
  const Trained want = Train(m, training, DeviceMesh(single, 0, nullptr));
  CHECK(want.losses.back() < want.losses.front());

  std::vector<Trained> got(static_cast<size_t>(c.dp * c.cp));
  test::OnMesh(plan, [&](const DeviceMesh& mesh) {
    got[static_cast<size_t>(mesh.world_rank())] = Train(m, training, mesh);
  });
  const double step_tol = 1e-3 * training.learning_rate;  // as tests/executor/trainer_test.cc
  for (size_t r = 0; r < got.size(); ++r) {
    const std::string what = Describe(c) + ", rank " + std::to_string(r);
    REQUIRE(got[r].losses.size() == want.losses.size());
    for (size_t s = 0; s < want.losses.size(); ++s) {
      INFO(what << ": loss of step " << s + 1);
      CHECK(got[r].losses[s] == Approx(want.losses[s]).epsilon(1e-5).margin(step_tol));
    }
    REQUIRE(got[r].params.size() == want.params.size());
    for (size_t g = 0; g < want.params.size(); ++g)
      RequireClose(got[r].params[g], want.params[g], 1e-5, step_tol,
                   what + ": params of group " + std::to_string(g));
  }
}

}  // namespace
}  // namespace meshplan
