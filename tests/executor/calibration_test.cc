// The calibration run on a tiny model: which samples it takes, that each carries the work
// the cost model counts for it, that the fit and the spec come out sane, and its errors.
// No timing is asserted here (calibration_loop_test.cc checks step times).
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <torch/cuda.h>

#include <map>
#include <string>

#include "executor/calibration/calibrate.h"
#include "planner/config/config_loader.h"
#include "planner/cost/step_work.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

// tiny-llama (V=8192 E=256 L=4 H=8 K=4 F=688) at 128 and 512 tokens: small, yet with enough
// attention work that timing noise cannot hide it from the fit (at 32 tokens a noisy run
// once left the attention rate undetermined).
CalibrationOptions TinyOptions() {
  CalibrationOptions o;
  o.model = LoadModel("tiny-llama");
  o.shapes = {{2, 64}, {2, 256}};
  o.quick = true;
  o.threads = 1;
  o.base.name = "cpu-tiny";
  return o;
}

// [timing]: these run a real calibration whose least-squares fit depends on timing noise,
// so CTest runs them alone (tests/CMakeLists.txt, RUN_SERIAL). By hand:
//   build/tests/executor_tests "[timing]"
TEST_CASE("calibration: samples carry the cost model's work", "[executor][calibration][timing]") {
  const CalibrationOptions options = TinyOptions();
  const CalibrationResult r = RunCalibration(options);
  std::map<std::string, const CalibrationSample*> by_name;
  for (const CalibrationSample& s : r.samples) by_name[s.name] = &s;
  // 5 weight shapes (q/o, k/v with GQA, up/gate, down, lm_head) x fwd/bwd, attention,
  // 6 memory composites, the block and head segments per shape, and the optimizer.
  CHECK(r.samples.size() == 2 * (10 + 1 + 6 + 4) + 1);
  REQUIRE(by_name.count("linear_fwd up/gate N=128"));
  CHECK(by_name["linear_fwd up/gate N=128"]->work.matmul_flops == 2.0 * 128 * 256 * 688);
  CHECK(by_name["linear_fwd k/v N=512"]->work.matmul_flops == 2.0 * 512 * 256 * 128);
  CHECK(by_name["linear_bwd lm_head N=512"]->work.matmul_flops == 4.0 * 512 * 256 * 8192);
  CHECK(by_name["linear_bwd lm_head N=512"]->work.kernels == 2);

  // Attention and the memory composites: exactly what BuildStepWork counts.
  TrainingSpec training;
  training.global_batch = 2;
  training.seq_len = 64;
  training.precision = Precision::kFp32;
  ParallelPlan plan;
  plan.micro_batch = 2;
  const StepWork w = BuildStepWork(options.model, training, plan);
  REQUIRE(by_name.count("attention_fwd_bwd 2x64"));
  CHECK(by_name["attention_fwd_bwd 2x64"]->work.attention_flops ==
        Approx(w.block.forward.attention_flops + w.block.backward_input.attention_flops));
  // The attention core (its softmax traffic included) is benchmarked on its own.
  CHECK(by_name["attention_fwd_bwd 2x64"]->work.memory_bytes ==
        Approx(w.block.attention_forward.memory_bytes + w.block.attention_backward.memory_bytes));
  CHECK(by_name["block_memory_fwd 2x64"]->work.memory_bytes ==
        w.block.forward.memory_bytes - w.block.attention_forward.memory_bytes);
  CHECK(by_name["block_memory_bwd 2x64"]->work.memory_bytes ==
        w.block.backward_input.memory_bytes - w.block.attention_backward.memory_bytes);
  // The executor's launches (planner/cost/block_work.cc BlockCompute): 2 RMSNorms of 7, RoPE on
  // q and k 4 each, v's head split, the naive core's output merge, 2 residuals, SwiGLU 2.
  CHECK(by_name["block_memory_fwd 2x64"]->work.kernels == 2 * 7 + 2 * 4 + 1 + 1 + 2 + 2);
  CHECK(by_name["head_memory_fwd 2x64"]->work.memory_bytes == w.head.forward.memory_bytes);
  CHECK(by_name["embedding_bwd 2x64"]->work.memory_bytes == w.embedding.backward_weight.memory_bytes);
  CHECK(by_name["optimizer_step"]->work.memory_bytes ==
        Approx(OptimizerWork(w, PartsOfStage(w, 0)).memory_bytes));

  // Every sample weighted by its share of a step, and timed.
  for (const CalibrationSample& s : r.samples) {
    INFO(s.name);
    CHECK(s.seconds > 0);
    CHECK(s.weight > 0);
  }
  // A block's ops run L = 4 times per micro-batch, the lm_head once: 4x the weight.
  CHECK(by_name["linear_fwd down N=128"]->weight ==
        Approx(4 * by_name["linear_fwd lm_head N=128"]->weight));
  // The segments: a whole block's forward and backward (L per micro-batch) and the head's,
  // with the work of that phase.
  REQUIRE(by_name.count("block_bwd 2x64"));
  CHECK(by_name["block_fwd 2x64"]->work.matmul_flops == w.block.forward.matmul_flops);
  CHECK(by_name["block_bwd 2x64"]->work.matmul_flops ==
        Approx(w.block.backward_input.matmul_flops + w.block.backward_weight.matmul_flops));
  CHECK(by_name["head_fwd 2x64"]->work.memory_bytes == w.head.forward.memory_bytes);
  CHECK(by_name["block_bwd 2x64"]->weight == Approx(4 * by_name["head_bwd 2x64"]->weight));
  // Op samples inside a segment count less than the segment (kDetailWeight).
  CHECK(by_name["linear_fwd down N=128"]->weight < by_name["block_fwd 2x64"]->weight);

  CHECK(r.fit.predicted_s.size() == r.samples.size());
  CHECK(r.fit.rates.matmul_flops_per_s > 0);
  CHECK(r.fit.rates.attention_flops_per_s > 0);
  CHECK(r.fit.rates.memory_Bps > 0);
  CHECK(r.checks.size() == 2);  // the attention forward, smallest and largest shape
  CHECK(r.threads == 1);
}

TEST_CASE("calibration: the CPU profile", "[executor][calibration][timing]") {
  const CalibrationResult r = RunCalibration(TinyOptions());
  const GpuSpec& g = r.gpu;
  CHECK(g.name == "cpu-tiny");
  CHECK_THAT(g.source, Catch::StartsWith("calibrated on " + r.host + " " + r.date +
                                         " by meshplan calibrate (cpu (1 threads), fp32"));
  CHECK(g.memory_bytes > 0);  // the host's RAM
  CHECK(g.peak_flops_fp32 >= r.peaks.flops);
  CHECK(g.peak_flops_bf16 == g.peak_flops_fp32);
  for (double e : {g.matmul_efficiency, g.attention_efficiency, g.memory_bandwidth_efficiency}) {
    CHECK(e > 0);
    CHECK(e <= 1);
  }
  // The spec times the work the way the fit does.
  const ComputeRates rates = RatesFor(g, Precision::kFp32);
  CHECK(rates.matmul_flops_per_s == Approx(r.fit.rates.matmul_flops_per_s));
  CHECK(rates.memory_Bps == Approx(r.fit.rates.memory_Bps));
  CHECK_FALSE(r.network.has_value());
}

TEST_CASE("calibration: bad options", "[executor][calibration]") {
  CalibrationOptions o = TinyOptions();
  o.device = "tpu";
  CHECK_THROWS_WITH(RunCalibration(o), Catch::Contains("expected cpu or cuda"));
  o.device = "cpu";
  o.precision = Precision::kMixed;
  CHECK_THROWS_WITH(RunCalibration(o), Catch::Contains("fp32"));
  o = TinyOptions();
  o.device = "cuda";
  o.precision = Precision::kBf16;
  if (!torch::cuda::is_available())
    CHECK_THROWS_WITH(RunCalibration(o), Catch::Contains("--device cpu"));
  o = TinyOptions();
  o.shapes.clear();
  o.model.max_seq = 32;  // no default CPU shape fits
  CHECK_THROWS_WITH(RunCalibration(o), Catch::Contains("max_seq"));
}

TEST_CASE("calibration: default shapes respect the model's max_seq", "[executor][calibration]") {
  ModelSpec m = test::TinySpec();
  m.max_seq = 128;
  for (const BenchShape& s : DefaultCalibrationShapes("cpu", m, false)) CHECK(s.seq <= 128);
  m.max_seq = 0;
  CHECK(DefaultCalibrationShapes("cuda", m, false).back().seq == 8192);
  CHECK(DefaultCalibrationShapes("cpu", m, true).size() == 4);
}

}  // namespace
}  // namespace meshplan
