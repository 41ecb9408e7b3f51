// ComputeWork: the compute of one pass of one model part, as kernels with shapes, and
// its time on a GPU or a CPU profile.
//
// Work is counted twice on purpose: nominal FLOPs (matmul_flops, attention_flops) in the
// MFU convention of planner/cost/flops.h, and the kernels that run with their shapes
// (gemms, flash, memory-bound bytes and launches), which set the time. Matmul or attention
// FLOPs that no listed kernel covers run at the saturated rate (a shapeless workload, e.g.
// a calibration sample). How each kernel class is timed (tile and wave quantization, the k
// overhead, the roofline, the matmul ceiling, FP8 GEMMs, CPU GEMMs, causal flash waves):
// docs/cost_model.md section 5, "Compute time". Rates come from ComputeRates.
// No allocation: the search times a ComputeWork per candidate.
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>
#include <new>
#include <type_traits>

#include "planner/framework_spec.h"

namespace meshplan {

struct GpuSpec;
enum class Precision;

// A fixed-capacity list: no heap, cheap to copy. Only the first `size` slots hold items:
// the others are never written or read (a search builds a StepWork of these per candidate,
// so constructing one initialises no slot and copying one copies its items only).
template <typename T, int N>
struct FixedList {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  FixedList() {}
  FixedList(const FixedList& other) : size(other.size) {
    std::copy(other.begin(), other.end(), items);
  }
  FixedList& operator=(const FixedList& other) {
    size = other.size;
    std::copy(other.begin(), other.end(), items);
    return *this;
  }
  void push_back(const T& item) {
    assert(size < N && "FixedList capacity");
    items[size++] = item;
  }
  // Appends a value-initialised item to fill in place: a temporary built field by field and
  // then copied costs a store-forwarding stall per copy, which the search pays per candidate.
  T& emplace_back() {
    assert(size < N && "FixedList capacity");
    return *::new (&items[size++]) T();
  }
  const T* begin() const { return items; }
  const T* end() const { return items + size; }
  T* begin() { return items; }
  T* end() { return items + size; }
  const T& operator[](int i) const { return items[i]; }

  int size = 0;

 private:
  union {
    T items[N];  // uninitialised beyond `size`
  };
};

// C(m x n) = A(m x k) B(k x n), `batch` independent products (a bmm, or repeats).
struct GemmOp {
  double m = 0, n = 0, k = 0;
  double batch = 1;
  bool attention_core = false;  // QK^T / PV of unfused attention: timed as attention
  bool fp8 = false;             // FP8 operands at the FP8 rate (fp8 precision's linear GEMMs)
  bool split_accumulate = false;  // FP8 with fp32 promotion every 128 k (ComputeRates)
  double flops() const { return 2 * m * n * k * batch; }
};

// One flash-attention kernel. The backward runs five matmuls against the forward's two
// (2.5 passes) and parallelises over key blocks instead of query blocks
// (FlashAttention-2, Dao 2023, sections 3.1-3.2).
struct FlashAttentionOp {
  double batch_heads = 0;  // micro-batch x this rank's heads
  double q_len = 0;        // queries on this rank
  double kv_len = 0;       // keys its queries meet (the whole context, over CP ring steps)
  double head_dim = 0;
  bool causal = true;
  bool backward = false;
  AttentionKernel kernel = AttentionKernel::kFlash2;  // its rate: ComputeRates::flash_flops_per_s
  double executed_flops(double tile) const;
  double ctas(double tile) const;  // thread blocks of the kernel
};

// A block's whole backward (input and weight gradients together, as calibration times it):
// 7 + 7 linear GEMMs and 4 of unfused attention; a MoE block with MLA and shared experts
// (planner/cost/block_linears.h): 12 + 12 linear GEMMs and 4 of unfused attention.
inline constexpr int kMaxGemmsPerPass = 28;

struct ComputeWork {
  double matmul_flops = 0;     // nominal (planner/cost/flops.h)
  double attention_flops = 0;  // nominal: the full S x S square
  double memory_bytes = 0;     // bytes read + written by memory-bound kernels
  // Of matmul_flops, the column-parallel linears' (the lm_head's too): the window of the TP
  // collectives a framework issues behind them (Collective::behind_gemms).
  double column_matmul_flops = 0;
  int64_t kernels = 0;         // launched kernels
  // (flash before gemms: a work's fields and its first items share cache lines, where a
  // search touches only those)
  FixedList<FlashAttentionOp, 1> flash;       // the fused attention kernel, if any
  FixedList<GemmOp, kMaxGemmsPerPass> gemms;  // the GEMMs that run (linear and attention core)

  // Adds a linear-layer GEMM (nominal matmul FLOPs) or an unfused attention GEMM.
  void AddGemm(const GemmOp& gemm) { AddGemm(gemm, gemm.flops()); }
  // The same with its flops() known (a linear's three passes share them).
  void AddGemm(const GemmOp& gemm, double flops) {
    gemms.push_back(gemm);
    if (!gemm.attention_core) matmul_flops += flops;
  }
  // Adds another pass's work: FLOPs, bytes, kernels and their shapes.
  ComputeWork& operator+=(const ComputeWork& other);
};

// Seconds per kernel class for one ComputeWork.
struct ComputeTime {
  double matmul_s = 0;
  double attention_s = 0;
  double memory_s = 0;
  double overhead_s = 0;  // kernels * kernel_overhead_s
  double total() const { return matmul_s + attention_s + memory_s + overhead_s; }
};

// The GPU's sustained rates and kernel geometry for one precision, computed once per estimate.
struct ComputeRates {
  double matmul_flops_per_s = 0;
  double fp8_matmul_flops_per_s = 0;  // GemmOp::fp8 GEMMs (fp8 precision; else 0)
  // The fastest any linear GEMM runs (GpuSpec::matmul_ceiling_efficiency; 0 = no ceiling).
  double matmul_ceiling_flops_per_s = 0;
  double fp8_matmul_ceiling_flops_per_s = 0;
  // Both FP8 rates' factor for GemmOp::split_accumulate GEMMs
  // (GpuSpec::matmul_fp8_split_accumulate_efficiency).
  double fp8_split_accumulate = 1;
  double attention_flops_per_s = 0;  // FlashAttention-2 and the unfused core (GEMMs, FLOPs)
  // Each fused attention kernel's rate, indexed by AttentionKernel (GpuSpec::AttentionEfficiency).
  std::array<double, kAttentionKernelSpellings.size()> flash_flops_per_s{};
  double memory_Bps = 0;
  double kernel_overhead_s = 0;
  double element_bytes = 2;  // operand size of GEMMs (roofline)
  double sm_count = 0;       // 0: no tile / wave quantization
  double gemm_tile_m = 128, gemm_tile_n = 128;
  double gemm_k_overhead = 0, fp8_gemm_k_overhead = 0;
  double attention_tile_q = 128;
  bool gemm_streams_operands = false;  // memory adds to compute (CPU) instead of max
};
// `calibration` (the framework's fitted factors, planner/framework_spec.h) scales the matmul
// and attention rates (compute_scale) and the memory rate (bandwidth_scale).
ComputeRates RatesFor(const GpuSpec& gpu, Precision precision,
                      const FrameworkCalibration& calibration = {});
ComputeTime TimeOf(const ComputeWork& work, const ComputeRates& rates);
// The same with the GEMM and attention kernels' seconds (matmul_s, attention_s) given, from
// TimeOf of a work with the same kernels and FLOPs: times the memory-bound bytes and the
// launches only (the search's works of one plan shape differ in those alone).
ComputeTime TimeOf(const ComputeWork& work, const ComputeRates& rates, const ComputeTime& kernels);

// Seconds of one GEMM / one flash-attention kernel (the formulas above).
double GemmTime(const GemmOp& gemm, const ComputeRates& rates);
double FlashAttentionTime(const FlashAttentionOp& op, const ComputeRates& rates);

// The FLOPs the matmul / attention rates are charged with once shapes are applied
// (quantized tiles and k overhead), the compute side of the roofline only:
// calibration's linear regressors (planner/measure/calibration_fit.h).
double ShapedMatmulFlops(const ComputeWork& work, const ComputeRates& rates);
double ShapedAttentionFlops(const ComputeWork& work, const ComputeRates& rates);
// The GEMM bytes charged to the memory rate ON TOP of their compute: every listed GEMM's
// operand and output bytes on a CPU profile (gemm_streams_operands), 0 on a GPU (its roofline takes
// the slower side instead). Calibration's memory regressor adds them to memory_bytes.
double SerialGemmBytes(const ComputeWork& work, const ComputeRates& rates);

}  // namespace meshplan
