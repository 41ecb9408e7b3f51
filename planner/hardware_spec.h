// GpuSpec: one accelerator (or a CPU profile) as the cost model sees it.
//
// Efficiencies apply to large, well-shaped kernels; kernel_shape says how smaller or
// oddly shaped ones lose (planner/cost/compute_work.h).
// Units are SI and sit in the names: bytes, FLOP/s, bytes/s, seconds.
// The YAML files in configs/hardware/ use TB/s, TFLOP/s and GB and are converted
// once at load (planner/config/config_loader.h). Efficiencies are fractions in (0, 1]
// of the peak that real kernels reach; `meshplan calibrate` fits them.
#pragma once

#include <cstdint>
#include <string>

#include "planner/attention_kernel.h"
#include "planner/runtime_memory_spec.h"

namespace meshplan {

enum class Precision;  // planner/training_spec.h

// How a kernel's efficiency depends on its shape (planner/cost/compute_work.h): the
// data sheet's SM count and the tile geometry of its GEMM and attention kernels.
// sm_count 0 (a CPU profile): no tile or wave quantization.
struct KernelShape {
  int64_t sm_count = 0;
  int64_t gemm_tile_m = 128;      // output tile of one GEMM CTA, rows x columns
  int64_t gemm_tile_n = 128;
  double gemm_k_overhead = 0;     // a tile's prologue + epilogue, in k-depth equivalents
  // The same for FP8 GEMMs, whose k-loop runs twice as fast past the same prologue and
  // epilogue (< 0: as gemm_k_overhead).
  double gemm_k_overhead_fp8 = -1;
  int64_t attention_tile_q = 128; // query rows per flash-attention CTA
  // A GEMM's memory traffic adds to its compute instead of hiding behind it (roofline max):
  // true for CPU profiles (`meshplan calibrate --device cpu` sets it), whose BLAS packs the
  // operands in a pass its FMA loops do not overlap (planner/cost/compute_work.h).
  bool gemm_streams_operands = false;
  bool operator==(const KernelShape&) const = default;
};

struct GpuSpec {
  std::string name;
  int64_t memory_bytes = 0;               // device memory capacity
  double peak_flops_fp32 = 0;             // dense, no sparsity
  double peak_flops_tf32 = 0;             // 0 = not supported
  double peak_flops_bf16 = 0;             // dense bf16/fp16 tensor-core peak
  double peak_flops_fp8 = 0;              // 0 = not supported
  double memory_bandwidth_Bps = 0;        // HBM/DRAM bandwidth
  double matmul_efficiency = 0.70;        // fraction of peak reached by large GEMMs' main loop
  // The best fraction of peak any GEMM shape reaches (a public sweep's maximum, e.g. MAMF):
  // no GEMM is timed faster, however deep its k (planner/cost/compute_work.h). 0 = no ceiling.
  double matmul_ceiling_efficiency = 0;
  // The same for FP8 GEMMs, of peak_flops_fp8 (< 0: as matmul_ceiling_efficiency).
  double matmul_fp8_ceiling_efficiency = -1;
  // FP8 GEMMs that promote their partial sums to fp32 every 128 k (cuBLASLt's FAST_ACCUM off,
  // "split accumulator": Transformer Engine's backward GEMMs, fp8_convention.h) run at this
  // fraction of the rates above. 1 = no cost (a GPU whose FP8 GEMMs have no such mode).
  double matmul_fp8_split_accumulate_efficiency = 1;
  double attention_efficiency = 0.50;     // fraction of peak reached by attention kernels:
                                          // FlashAttention-2's, and the unfused core's
  // The other fused attention kernels' (AttentionKernel), where the file gives them; 0: as
  // attention_efficiency (no figure, or a framework that runs FlashAttention-2 on this GPU).
  double attention_cudnn_efficiency = 0;
  double attention_flash3_efficiency = 0;
  // The fraction of peak `kernel` reaches on this GPU (the fallback above).
  double AttentionEfficiency(AttentionKernel kernel) const;
  double memory_bandwidth_efficiency = 0.80;  // fraction of bandwidth by elementwise ops
  double kernel_overhead_s = 0;           // fixed cost per launched op (CPU profile: dispatch)
  KernelShape kernel_shape;
  // Compute slowed by communication overlapped with it (issue 17): the fraction of the GPU
  // its kernels lose while NCCL's (or TE userbuffers') kernels run beside them, one CTA per
  // channel on SMs the GEMMs would use (docs/cost_model.md 7(b)). 0 = free overlap. This is
  // the figure for TP overlap (tp_overlap).
  double comm_overlap_slowdown = 0;
  // The same beside the DP and ZeRO collectives the backward and forward hide (dp_overlap,
  // ZeRO-3 prefetch): a measured figure where the file gives one; < 0: comm_overlap_slowdown.
  double dp_overlap_slowdown = -1;
  double DpOverlapSlowdown() const {
    return dp_overlap_slowdown >= 0 ? dp_overlap_slowdown : comm_overlap_slowdown;
  }
  // False where a rank's communication runs on the cores that compute: CPU ranks, whose
  // Gloo threads copy, reduce and drive loopback TCP on the rank's own core. Then nothing
  // overlaps: every collective blocks and its time adds to the step (SerializeCommunication,
  // planner/cost/step_work.h; docs/cost_model.md 7). meshplan calibrate writes false on CPU.
  bool comm_overlaps_compute = true;
  // CPU profiles: the intra-op threads of one rank that its rates were measured with
  // (`meshplan calibrate --threads`); `meshplan run` gives each CPU rank as many, so what is
  // run is what was predicted. 0: a GPU, or not recorded (run's default: cores / ranks).
  int threads_per_rank = 0;
  std::string source;                     // data sheet or "calibrated on ..." note

  // What a GPU process holds besides its tensors (all 0 for the CPU profile).
  RuntimeMemorySpec runtime_memory;

  // The peak MFU is stated against: dense bf16 for bf16, mixed and fp8, fp32 for fp32.
  // (fp8 runs also state MFU against peak_flops_fp8: PlanCost::mfu_fp8_peak; their
  // linear GEMMs run at peak_flops_fp8: planner/cost/compute_work.h RatesFor.)
  double PeakFlops(Precision precision) const;
  bool operator==(const GpuSpec&) const = default;
};

// Why this GPU cannot train in `precision` ("" when it can): fp8 needs FP8 tensor cores
// (peak_flops_fp8 > 0; none on Ampere: A100, A40). Callers raise it as an InputError at
// the flag or file field that chose the precision.
std::string WhyPrecisionUnsupported(const GpuSpec& gpu, Precision precision);

}  // namespace meshplan
