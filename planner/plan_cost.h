// PlanCost: everything the cost model predicts for one plan, per GPU and per step.
//
// Produced by Estimate() (planner/cost_model.h), ranked by the search, drawn by
// the GUI, re-timed by the simulator and checked against the executor's
// Measurement by `meshplan compare`. Bytes and FLOPs are doubles (the seed
// formulas are fractional); counts of parameters are exact integers.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace meshplan {

// The dimensions of the device mesh, in placement order from outermost.
enum class MeshDim { kDp = 0, kPp = 1, kCp = 2, kTp = 3 };
inline constexpr int kNumMeshDims = 4;
inline constexpr std::array<MeshDim, kNumMeshDims> kAllMeshDims{MeshDim::kDp, MeshDim::kPp,
                                                                 MeshDim::kCp, MeshDim::kTp};
inline const char* ToString(MeshDim dim) {
  constexpr const char* kNames[] = {"dp", "pp", "cp", "tp"};
  return kNames[static_cast<int>(dim)];
}
// A value per mesh dimension, indexed by MeshDim.
struct PerMeshDim {
  std::array<double, kNumMeshDims> values{};
  double& operator[](MeshDim d) { return values[static_cast<int>(d)]; }
  double operator[](MeshDim d) const { return values[static_cast<int>(d)]; }
  double sum() const { return values[0] + values[1] + values[2] + values[3]; }
};

// seed: SPEC.md section 2 (a)-(b) verbatim; detailed: every tensor the executor allocates.
enum class MemoryModel { kSeed, kDetailed };

// Memory of the most loaded GPU (the worst pipeline stage), bytes.
struct MemoryBreakdown {
  double params_bytes = 0;           // this rank's resident parameters (all precisions' copies
                                     // that live in the model: bf16 weights, or fp32 weights)
                                     // + the model's buffers (RoPE tables, causal mask)
  double grads_bytes = 0;            // gradient storage
  double optimizer_bytes = 0;        // fp32 master weights + Adam m and v (or bf16 m, v)
  double activations_bytes = 0;      // saved for backward, for all micro-batches in flight
  double logits_bytes = 0;           // logits, softmax / loss buffers of the last stage
  double comm_buffer_bytes = 0;      // DDP buckets, reduce-scatter / all-gather staging
  double gathered_params_bytes = 0;  // ZeRO-3/FSDP: unsharded blocks alive at the peak
  double transient_bytes = 0;        // the temporary peak on top of the steady state
  double total_bytes = 0;            // the peak: what must fit in GpuSpec::memory_bytes
  std::string peak_phase;            // which phase of the step sets the peak
  int64_t worst_stage = 0;           // pipeline stage this breakdown belongs to
};

// Step time of the slowest rank, seconds.
struct StepTimeBreakdown {
  double compute_s = 0;        // forward + backward (+ recompute) on the compute stream
  double recompute_s = 0;      // the part of compute_s spent recomputing activations
  PerMeshDim exposed_comm_s;   // communication not hidden behind compute, per dimension
  double bubble_s = 0;         // pipeline idle time
  double optimizer_s = 0;      // the optimizer step
  double total_s = 0;          // compute_s + exposed comm + bubble_s + optimizer_s
};

struct PlanCost {
  int64_t params_total = 0;     // whole model, exact (SPEC.md section 1)
  int64_t params_per_rank = 0;  // the most loaded rank's parameters (before ZeRO sharding)

  double model_flops_per_step = 0;          // 6*P*tokens + attention (no recompute)
  double model_flops_no_attention = 0;      // 6*P*tokens
  double hardware_flops_per_step = 0;       // model flops + recompute
  MemoryBreakdown memory;
  PerMeshDim comm_bytes_per_step;           // bytes each GPU sends per step, per dimension
  StepTimeBreakdown time;

  double tokens_per_s = 0;      // global tokens per step / step time
  double mfu = 0;               // with attention FLOPs
  double mfu_no_attention = 0;  // 6*P*tokens only
  double hfu = 0;               // hardware FLOPs (with recompute)

  bool fits = false;
  std::string reason;           // why it does not fit (empty when it fits)
};

}  // namespace meshplan
