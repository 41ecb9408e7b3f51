// The runtime lines of the detailed memory breakdown (see runtime_memory.h).
#include "planner/cost/runtime_memory.h"

#include "planner/mesh_layout.h"

namespace meshplan {

int64_t CountNcclCommunicators(const ParallelPlan& plan) {
  int64_t communicators = 0;
  for (const MeshDim dim : kAllMeshDims)
    if (MeshDimSize(plan, dim) > 1) ++communicators;
  const bool separate_weight_replica_group = plan.dp > 1 && plan.cp > 1;
  if (separate_weight_replica_group) ++communicators;
  // Expert parallel: the ep group's all-to-all communicator, and the expert-data-parallel
  // group's (dp/ep x cp) when it has more than one rank.
  if (plan.ep > 1) ++communicators;
  if (plan.ep > 1 && plan.expert_weight_replicas() > 1) ++communicators;
  return communicators;
}

RuntimeMemorySpec WithFramework(RuntimeMemorySpec spec, const FrameworkSpec& framework) {
  if (framework.allocator_fragmentation >= 0 && spec != RuntimeMemorySpec{})
    spec.allocator_fragmentation = framework.allocator_fragmentation;
  return spec;
}

void AddRuntimeMemory(const RuntimeMemorySpec& spec, const ParallelPlan& plan,
                      MemoryBreakdown* breakdown) {
  MemoryBreakdown& b = *breakdown;
  // The model states, allocated once before the first step, leave no free fragments.
  const double tensor_bytes = b.total_bytes - b.params_bytes - b.grads_bytes - b.optimizer_bytes;
  b.cuda_context_bytes = spec.cuda_context_bytes;
  b.nccl_buffers_bytes =
      double(CountNcclCommunicators(plan)) * spec.nccl_buffer_bytes_per_communicator;
  b.workspace_bytes =
      spec.cublas_workspace_bytes * double(kCublasWorkspaces) + spec.attention_workspace_bytes;
  const double f = spec.allocator_fragmentation;
  b.allocator_overhead_bytes = (tensor_bytes + b.workspace_bytes) * f / (1.0 - f);
  b.total_bytes += b.runtime_bytes();
}

}  // namespace meshplan
