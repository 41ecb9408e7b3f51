// Runtime memory on a GPU: the lines of the detailed memory breakdown that are not tensors
// of the model (docs/memory_model.md, "Runtime memory on GPUs"). The one place they are
// computed; DetailedStageMemory (planner/cost/memory_detailed.cc) calls AddRuntimeMemory
// last, the seed model never does.
//
// For one rank, one process per rank (as the executor launches), with S = the spec
// (planner/runtime_memory_spec.h) and T = the bytes of the breakdown's tensor lines that the
// step allocates and frees (all but the parameters, gradients and optimizer states, which are
// allocated once before the first step and fragment nothing):
//   cuda_context_bytes       = S.cuda_context_bytes
//   nccl_buffers_bytes       = CountNcclCommunicators(plan) * S.nccl_buffer_bytes_per_communicator
//   workspace_bytes          = S.cublas_workspace_bytes * kCublasWorkspaces
//                              + S.attention_workspace_bytes
//   allocator_overhead_bytes = (T + workspace_bytes) * f / (1 - f),  f = S.allocator_fragmentation
//     (the caching allocator holds the tensors and the workspaces; with a share f of its
//     reserved memory held by no tensor, reserved = held / (1 - f)). The CUDA context and
//     NCCL's buffers are outside it (the driver and NCCL allocate them themselves).
// A zero spec (the CPU profile) gives zero lines and leaves the breakdown as it was.
// Pure functions.
#pragma once

#include <cstdint>

#include "planner/framework_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/runtime_memory_spec.h"

namespace meshplan {

// The executor computes on one stream from one thread (executor/model/ops.h: no autograd
// engine threads), so PyTorch keeps one cuBLAS workspace per process (one per handle and
// stream pair, aten/src/ATen/cuda/CublasHandlePool.cpp).
inline constexpr int64_t kCublasWorkspaces = 1;

// The NCCL communicators one rank joins (executor/parallel/device_mesh.h): one per mesh
// dimension of size > 1 (dp, pp, cp, tp), plus the dp x cp group of weight replicas when
// both dp > 1 and cp > 1 (with one of them 1, that group is the other's communicator), and
// with ep > 1 the ep group's and (when it has more than one rank) the expert-data-parallel
// group's.
int64_t CountNcclCommunicators(const ParallelPlan& plan);

// `spec` with the framework's allocator_fragmentation, when it sets one and the spec is a
// GPU's (a zero spec, the CPU profile's, stays zero).
RuntimeMemorySpec WithFramework(RuntimeMemorySpec spec, const FrameworkSpec& framework);

// Fills the runtime lines of `breakdown` and adds them to its total_bytes. The tensor
// lines already in it give T. `spec.allocator_fragmentation` must be in [0, 1).
void AddRuntimeMemory(const RuntimeMemorySpec& spec, const ParallelPlan& plan,
                      MemoryBreakdown* breakdown);

}  // namespace meshplan
