// fp8 precision (planner/cost/fp8_convention.h): the FP8 GEMM rate, the cast kernels, the
// FP8 weight copies, saved inputs and scaling state, MFU against both peaks, the refusal on
// GPUs without FP8, and FP8 plans ranking above bf16 ones on H100.
#include <catch2/catch.hpp>

#include <cmath>

#include "planner/config/config_loader.h"
#include "planner/cost/compute_work.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/fp8_convention.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"
#include "planner/cost/step_work.h"
#include "planner/hardware_spec.h"
#include "planner/names.h"
#include "planner/search/search.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::Training;

ParallelPlan Plan(const std::string& text) { return ParsePlanString(text, "test"); }

TEST_CASE("fp8 is a precision: its name, and the GPUs that have it", "[planner][fp8]") {
  Precision p = Precision::kBf16;
  REQUIRE(ParsePrecision("fp8", &p));
  CHECK(p == Precision::kFp8);
  CHECK(std::string(ToString(Precision::kFp8)) == "fp8");
  CHECK_THAT(AllowedPrecisions(), Catch::Contains("fp8"));

  for (const char* name : {"h100-sxm", "h100-pcie", "h200", "b200"}) {
    const GpuSpec gpu = LoadCluster(std::string("8x") + name).gpu;
    INFO(name);
    CHECK(gpu.peak_flops_fp8 > gpu.peak_flops_bf16);
    CHECK(WhyPrecisionUnsupported(gpu, Precision::kFp8).empty());
  }
  for (const char* name : {"a100-80gb", "a100-40gb", "a40"}) {
    const GpuSpec gpu = LoadCluster(std::string("8x") + name).gpu;
    INFO(name);
    CHECK_THAT(WhyPrecisionUnsupported(gpu, Precision::kFp8),
               Catch::Contains("fp8") && Catch::Contains(gpu.name) && Catch::Contains("bf16"));
    CHECK(WhyPrecisionUnsupported(gpu, Precision::kBf16).empty());
  }
}

TEST_CASE("fp8 rates: linear GEMMs at the FP8 peak, attention at bf16", "[planner][fp8]") {
  const GpuSpec gpu = LoadCluster("8xH100").gpu;
  const ComputeRates bf16 = RatesFor(gpu, Precision::kBf16);
  const ComputeRates fp8 = RatesFor(gpu, Precision::kFp8);
  CHECK(fp8.fp8_matmul_flops_per_s == Approx(gpu.peak_flops_fp8 * gpu.matmul_efficiency));
  CHECK(fp8.matmul_flops_per_s == bf16.matmul_flops_per_s);
  CHECK(fp8.attention_flops_per_s == bf16.attention_flops_per_s);
  CHECK(bf16.fp8_matmul_flops_per_s == 0);

  // A large, compute-bound GEMM: the FP8 peak is the data sheet's 2x (1978.9 / 989.4 TFLOP/s),
  // but FP8 tiles pay a deeper k overhead (configs/hardware/h100-sxm.yaml gemm_k_overhead_fp8),
  // so the GEMM is less than 2x faster: about what the cited sweep measured at 8192^3
  // (1461 TFLOP/s, tile-ai/tilelang benchmark/matmul_fp8 on H800 SXM).
  GemmOp gemm{8192, 8192, 8192};
  const double t_bf16 = GemmTime(gemm, fp8);
  gemm.fp8 = true;
  const double t_fp8 = GemmTime(gemm, fp8);
  CHECK(t_bf16 / t_fp8 < gpu.peak_flops_fp8 / gpu.peak_flops_bf16);
  CHECK(t_bf16 / t_fp8 > 1.5);
  CHECK(gemm.flops() / t_fp8 / 1e12 == Approx(1461).epsilon(0.05));
  // Without the FP8 fields (another GPU's file), the bf16 shape model and exactly the 2x.
  GpuSpec plain = gpu;
  plain.kernel_shape.gemm_k_overhead_fp8 = -1;
  plain.matmul_fp8_ceiling_efficiency = -1;
  const ComputeRates plain_fp8 = RatesFor(plain, Precision::kFp8);
  gemm.fp8 = false;
  const double plain_bf16 = GemmTime(gemm, plain_fp8);
  gemm.fp8 = true;
  CHECK(plain_bf16 / GemmTime(gemm, plain_fp8) ==
        Approx(gpu.peak_flops_fp8 / gpu.peak_flops_bf16).epsilon(1e-12));
  // A memory-bound one (few output columns): FP8 operands are half the bytes, the bf16
  // output is not.
  GemmOp thin{65536, 16, 8192};
  const double thin_bf16 = GemmTime(thin, fp8);
  thin.fp8 = true;
  const double ratio = GemmTime(thin, fp8) / thin_bf16;
  const double mk = 65536.0 * 8192 + 8192.0 * 16, mn = 65536.0 * 16;
  CHECK(ratio == Approx((1.0 * mk + 2.0 * mn) / (2.0 * mk + 2.0 * mn)));
}

TEST_CASE("fp8 split accumulation: the backward GEMMs at the hardware's fraction of the rate",
          "[planner][fp8]") {
  const GpuSpec gpu = LoadCluster("8xH100").gpu;
  CHECK(gpu.matmul_fp8_split_accumulate_efficiency == Approx(0.870));  // h100-sxm.yaml
  const ComputeRates rates = RatesFor(gpu, Precision::kFp8);
  // Slower by the factor both below the ceiling (a shallow k) and at it (a deep k).
  for (const double k : {1024.0, 16384.0}) {
    INFO("k " << k);
    GemmOp fast{8192, 8192, k, 1, false, /*fp8=*/true};
    GemmOp split = fast;
    split.split_accumulate = true;
    CHECK(GemmTime(split, rates) == Approx(GemmTime(fast, rates) / 0.870));
  }
  // Only FP8 GEMMs have the mode: a bf16 GEMM marked split runs as before.
  GemmOp bf16{8192, 8192, 8192};
  const double t_bf16 = GemmTime(bf16, rates);
  bf16.split_accumulate = true;
  CHECK(GemmTime(bf16, rates) == t_bf16);
  // A GPU without the figure (B200: no fast-accumulation mode) times them alike.
  const ComputeRates b200 = RatesFor(LoadCluster("8xb200").gpu, Precision::kFp8);
  GemmOp fast{8192, 8192, 8192, 1, false, true};
  GemmOp split = fast;
  split.split_accumulate = true;
  CHECK(GemmTime(split, b200) == GemmTime(fast, b200));

  // Transformer Engine's convention: the forward GEMM fast, both backward GEMMs split.
  const ModelSpec m = LoadModel("llama2-7b");
  const StepWork fp8 = BuildStepWork(m, Training(8, 4096, Precision::kFp8), Plan("dp=8"));
  for (const GemmOp& g : fp8.block.forward.gemms) CHECK_FALSE(g.split_accumulate);
  int split_gemms = 0;
  for (const ComputeWork* pass : {&fp8.block.backward_input, &fp8.block.backward_weight})
    for (const GemmOp& g : pass->gemms) {
      CHECK(g.split_accumulate == g.fp8);
      split_gemms += g.split_accumulate ? 1 : 0;
    }
  CHECK(split_gemms == 2 * Fp8GemmsPerBlock(m, false, 1));
  const StepWork bf16_work = BuildStepWork(m, Training(8, 4096, Precision::kBf16), Plan("dp=8"));
  for (const GemmOp& g : bf16_work.block.backward_weight.gemms) CHECK_FALSE(g.split_accumulate);
}

TEST_CASE("fp8 step work: block GEMMs in FP8, the lm_head in bf16, casts as memory traffic",
          "[planner][fp8]") {
  const ModelSpec m = LoadModel("llama2-7b");
  const ParallelPlan p = Plan("dp=4,tp=2,sp=1,mbs=1");
  const StepWork bf16 = BuildStepWork(m, Training(8, 4096, Precision::kBf16), p);
  const StepWork fp8 = BuildStepWork(m, Training(8, 4096, Precision::kFp8), p);
  int fp8_gemms = 0;
  for (const GemmOp& g : fp8.block.forward.gemms) fp8_gemms += g.fp8 ? 1 : 0;
  CHECK(fp8_gemms == 7);
  CHECK(Fp8GemmsPerBlock(m, false, 1) == 7);
  for (const GemmOp& g : fp8.head.forward.gemms) CHECK_FALSE(g.fp8);
  for (const GemmOp& g : bf16.block.forward.gemms) CHECK_FALSE(g.fp8);
  CHECK(fp8.block.forward.matmul_flops == bf16.block.forward.matmul_flops);  // same FLOPs

  // Casts: forward, the 4 distinct linear inputs (x for q/k/v, the attention output, h for
  // gate/up, the SwiGLU product); backward, the 7 output gradients; 4 bytes per element.
  const double T = 4096, E = 4096, F = 11008, tp = 2, KD = 4096;
  const double fwd = kFp8CastBytesPerElement * T * (E + E / tp + E + F / tp);
  const double bwd = kFp8CastBytesPerElement * T * (E / tp + 2 * KD / tp + E + 2 * F / tp + E);
  CHECK(fp8.block.forward.memory_bytes - bf16.block.forward.memory_bytes == Approx(fwd));
  CHECK(fp8.block.forward.kernels - bf16.block.forward.kernels == 4);
  CHECK(fp8.block.backward_input.memory_bytes - bf16.block.backward_input.memory_bytes ==
        Approx(bwd));
  CHECK(fp8.block.backward_input.kernels - bf16.block.backward_input.kernels == 7);
  // Weight casts: once per step, 4 bytes per block weight, with the optimizer.
  const StageParts parts = PartsOfStage(fp8, 0);
  CHECK(OptimizerWork(fp8, parts).memory_bytes - OptimizerWork(bf16, parts).memory_bytes ==
        Approx(kFp8CastBytesPerElement * double(parts.blocks) *
               double(BlockParamsPerTpRank(m, 2))));
}

TEST_CASE("fp8 with experts: one scaling state per local expert GEMM, the router in bf16, "
          "one cast per distinct expert input",
          "[planner][fp8][moe]") {
  const ModelSpec m = LoadModel("mixtral-8x7b");  // 8 experts, no shared ones
  CHECK(Fp8GemmsPerBlock(m, false, 1) == 7);
  CHECK(Fp8GemmsPerBlock(m, true, 1) == 4 + 3 * 8);
  CHECK(Fp8GemmsPerBlock(m, true, 2) == 4 + 3 * 4);
  const ParallelPlan p = Plan("dp=8,ep=2,mbs=1");
  const StepWork bf16 = BuildStepWork(m, Training(8, 4096, Precision::kBf16), p);
  const StepWork fp8 = BuildStepWork(m, Training(8, 4096, Precision::kFp8), p);
  int router_fp8 = 0, expert_fp8 = 0;
  for (const GemmOp& g : fp8.block.forward.gemms) {
    if (g.batch > 1) expert_fp8 += g.fp8 ? 1 : 0;      // the routed experts' batched GEMMs
    if (g.n == 8 && !g.fp8) ++router_fp8;              // the (T,E) x (E,X) router in bf16
  }
  CHECK(expert_fp8 == 3);
  CHECK(router_fp8 == 1);
  // Forward casts: x (q; k, v read it), the attention output (o), h (the experts' gate;
  // up reads it), the SwiGLU product (down): 4 kernels, as for a dense block.
  CHECK(fp8.block.forward.kernels - bf16.block.forward.kernels == 4);
  // The scaling state: 16 GEMMs per block with two local experts of eight (ZeRO-3: no
  // resident FP8 copies, so the scaling state is the whole difference).
  const ParallelPlan z3 = Plan("dp=8,ep=2,zero=3,mbs=1");
  const MemoryBreakdown z_bf16 = EstimateMemory(m, Training(8, 4096, Precision::kBf16), z3,
                                                MemoryModel::kDetailed);
  const MemoryBreakdown z_fp8 = EstimateMemory(m, Training(8, 4096, Precision::kFp8), z3,
                                               MemoryModel::kDetailed);
  CHECK(z_fp8.params_bytes - z_bf16.params_bytes ==
        Approx(double(m.layers) * 16 * kFp8ScalingBytesPerGemm));
}

TEST_CASE("fp8 memory: bf16 states, FP8 weight copies and scaling state, FP8 saved inputs",
          "[planner][fp8][memory]") {
  const ModelSpec m = LoadModel("llama2-7b");
  const ParallelPlan p = Plan("dp=8,mbs=1");  // one stage, no tp: every block on the rank
  const TrainingSpec t_bf16 = Training(8, 4096, Precision::kBf16);
  const TrainingSpec t_fp8 = Training(8, 4096, Precision::kFp8);
  const MemoryBreakdown bf16 = EstimateMemory(m, t_bf16, p, MemoryModel::kDetailed);
  const MemoryBreakdown fp8 = EstimateMemory(m, t_fp8, p, MemoryModel::kDetailed);
  CHECK(fp8.grads_bytes == bf16.grads_bytes);
  CHECK(fp8.optimizer_bytes == bf16.optimizer_bytes);
  const double L = double(m.layers), block = double(BlockParams(m));
  CHECK(fp8.params_bytes - bf16.params_bytes ==
        Approx(L * (kFp8WeightCopiesPerParam * kFp8Bytes * block +
                    7 * kFp8ScalingBytesPerGemm)));
  CHECK(kFp8ScalingBytesPerGemm == 5 * 1026 * 4);

  // Saved inputs at 1 byte instead of 2: x (B,S,E) for q/k/v, h (B,S,E) for gate/up, the
  // SwiGLU product (B,S,F); flash attention keeps its bf16 output and wo adds an FP8 copy.
  const RankShape sh = MakeRankShape(m, t_fp8, p);
  CHECK(sh.linear_input_bytes == 1);
  const double S = 4096, E = 4096, F = 11008;
  const double per_block = (2 * S * E + S * F) * (2 - 1) - S * E * 1;
  const SavedTensorList saved_bf16 =
      BlockSavedTensors(m, MakeRankShape(m, t_bf16, p), AttentionImpl::kFused, Recompute::kNone);
  const SavedTensorList saved_fp8 = BlockSavedTensors(m, sh, AttentionImpl::kFused, Recompute::kNone);
  CHECK(saved_bf16.TotalBytes() - saved_fp8.TotalBytes() == Approx(per_block));
  CHECK(fp8.activations_bytes < bf16.activations_bytes);

  // ZeRO-3 casts the gathered blocks only: no resident copies, gathered blocks carry theirs.
  const ParallelPlan z3 = Plan("dp=8,zero=3,mbs=1");
  const MemoryBreakdown z3_bf16 = EstimateMemory(m, t_bf16, z3, MemoryModel::kDetailed);
  const MemoryBreakdown z3_fp8 = EstimateMemory(m, t_fp8, z3, MemoryModel::kDetailed);
  CHECK(z3_fp8.params_bytes - z3_bf16.params_bytes ==
        Approx(L * 7 * kFp8ScalingBytesPerGemm));
  if (z3_fp8.peak_phase == "layer_backward" && z3_bf16.peak_phase == "layer_backward")
    CHECK(z3_fp8.gathered_params_bytes - z3_bf16.gathered_params_bytes ==
          Approx(2 * kFp8WeightCopiesPerParam * kFp8Bytes * std::ceil(block / 8) * 8));
}

TEST_CASE("fp8 on H100: faster than bf16, MFU against both peaks, named",
          "[planner][fp8][cost]") {
  const ModelSpec m = LoadModel("llama3-70b");
  const ClusterSpec c = LoadCluster("64xH100");
  const ParallelPlan p = Plan("dp=8,tp=8,sp=1,zero=1,mbs=1,recompute=selective");
  const PlanCost bf16 = Estimate(m, c, Training(64, 8192, Precision::kBf16), p);
  const PlanCost fp8 = Estimate(m, c, Training(64, 8192, Precision::kFp8), p);
  CHECK(fp8.tokens_per_s > bf16.tokens_per_s);
  // Attention, norms, communication and the lm_head do not speed up, and the backward GEMMs
  // accumulate split: less than 2x, but more than the 1.15 split accumulation costs.
  CHECK(fp8.time.compute_s > 0.5 * bf16.time.compute_s);
  CHECK(fp8.time.compute_s < 0.85 * bf16.time.compute_s);
  // MFU: against the bf16 peak as for bf16, and against the FP8 peak (half the number).
  CHECK(fp8.mfu == Approx(bf16.mfu * fp8.tokens_per_s / bf16.tokens_per_s));
  CHECK(fp8.mfu_fp8_peak == Approx(fp8.mfu * c.gpu.peak_flops_bf16 / c.gpu.peak_flops_fp8));
  CHECK(bf16.mfu_fp8_peak == 0);
}

TEST_CASE("fp8 search on H100 ranks above bf16", "[planner][fp8][search]") {
  const ModelSpec m = LoadModel("llama3-70b");
  const ClusterSpec c = LoadCluster("64xH100");
  SearchOptions options;
  options.threads = 2;
  options.top_k = 1;
  const SearchResult bf16 = Search(m, c, Training(64, 8192, Precision::kBf16), options);
  const SearchResult fp8 = Search(m, c, Training(64, 8192, Precision::kFp8), options);
  REQUIRE_FALSE(bf16.top.empty());
  REQUIRE_FALSE(fp8.top.empty());
  CHECK(fp8.valid == bf16.valid);
  CHECK(fp8.top.front().cost.tokens_per_s > 1.2 * bf16.top.front().cost.tokens_per_s);
  // A ZeRO-3 plan over dp x cp (within 3% of the best bf16 step) computes faster in fp8,
  // but its parameter gathers no longer hide behind the shorter compute: fp8 needs its own
  // search.
  const ParallelPlan zero3 = ParsePlanString("dp=16,tp=2,cp=2,zero=3,sp=1");
  const PlanCost in_bf16 = Estimate(m, c, Training(64, 8192, Precision::kBf16), zero3);
  CHECK(in_bf16.time.total_s < 1.03 * bf16.top.front().cost.time.total_s);
  const PlanCost in_fp8 = Estimate(m, c, Training(64, 8192, Precision::kFp8), zero3);
  CHECK(in_fp8.time.compute_s < 0.8 * in_bf16.time.compute_s);
  CHECK(in_fp8.time.exposed_comm_s[MeshDim::kDp] > in_bf16.time.exposed_comm_s[MeshDim::kDp]);
}

}  // namespace
}  // namespace meshplan
