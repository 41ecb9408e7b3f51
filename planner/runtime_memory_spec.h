// RuntimeMemorySpec: what a GPU training process holds besides its tensors, as the
// `runtime_memory:` section of a configs/hardware/*.yaml file gives it (read by
// planner/config/runtime_memory_yaml.h; every default is cited in the YAML files).
//
// Plain data, part of GpuSpec. All zero (the default, and the CPU profile) means "no
// runtime memory": the detailed memory model then counts tensors only, exactly as before.
// How the lines are computed from it: planner/cost/runtime_memory.h.
#pragma once

namespace meshplan {

struct RuntimeMemorySpec {
  double cuda_context_bytes = 0;             // per process: driver state and loaded kernels
  double nccl_buffer_bytes_per_communicator = 0;  // per NCCL communicator the rank joins
  double cublas_workspace_bytes = 0;         // per (cuBLAS handle, stream) pair that runs GEMMs
  double attention_workspace_bytes = 0;      // a fixed attention-kernel workspace, per process
  double allocator_fragmentation = 0;        // in [0, 1): the share of the caching allocator's
                                             // reserved memory that no live tensor holds

  bool operator==(const RuntimeMemorySpec&) const = default;
};

}  // namespace meshplan
