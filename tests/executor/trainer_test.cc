// Whole training steps: recompute modes and gradient accumulation on one process, and
// DP / ZeRO-1/2/3 on 2 and 4 ranks (threads, each with its own Gloo communicator over one
// HashStore) against the single-process run of the same global batch.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <string>
#include <vector>

#include "executor/data.h"
#include "executor/trainer.h"
#include "tests/executor/test_training.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

using test::RequireClose;
using test::TinySpec;

using test::Trained;

TrainingSpec Training(int64_t global_batch) { return test::TinyTraining(global_batch, 8); }

Trained TrainSingle(const ModelSpec& m, const TrainingSpec& training, ParallelPlan plan, int steps) {
  plan.dp = 1;
  const DeviceMesh one(plan, 0, nullptr);
  return test::TrainSteps(m, training, one, steps);
}

void RequireSameRun(const Trained& got, const Trained& want, double rtol, double atol,
                    const std::string& what) {
  REQUIRE(got.losses.size() == want.losses.size());
  for (size_t s = 0; s < got.losses.size(); ++s) {
    INFO(what << ": loss of step " << s + 1);
    CHECK(got.losses[s] == Approx(want.losses[s]).epsilon(rtol).margin(atol));
  }
  REQUIRE(got.params.size() == want.params.size());
  for (size_t g = 0; g < got.params.size(); ++g)
    RequireClose(got.params[g], want.params[g], rtol, atol, what + ": params of group " + std::to_string(g));
}

ParallelPlan Plan(int64_t dp, int zero, int64_t mbs, Recompute recompute) {
  ParallelPlan p;
  p.dp = dp;
  p.zero_stage = zero;
  p.micro_batch = mbs;
  p.recompute = recompute;
  return p;
}

TEST_CASE("one process: recompute none, selective and full train identically",
          "[executor][trainer]") {
  const ModelSpec m = TinySpec(false, 2);
  const Trained none = TrainSingle(m, Training(4), Plan(1, 0, 2, Recompute::kNone), 3);
  CHECK(none.losses.back() < none.losses.front());  // it learns
  for (Recompute r : {Recompute::kSelective, Recompute::kFull})
    RequireSameRun(TrainSingle(m, Training(4), Plan(1, 0, 2, r), 3), none, 0, 0,
                   std::string("recompute ") + (r == Recompute::kFull ? "full" : "selective"));
}

TEST_CASE("one process: 4 micro-batches of 1 equal one batch of 4", "[executor][trainer]") {
  const ModelSpec m = TinySpec(true, 2);
  const Trained one = TrainSingle(m, Training(4), Plan(1, 0, 4, Recompute::kNone), 3);
  const Trained four = TrainSingle(m, Training(4), Plan(1, 0, 1, Recompute::kNone), 3);
  RequireSameRun(four, one, 1e-5, 1e-6, "mbs=1 x 4 vs mbs=4 x 1");
}

TEST_CASE("one process: the MoE aux loss coefficient is the training spec's",
          "[executor][trainer][moe]") {
  ModelSpec m = TinySpec(false, 2);
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 8;
  TrainingSpec plain = Training(4), weighted = Training(4);
  plain.moe_aux_loss_coef = 0;
  weighted.moe_aux_loss_coef = 1;
  const Trained without = TrainSingle(m, plain, Plan(1, 0, 2, Recompute::kNone), 2);
  RequireSameRun(TrainSingle(m, plain, Plan(1, 0, 2, Recompute::kNone), 2), without, 0, 0,
                 "the same coefficient twice");
  const Trained with = TrainSingle(m, weighted, Plan(1, 0, 2, Recompute::kNone), 2);
  // The aux loss adds gradients only (the logged loss is the language model's): step 1's
  // losses agree, the updated routers do not.
  CHECK(with.losses.front() == without.losses.front());
  const auto router_moved = [&](const Trained& a, const Trained& b) {
    for (size_t g = 0; g < a.params.size(); ++g)
      if (!at::equal(a.params[g], b.params[g])) return true;
    return false;
  };
  CHECK(router_moved(with, without));
}

// ---------------------------------------------------------------------------------------
// Data parallel

struct DpCase {
  int64_t dp;
  int zero;
  int64_t mbs;
  int64_t global_batch;
  Recompute recompute;
  bool tied;
};

std::string Describe(const DpCase& c) {
  return "dp=" + std::to_string(c.dp) + " zero=" + std::to_string(c.zero) +
         " mbs=" + std::to_string(c.mbs) + " G=" + std::to_string(c.global_batch) +
         " micro-batches=" + std::to_string(c.global_batch / (c.dp * c.mbs)) +
         (c.recompute == Recompute::kNone ? " none" : c.recompute == Recompute::kFull ? " full" : " selective") +
         (c.tied ? " tied" : "");
}

TEST_CASE("DP and ZeRO-1/2/3 on 2 and 4 ranks equal the single-process run",
          "[executor][trainer][dp]") {
  const DpCase c = GENERATE(
      // no accumulation, with accumulation, with recompute, on 2 and 4 ranks, each stage
      DpCase{2, 0, 2, 4, Recompute::kNone, false}, DpCase{2, 0, 1, 4, Recompute::kFull, false},
      DpCase{4, 0, 1, 8, Recompute::kSelective, false}, DpCase{4, 0, 2, 8, Recompute::kNone, true},
      DpCase{2, 1, 2, 4, Recompute::kNone, false}, DpCase{2, 1, 1, 4, Recompute::kSelective, false},
      DpCase{4, 1, 1, 8, Recompute::kFull, false}, DpCase{4, 1, 2, 8, Recompute::kNone, true},
      DpCase{2, 2, 2, 4, Recompute::kFull, false}, DpCase{2, 2, 1, 4, Recompute::kNone, true},
      DpCase{4, 2, 1, 8, Recompute::kNone, false}, DpCase{4, 2, 2, 8, Recompute::kSelective, false},
      DpCase{2, 3, 2, 4, Recompute::kSelective, false}, DpCase{2, 3, 1, 4, Recompute::kNone, true},
      DpCase{4, 3, 1, 8, Recompute::kFull, true}, DpCase{4, 3, 2, 8, Recompute::kNone, false});
  INFO(Describe(c));
  const ModelSpec m = TinySpec(c.tied, 2);
  const TrainingSpec training = Training(c.global_batch);
  const ParallelPlan plan = Plan(c.dp, c.zero, c.mbs, c.recompute);
  const Trained want = TrainSingle(m, training, plan, 3);

  std::vector<Trained> got(static_cast<size_t>(c.dp));
  test::OnMesh(plan, [&](const DeviceMesh& mesh) {
    got[static_cast<size_t>(mesh.world_rank())] = test::TrainSteps(m, training, mesh, 3);
  });
  // Only the summation order differs from the single process (over ranks instead of over
  // one batch), so losses agree to fp32 rounding. Parameters get atol = 1e-3 of one AdamW
  // step (lr): Adam divides by |g|, so an element whose gradient is ~0 turns its rounding
  // (1e-7 relative) into up to ~1e-4 of a step; every other element agrees to 1e-5.
  const double step_tol = 1e-3 * training.learning_rate;
  for (int64_t r = 0; r < c.dp; ++r)
    RequireSameRun(got[static_cast<size_t>(r)], want, 1e-5, step_tol,
                   Describe(c) + ", rank " + std::to_string(r));
}

}  // namespace
}  // namespace meshplan
