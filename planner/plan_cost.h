// PlanCost: everything the cost model predicts for one plan, per GPU and per step.
//
// Produced by Estimate() (planner/cost/cost_model.h), ranked by the search, drawn by
// the GUI, re-timed by the simulator and checked against the executor's
// Measurement by `meshplan compare`. Bytes and FLOPs are doubles (the seed
// formulas are fractional); counts of parameters are exact integers.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "planner/mesh_dim.h"
#include "planner/parallel_plan.h"

namespace meshplan {

// The stable id of the host-memory limit (PlanCost::reason, search --explain).
inline constexpr const char* kHostMemoryExceeded = "host_memory_exceeded";

// seed: docs/cost_model.md 2(a)-(b) verbatim; detailed: every tensor the executor allocates.
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
  // Runtime memory on a GPU (planner/cost/runtime_memory.h; 0 on the CPU profile and in
  // the seed model): what the process holds besides the model's tensors.
  double cuda_context_bytes = 0;        // the CUDA context of this rank's process
  double nccl_buffers_bytes = 0;        // NCCL's buffers, for every communicator the rank joins
  double workspace_bytes = 0;           // cuBLAS (and fixed attention-kernel) workspaces
  double allocator_overhead_bytes = 0;  // caching-allocator memory no tensor holds
  double total_bytes = 0;            // the peak: what must fit in GpuSpec::memory_bytes
  // Host memory this rank keeps in its node's DRAM when the plan offloads
  // (planner/cost/offload.h); none of it is in total_bytes.
  double host_optimizer_bytes = 0;    // offload_opt: the parameters AdamW updates (fp32
                                      // master or param-dtype copy), Adam m, v and the
                                      // gradient shard the CPU step reads
                                      // (HostOptimizerBytesPerParam, cost/offload.h),
                                      // and the update's workspace
  double host_activations_bytes = 0;  // offload_act: saved activations not on the GPU
  double host_params_bytes = 0;       // offload_params: the ZeRO-3 parameter shard
  double host_total_bytes() const {
    return host_optimizer_bytes + host_activations_bytes + host_params_bytes;
  }
  std::string peak_phase;            // which phase of the step sets the peak
  int64_t worst_stage = 0;           // pipeline stage this breakdown belongs to

  double runtime_bytes() const {
    return cuda_context_bytes + nccl_buffers_bytes + workspace_bytes + allocator_overhead_bytes;
  }
};

// Step time of the slowest rank, seconds.
struct StepTimeBreakdown {
  double compute_s = 0;        // forward + backward (+ recompute) on the compute stream
  double recompute_s = 0;      // the part of compute_s spent recomputing activations
  PerMeshDim exposed_comm_s;   // communication not hidden behind compute, per dimension
  double bubble_s = 0;         // pipeline idle time
  double optimizer_s = 0;      // the optimizer step (on the CPU with offload_opt)
  double offload_s = 0;        // host <-> GPU copies not hidden behind compute (offload)
  double overlap_slowdown_s = 0;  // compute lost to communication overlapped with it (TP with
                                  // tp_overlap, DP gradient syncs and ZeRO-3 gathers)
  double total_s = 0;          // compute_s + exposed comm + bubble_s + optimizer_s + offload_s
                               // + overlap_slowdown_s
};

struct PlanCost {
  int64_t params_total = 0;     // whole model, exact (docs/cost_model.md section 1)
  int64_t params_per_rank = 0;  // the most loaded rank's parameters (before ZeRO sharding)
  int64_t params_active = 0;    // those one token passes through (== total unless MoE)
  int64_t expert_params_per_rank = 0;  // of params_per_rank: routed + shared experts (MoE)

  double model_flops_per_step = 0;          // 6*P*tokens + attention (no recompute)
  double model_flops_no_attention = 0;      // 6*P*tokens
  double hardware_flops_per_step = 0;       // model flops + recompute
  MemoryBreakdown memory;
  PerMeshDim comm_bytes_per_step;           // bytes each GPU sends per step, per dimension
  StepTimeBreakdown time;

  double tokens_per_s = 0;      // global tokens per step / step time
  // Per GPU (PerGpuRate, planner/cost/flops.h), as the frameworks log them:
  double tokens_per_s_per_gpu = 0;       // tokens_per_s / GPUs
  double model_flops_per_s_per_gpu = 0;  // model_flops_per_step / step time / GPUs
  // MFU and HFU against GpuSpec::PeakFlops: the dense bf16 peak for bf16, mixed and fp8.
  double mfu = 0;               // with attention FLOPs
  double mfu_no_attention = 0;  // 6*P*tokens only
  double hfu = 0;               // hardware FLOPs (with recompute)
  double mfu_fp8_peak = 0;      // fp8 only: mfu against the dense FP8 peak (peak_flops_fp8)

  double host_bytes_per_node = 0;  // host_total_bytes() of the node's GPUs (offload), bytes
  bool fits = false;            // within GPU memory and, when it offloads, host memory
  double usable_bytes = 0;      // the GPU memory it was judged against: the capacity less the
                                // headroom (UsableBytes, planner/cost/cost_model.h)
  bool fits_host = true;        // within the node's host memory (true when nothing offloads)
  std::string reason;           // why it does not fit (empty when it fits); host memory:
                                // starts with kHostMemoryExceeded
};

// Over the usable GPU memory by no more than the allocator's assumed fragmentation
// (MemoryBreakdown::allocator_overhead_bytes): an average share over measured runs (the
// hardware file's runtime_memory.allocator_fragmentation), not something the plan's tensors
// decide, so the run fits if its allocator wastes less. The search still rejects such a plan
// (fits is false); `estimate`, `validate` and the GUI call it "tight", not "does not fit".
inline bool FitIsTight(const PlanCost& cost) {
  return !cost.fits && cost.fits_host &&
         cost.memory.total_bytes - cost.memory.allocator_overhead_bytes <= cost.usable_bytes;
}

// A plan with its cost and its place in the search order (planner/search/plan_space.h).
struct RankedPlan {
  ParallelPlan plan;
  PlanCost cost;
  int64_t ordinal = 0;
  int variant = 0;  // which overlap / offload variant of the grid point (knob_variants.h)
};

}  // namespace meshplan
