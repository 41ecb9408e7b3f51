// FLOPs per step (docs/cost_model.md section 4) and the utilisation figures.
#include <catch2/catch.hpp>

#include "planner/cost/flops.h"
#include "planner/cost/param_count.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::Spec7b;
using testing::SpecLlama;
using testing::Training;

TEST_CASE("P_dense leaves out the embedding lookup but keeps the lm_head", "[planner][flops]") {
  // Untied: P minus the V*E embedding table.
  const ModelSpec m = Spec7b();
  CHECK(DenseParams(m) == 7'257'206'784 - 50257LL * 4096);
  // Tied: the one V*E matrix is the lm_head's, so P_dense == P.
  const ModelSpec tied = SpecLlama(1024, 8, 16, 1536, true);
  CHECK(DenseParams(tied) == 194'103'296);
  // Matmul weights of a Llama block: 4E^2 + 3EF (the norms are not matmuls).
  CHECK(BlockMatmulParams(m) == 4 * 4096LL * 4096 + 3 * 4096LL * 6144);
  CHECK(BlockParams(m) - BlockMatmulParams(m) == 2 * 4096);
}

TEST_CASE("model FLOPs are 6*P_dense per token plus 12*L*E*S attention", "[planner][flops]") {
  const ModelSpec m = Spec7b();
  const TrainingSpec t = Training(8, 2048);
  const double tokens = 8.0 * 2048;
  const double dense = 7'257'206'784.0 - 50257.0 * 4096;
  const StepFlops f = StepFlopsOf(m, t, Recompute::kNone);
  CHECK(f.model_no_attention == Approx(6 * dense * tokens).epsilon(1e-12));
  CHECK(f.model == Approx(tokens * (6 * dense + 12.0 * 48 * 4096 * 2048)).epsilon(1e-12));
  CHECK(f.recompute == 0);
  CHECK(f.hardware == f.model);
}

TEST_CASE("hardware FLOPs add the replayed forward", "[planner][flops]") {
  const ModelSpec m = Spec7b();
  const TrainingSpec t = Training(8, 2048);
  const double tokens = 8.0 * 2048;
  const double attention_fwd = tokens * 4.0 * 48 * 4096 * 2048;
  const StepFlops selective = StepFlopsOf(m, t, Recompute::kSelective);
  CHECK(selective.recompute == Approx(attention_fwd).epsilon(1e-12));
  const StepFlops full = StepFlopsOf(m, t, Recompute::kFull);
  CHECK(full.recompute ==
        Approx(tokens * 2.0 * 48 * static_cast<double>(BlockParams(m)) + attention_fwd).epsilon(1e-12));
  // One more forward of the blocks: a bit under 4/3 of the model FLOPs (the lm_head is not replayed).
  CHECK(full.hardware / full.model > 1.30);
  CHECK(full.hardware / full.model < 4.0 / 3.0);
  CHECK(full.hardware == full.model + full.recompute);
}

TEST_CASE("utilisation is flops / (gpus * peak * seconds)", "[planner][flops]") {
  CHECK(Utilization(4e15, 8, 1e15, 1.0) == Approx(0.5));
  CHECK(Utilization(4e15, 8, 1e15, 2.0) == Approx(0.25));
  CHECK(Utilization(4e15, 0, 1e15, 1.0) == 0);
  CHECK(Utilization(4e15, 8, 1e15, 0.0) == 0);
}

}  // namespace
}  // namespace meshplan
