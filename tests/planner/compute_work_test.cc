// Shape-aware compute (planner/cost/compute_work.h): tile and wave quantization, the k
// overhead, the roofline, flash attention's causal work, and the plan-level consequences
// (a tp shard, a cp chunk and a small micro-batch are slower per FLOP).
#include <catch2/catch.hpp>

#include "planner/cost/compute_work.h"
#include "planner/cost/step_work.h"
#include "planner/hardware_spec.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

// An H100 SXM as configs/hardware/h100-sxm.yaml describes its kernels.
GpuSpec ShapedH100() {
  GpuSpec g = testing::H100Cluster(1).gpu;
  g.kernel_shape.sm_count = 132;
  g.kernel_shape.gemm_k_overhead = 128;
  return g;
}

ComputeRates Rates(const GpuSpec& gpu) { return RatesFor(gpu, Precision::kBf16); }

double MatmulSecondsPerFlop(const ComputeWork& w, const ComputeRates& r) {
  return TimeOf(w, r).matmul_s / w.matmul_flops;
}

}  // namespace

TEST_CASE("a GEMM without kernel geometry runs at the saturated rate") {
  GpuSpec g = testing::H100Cluster(1).gpu;  // sm_count 0, no k overhead
  const ComputeRates r = Rates(g);
  const GemmOp gemm{4096, 4096, 4096};
  CHECK(GemmTime(gemm, r) == Approx(gemm.flops() / (989.4e12 * g.matmul_efficiency)));
}

TEST_CASE("a CPU profile's GEMM adds its memory traffic to its compute, a GPU's takes the slower") {
  GpuSpec g = testing::H100Cluster(1).gpu;
  const GemmOp skinny{64, 8192, 256};  // few rows: the weight's bytes are a large share
  const ComputeRates gpu = Rates(g);
  const double compute = skinny.flops() / gpu.matmul_flops_per_s;
  const double bytes = 2.0 * (64 * 256 + 256 * 8192 + 64 * 8192);  // bf16 operands and output
  const double memory = bytes / gpu.memory_Bps;
  CHECK(GemmTime(skinny, gpu) == Approx(std::max(compute, memory)));
  g.kernel_shape.gemm_streams_operands = true;
  const ComputeRates cpu = Rates(g);
  CHECK(GemmTime(skinny, cpu) == Approx(compute + memory));
  ComputeWork work;
  work.AddGemm(skinny);
  CHECK(SerialGemmBytes(work, gpu) == 0);
  CHECK(SerialGemmBytes(work, cpu) == Approx(bytes));
  CHECK(TimeOf(work, cpu).matmul_s == Approx(compute + memory));
}

TEST_CASE("tile and wave quantization: one tile more than the SMs costs a second wave") {
  const ComputeRates r = Rates(ShapedH100());
  // 132 tiles of 128 x 128 fill one wave; 133 need two.
  const GemmOp full{128 * 12, 128 * 11, 8192};
  const GemmOp spill{128 * 12 + 1, 128 * 11, 8192};
  CHECK(GemmTime(spill, r) == Approx(2 * GemmTime(full, r)));
  // By hand: one wave of 132 tiles of 2 * 128 * 128 * (8192 + 128) FLOPs.
  CHECK(GemmTime(full, r) ==
        Approx(132 * 2.0 * 128 * 128 * (8192 + 128) / r.matmul_flops_per_s));
}

TEST_CASE("the k overhead makes short reductions slower per FLOP") {
  const ComputeRates r = Rates(ShapedH100());
  const GemmOp deep{8192, 8192, 8192}, shallow{8192, 8192, 512};  // same tiles, compute-bound
  const double deep_rate = deep.flops() / GemmTime(deep, r);
  const double shallow_rate = shallow.flops() / GemmTime(shallow, r);
  CHECK(shallow_rate == Approx(deep_rate * (512.0 / 640) / (8192.0 / 8320)));
}

TEST_CASE("no linear GEMM runs faster than the matmul ceiling, however deep its k") {
  GpuSpec g = ShapedH100();
  g.matmul_efficiency = 0.84;
  g.matmul_ceiling_efficiency = 0.80;
  const ComputeRates r = Rates(g);
  // k = 65536: the main loop alone would reach 0.84 * 65536 / 65664 = 0.838 of peak.
  const GemmOp deep{128 * 12, 128 * 11, 65536};
  CHECK(GemmTime(deep, r) == Approx(deep.flops() / (989.4e12 * 0.80)));
  // k = 512 stays below the ceiling: its k overhead sets the time, as without one.
  const GemmOp shallow{128 * 12, 128 * 11, 512};
  CHECK(GemmTime(shallow, r) == Approx(132 * 2.0 * 128 * 128 * (512 + 128) / r.matmul_flops_per_s));
  // Unfused attention's batched GEMMs keep the attention rate.
  CHECK(GemmTime({128 * 12, 128 * 11, 65536, 1, /*attention_core=*/true}, r) ==
        Approx(132 * 2.0 * 128 * 128 * (65536 + 128) / r.attention_flops_per_s));
  // A calibration that measures this machine's GEMMs drops the public sweep's ceiling.
  g.matmul_ceiling_efficiency = 0;
  CHECK(GemmTime(deep, Rates(g)) < GemmTime(deep, r));
}

TEST_CASE("a skinny GEMM is bound by memory (roofline)") {
  const ComputeRates r = Rates(ShapedH100());
  const GemmOp skinny{16, 32768, 8192};  // 16 tokens: the weight's bytes dominate
  const double bytes = 2.0 * (16 * 8192 + 8192.0 * 32768 + 16 * 32768);
  CHECK(GemmTime(skinny, r) == Approx(bytes / r.memory_Bps));
}

TEST_CASE("causal flash attention executes half the square plus the diagonal tiles") {
  const FlashAttentionOp op{8, 4096, 4096, 128, /*causal=*/true, /*backward=*/false};
  const double square = 4.0 * 8 * 4096 * 4096 * 128;
  CHECK(op.executed_flops(128) == Approx(square * (0.5 + 0.5 * 128 / 4096)));
  FlashAttentionOp backward = op;
  backward.backward = true;
  CHECK(backward.executed_flops(128) == Approx(2.5 * op.executed_flops(128)));
  CHECK(backward.ctas(128) == 8 * 32);
}

TEST_CASE("a flash kernel runs at its own kernel's rate, or FlashAttention-2's without a figure") {
  GpuSpec g = ShapedH100();
  FlashAttentionOp op{8, 4096, 4096, 128, /*causal=*/true, /*backward=*/false};
  const double flash2 = FlashAttentionTime(op, Rates(g));
  for (AttentionKernel kernel : {AttentionKernel::kCudnn, AttentionKernel::kFlash3}) {
    op.kernel = kernel;
    CHECK(FlashAttentionTime(op, Rates(g)) == Approx(flash2));  // no figure for it
  }
  g.attention_cudnn_efficiency = 1.6 * g.attention_efficiency;
  g.attention_flash3_efficiency = 1.75 * g.attention_efficiency;
  op.kernel = AttentionKernel::kCudnn;
  CHECK(FlashAttentionTime(op, Rates(g)) == Approx(flash2 / 1.6));
  op.kernel = AttentionKernel::kFlash3;
  CHECK(FlashAttentionTime(op, Rates(g)) == Approx(flash2 / 1.75));
  op.kernel = AttentionKernel::kFlash2;
  CHECK(FlashAttentionTime(op, Rates(g)) == Approx(flash2));
}

TEST_CASE("shapes that matter: each split is slower per FLOP than the unsplit op") {
  const GpuSpec gpu = ShapedH100();
  const ComputeRates r = Rates(gpu);
  const ModelSpec small = testing::SpecLlama(2048, 16, 16, 5632);
  ParallelPlan plan;
  plan.micro_batch = 1;

  SECTION("a tp=8 shard of a small model") {
    const StepWork whole = BuildStepWork(small, testing::Training(8, 4096), plan);
    ParallelPlan sharded = plan;
    sharded.tp = 8;
    const StepWork shard = BuildStepWork(small, testing::Training(8, 4096), sharded);
    CHECK(MatmulSecondsPerFlop(shard.block.forward, r) >
          1.05 * MatmulSecondsPerFlop(whole.block.forward, r));
  }
  SECTION("a cp=8 split of a 4k sequence") {
    const ModelSpec m = testing::SpecLlama(8192, 64, 8, 28672);
    ParallelPlan tp8 = plan;
    tp8.tp = 8;
    ParallelPlan cp8 = tp8;
    cp8.cp = 8;
    const StepWork whole = BuildStepWork(m, testing::Training(8, 4096), tp8);
    const StepWork split = BuildStepWork(m, testing::Training(8, 4096), cp8);
    const auto per_flop = [&](const StepWork& w) {
      return TimeOf(w.block.attention_forward, r).attention_s / w.block.attention_forward.attention_flops;
    };
    CHECK(per_flop(split) > 2 * per_flop(whole));
  }
  SECTION("a micro-batch of 1 at a short sequence") {
    ParallelPlan big = plan;
    big.micro_batch = 16;
    const StepWork one = BuildStepWork(small, testing::Training(16, 128), plan);
    const StepWork many = BuildStepWork(small, testing::Training(16, 128), big);
    CHECK(MatmulSecondsPerFlop(one.block.forward, r) >
          1.5 * MatmulSecondsPerFlop(many.block.forward, r));
  }
}

TEST_CASE("nominal FLOPs keep the MFU convention whatever the kernels") {
  const ModelSpec m = testing::Spec7b();
  ParallelPlan plan;
  plan.tp = 4;
  for (AttentionImpl impl : {AttentionImpl::kFused, AttentionImpl::kNaive}) {
    const StepWork w = BuildStepWork(m, testing::Training(8, 2048), plan, impl);
    const double T = 2048;
    CHECK(w.block.forward.attention_flops == Approx(4 * T * 4096 * 2048 / 4));
    CHECK(w.block.backward_input.attention_flops == Approx(2 * w.block.forward.attention_flops));
    double listed = 0;
    for (const GemmOp& g : w.block.forward.gemms)
      if (!g.attention_core) listed += g.flops();
    CHECK(w.block.forward.matmul_flops == Approx(listed));
    if (impl == AttentionImpl::kNaive) {
      double core = 0;
      for (const GemmOp& g : w.block.forward.gemms)
        if (g.attention_core) core += g.flops();
      CHECK(core == Approx(w.block.forward.attention_flops));
    }
  }
}

}  // namespace meshplan
