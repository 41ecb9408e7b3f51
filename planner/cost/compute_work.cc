#include "planner/cost/compute_work.h"

#include <algorithm>
#include <cmath>

#include "planner/cost/fp8_convention.h"
#include "planner/hardware_spec.h"
#include "planner/training_spec.h"

namespace meshplan {

ComputeWork& ComputeWork::operator+=(const ComputeWork& other) {
  for (const GemmOp& g : other.gemms) gemms.push_back(g);
  for (const FlashAttentionOp& f : other.flash) flash.push_back(f);
  matmul_flops += other.matmul_flops;
  attention_flops += other.attention_flops;
  column_matmul_flops += other.column_matmul_flops;
  memory_bytes += other.memory_bytes;
  kernels += other.kernels;
  return *this;
}

double FlashAttentionOp::executed_flops(double tile) const {
  const double square = 4 * batch_heads * q_len * kv_len * head_dim * (backward ? 2.5 : 1.0);
  if (!causal || q_len <= 0) return square;
  // Blocks on or below the diagonal: 1/2 of the square plus half a tile per block row.
  return square * std::min(1.0, 0.5 + 0.5 * tile / q_len);
}

double FlashAttentionOp::ctas(double tile) const {
  return batch_heads * std::ceil((backward ? kv_len : q_len) / tile);
}

ComputeRates RatesFor(const GpuSpec& gpu, Precision precision,
                      const FrameworkCalibration& calibration) {
  const double peak = gpu.PeakFlops(precision) * calibration.compute_scale;
  ComputeRates rates;
  rates.matmul_flops_per_s = peak * gpu.matmul_efficiency;
  rates.matmul_ceiling_flops_per_s = peak * gpu.matmul_ceiling_efficiency;
  // FP8 GEMMs: the main loop reaches the bf16 fraction of the FP8 peak; their own ceiling
  // and k overhead where the hardware file has them (docs/cost_model.md "FP8").
  if (precision == Precision::kFp8) {
    const double fp8_peak = gpu.peak_flops_fp8 * calibration.compute_scale;
    rates.fp8_matmul_flops_per_s = fp8_peak * gpu.matmul_efficiency;
    rates.fp8_matmul_ceiling_flops_per_s =
        fp8_peak * (gpu.matmul_fp8_ceiling_efficiency >= 0 ? gpu.matmul_fp8_ceiling_efficiency
                                                           : gpu.matmul_ceiling_efficiency);
    rates.fp8_split_accumulate = gpu.matmul_fp8_split_accumulate_efficiency;
  }
  rates.attention_flops_per_s = peak * gpu.attention_efficiency;
  for (const auto& [kernel, name] : kAttentionKernelSpellings)
    rates.flash_flops_per_s[static_cast<size_t>(kernel)] = peak * gpu.AttentionEfficiency(kernel);
  rates.memory_Bps =
      gpu.memory_bandwidth_Bps * gpu.memory_bandwidth_efficiency * calibration.bandwidth_scale;
  rates.kernel_overhead_s = gpu.kernel_overhead_s;
  rates.element_bytes = precision == Precision::kFp32 ? 4 : 2;
  rates.sm_count = static_cast<double>(gpu.kernel_shape.sm_count);
  rates.gemm_tile_m = static_cast<double>(gpu.kernel_shape.gemm_tile_m);
  rates.gemm_tile_n = static_cast<double>(gpu.kernel_shape.gemm_tile_n);
  rates.gemm_k_overhead = gpu.kernel_shape.gemm_k_overhead;
  rates.fp8_gemm_k_overhead = gpu.kernel_shape.gemm_k_overhead_fp8 >= 0
                                  ? gpu.kernel_shape.gemm_k_overhead_fp8
                                  : gpu.kernel_shape.gemm_k_overhead;
  rates.attention_tile_q = static_cast<double>(gpu.kernel_shape.attention_tile_q);
  rates.gemm_streams_operands = gpu.kernel_shape.gemm_streams_operands;
  return rates;
}

namespace {

// FLOPs the GEMM occupies the GPU for: whole tiles, whole waves, k plus its overhead.
double ShapedGemmFlops(const GemmOp& g, const ComputeRates& r) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) return 0;
  const double depth = 2 * (g.k + (g.fp8 ? r.fp8_gemm_k_overhead : r.gemm_k_overhead));
  if (r.sm_count <= 0) return g.m * g.n * depth * g.batch;
  const double tiles =
      std::ceil(g.m / r.gemm_tile_m) * std::ceil(g.n / r.gemm_tile_n) * g.batch;
  const double waves = std::ceil(tiles / r.sm_count);
  return waves * r.sm_count * r.gemm_tile_m * r.gemm_tile_n * depth;
}

double ShapedFlashFlops(const FlashAttentionOp& op, const ComputeRates& r) {
  const double executed = op.executed_flops(r.attention_tile_q);
  const double ctas = op.ctas(r.attention_tile_q);
  if (r.sm_count <= 0 || !(ctas > 0)) return executed;
  const double waves = std::ceil(ctas / r.sm_count);
  return executed * (waves * r.sm_count) / ctas;
}

double Seconds(double work, double rate) { return rate > 0 ? work / rate : 0; }

// Operands read and output written once: (a * (m*k + k*n) + c * m*n) * batch.
double GemmBytes(const GemmOp& g, const ComputeRates& r) {
  const double operand_bytes = g.fp8 ? kFp8Bytes : r.element_bytes;
  return (operand_bytes * (g.m * g.k + g.k * g.n) + r.element_bytes * g.m * g.n) * g.batch;
}

}  // namespace

double GemmTime(const GemmOp& gemm, const ComputeRates& rates) {
  const double split = gemm.fp8 && gemm.split_accumulate ? rates.fp8_split_accumulate : 1;
  const double rate = gemm.attention_core ? rates.attention_flops_per_s
                      : gemm.fp8          ? rates.fp8_matmul_flops_per_s * split
                                          : rates.matmul_flops_per_s;
  double compute = Seconds(ShapedGemmFlops(gemm, rates), rate);
  const double ceiling = gemm.attention_core ? 0
                         : gemm.fp8          ? rates.fp8_matmul_ceiling_flops_per_s * split
                                             : rates.matmul_ceiling_flops_per_s;
  if (ceiling > 0) compute = std::max(compute, gemm.flops() / ceiling);
  const double memory = Seconds(GemmBytes(gemm, rates), rates.memory_Bps);
  return rates.gemm_streams_operands ? compute + memory : std::max(compute, memory);
}

double FlashAttentionTime(const FlashAttentionOp& op, const ComputeRates& rates) {
  const double rate = rates.flash_flops_per_s[static_cast<size_t>(op.kernel)];
  return Seconds(ShapedFlashFlops(op, rates), rate);
}

namespace {

// The shapeless remainder (compute_work.h): matmul FLOPs no listed linear GEMM covers, and
// whether the attention is listed as kernels at all (else its nominal FLOPs are timed).
double UnlistedMatmulFlops(const ComputeWork& work) {
  double listed = 0;
  for (const GemmOp& g : work.gemms)
    if (!g.attention_core) listed += g.flops();
  return std::max(0.0, work.matmul_flops - listed);
}

bool ListsAttention(const ComputeWork& work) {
  if (work.flash.size > 0) return true;
  for (const GemmOp& g : work.gemms)
    if (g.attention_core) return true;
  return false;
}

}  // namespace

double ShapedMatmulFlops(const ComputeWork& work, const ComputeRates& rates) {
  double shaped = UnlistedMatmulFlops(work);
  for (const GemmOp& g : work.gemms)
    if (!g.attention_core) shaped += ShapedGemmFlops(g, rates);
  return shaped;
}

double ShapedAttentionFlops(const ComputeWork& work, const ComputeRates& rates) {
  if (!ListsAttention(work)) return work.attention_flops;
  double shaped = 0;
  for (const GemmOp& g : work.gemms)
    if (g.attention_core) shaped += ShapedGemmFlops(g, rates);
  for (const FlashAttentionOp& op : work.flash) shaped += ShapedFlashFlops(op, rates);
  return shaped;
}

ComputeTime TimeOf(const ComputeWork& work, const ComputeRates& rates) {
  ComputeTime t;
  for (const GemmOp& g : work.gemms)
    (g.attention_core ? t.attention_s : t.matmul_s) += GemmTime(g, rates);
  for (const FlashAttentionOp& op : work.flash) t.attention_s += FlashAttentionTime(op, rates);
  t.matmul_s += Seconds(UnlistedMatmulFlops(work), rates.matmul_flops_per_s);
  if (!ListsAttention(work))
    t.attention_s += Seconds(work.attention_flops, rates.attention_flops_per_s);
  return TimeOf(work, rates, t);
}

ComputeTime TimeOf(const ComputeWork& work, const ComputeRates& rates, const ComputeTime& kernels) {
  ComputeTime t;
  t.matmul_s = kernels.matmul_s;
  t.attention_s = kernels.attention_s;
  t.memory_s = Seconds(work.memory_bytes, rates.memory_Bps);
  t.overhead_s = static_cast<double>(work.kernels) * rates.kernel_overhead_s;
  return t;
}

double SerialGemmBytes(const ComputeWork& work, const ComputeRates& rates) {
  if (!rates.gemm_streams_operands) return 0;
  double bytes = 0;
  for (const GemmOp& g : work.gemms) bytes += GemmBytes(g, rates);
  return bytes;
}

}  // namespace meshplan
