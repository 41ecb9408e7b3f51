// The seed memory model: docs/cost_model.md 2(a)-(c) test vectors and its use on a plan.
#include <catch2/catch.hpp>
#include <cmath>

#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"

namespace meshplan {
namespace {

ModelSpec Spec7b() {
  ModelSpec m;
  m.vocab_size = 50257;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 32;
  m.layers = 48;
  m.ffn_hidden = 6144;
  return m;
}

// x rounded to `decimals` places of `unit` (the printed precision of docs/cost_model.md).
double Printed(double x, double unit, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(x / unit * scale) / scale;
}

TEST_CASE("seed 2(a): the 7B model needs 59.77 GB in pure bf16", "[planner][memory][seed]") {
  const ModelSpec m = Spec7b();
  const double bytes = SeedTrainingBytes(m, 7'257'206'784, 1, 256);
  CHECK(Printed(bytes, 1e9, 2) == 59.77);
  // activations = 256*(2*50257 + 48*(6*4096 + 32*256)) = 428,384,768 elements
  CHECK(bytes == (4.0 * 7'257'206'784 + 2.0 * 428'384'768) * 2);
  CHECK(bytes > 46e9);  // does not fit the 46 GB card ...
  ParallelPlan two;
  two.tp = 2;
  TrainingSpec training{.global_batch = 1, .seq_len = 256, .precision = Precision::kBf16};
  // ... and fits once sharded over two (tensor parallel: each rank holds about half).
  CHECK(EstimateMemory(m, training, two, MemoryModel::kSeed).total_bytes < 46e9);
}

TEST_CASE("seed 2(b): ZeRO model states for P = 7.5e9 over 64 GPUs", "[planner][memory][seed]") {
  const double P = 7.5e9;
  CHECK(Printed(SeedZeroStateBytes(P, 0, 64), 1e9, 0) == 120);
  CHECK(Printed(SeedZeroStateBytes(P, 1, 64), 1e9, 1) == 31.4);
  CHECK(Printed(SeedZeroStateBytes(P, 2, 64), 1e9, 1) == 16.6);
  CHECK(Printed(SeedZeroStateBytes(P, 3, 64), 1e9, 1) == 1.9);
  CHECK(SeedZeroStateBytes(P, 0, 64) == 16 * P);
  CHECK(SeedZeroStateBytes(P, 1, 64) == Approx(4 * P + 12 * P / 64).epsilon(1e-15));
  CHECK(SeedZeroStateBytes(P, 2, 64) == Approx(2 * P + 14 * P / 64).epsilon(1e-15));
  CHECK(SeedZeroStateBytes(P, 3, 64) == Approx(16 * P / 64).epsilon(1e-15));
}

TEST_CASE("seed 2(c): DP communication is 2P, ZeRO-3 3P", "[planner][memory][seed]") {
  const double P = 7.5e9;
  CHECK(SeedDpCommElements(P, 0) == 2 * P);
  CHECK(SeedDpCommElements(P, 1) == 2 * P);
  CHECK(SeedDpCommElements(P, 2) == 2 * P);
  CHECK(SeedDpCommElements(P, 3) == 3 * P);
}

TEST_CASE("seed on a plan: bf16 without parallelism is 2(a) exactly", "[planner][memory][seed]") {
  const ModelSpec m = Spec7b();
  const int64_t batch = GENERATE(1, 4);
  const int64_t seq = GENERATE(256, 2048);
  ParallelPlan plan;
  plan.micro_batch = batch;
  TrainingSpec training{.global_batch = batch, .seq_len = seq, .precision = Precision::kBf16};
  const MemoryBreakdown b = EstimateMemory(m, training, plan, MemoryModel::kSeed);
  CHECK(b.total_bytes == Approx(SeedTrainingBytes(m, CountParams(m), batch, seq)).epsilon(1e-15));
  CHECK(b.params_bytes == 2.0 * CountParams(m));
  CHECK(b.grads_bytes == 2.0 * CountParams(m));
  CHECK(b.optimizer_bytes == 4.0 * CountParams(m));
  CHECK(b.peak_phase == "seed");
  CHECK(b.total_bytes ==
        b.params_bytes + b.grads_bytes + b.optimizer_bytes + b.activations_bytes + b.logits_bytes);
}

TEST_CASE("seed on a plan: mixed model states are 2(b) with the rank's parameters",
          "[planner][memory][seed]") {
  const ModelSpec m = Spec7b();
  const int zero = GENERATE(0, 1, 2, 3);
  ParallelPlan plan;
  plan.dp = 8;
  plan.tp = 2;
  plan.pp = 2;
  plan.zero_stage = zero;
  TrainingSpec training{.global_batch = 64, .seq_len = 2048, .precision = Precision::kMixed};
  for (int64_t stage = 0; stage < plan.pp; ++stage) {
    const MemoryBreakdown b = EstimateStageMemory(m, training, plan, MemoryModel::kSeed, stage);
    const double rank_params = double(CountStageParams(m, plan, stage).total());
    CHECK(b.params_bytes + b.grads_bytes + b.optimizer_bytes ==
          Approx(SeedZeroStateBytes(rank_params, zero, plan.dp)).epsilon(1e-15));
  }
}

TEST_CASE("seed on a plan: activations shrink with tp and cp, grow with micro-batches in flight",
          "[planner][memory][seed]") {
  const ModelSpec m = Spec7b();
  TrainingSpec training{.global_batch = 16, .seq_len = 2048, .precision = Precision::kBf16};
  ParallelPlan base;
  base.micro_batch = 2;
  const double a1 = EstimateMemory(m, training, base, MemoryModel::kSeed).activations_bytes;
  ParallelPlan tp = base;
  tp.tp = 4;
  CHECK(EstimateMemory(m, training, tp, MemoryModel::kSeed).activations_bytes ==
        Approx(a1 / 4).epsilon(1e-12));
  ParallelPlan cp = base;
  cp.cp = 2;
  CHECK(EstimateMemory(m, training, cp, MemoryModel::kSeed).activations_bytes ==
        Approx(a1 / 2).epsilon(1e-12));
  // 1F1B over 4 stages: stage 0 holds 4 micro-batches of a quarter of the layers.
  ParallelPlan pp = base;
  pp.pp = 4;
  CHECK(EstimateStageMemory(m, training, pp, MemoryModel::kSeed, 0).activations_bytes ==
        Approx(a1).epsilon(1e-12));
  CHECK(EstimateStageMemory(m, training, pp, MemoryModel::kSeed, 3).activations_bytes ==
        Approx(a1 / 4).epsilon(1e-12));
}

}  // namespace
}  // namespace meshplan
