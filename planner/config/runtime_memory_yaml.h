// The `runtime_memory:` section of a hardware file (configs/hardware/*.yaml, and a plan
// file's cluster.gpu) <-> RuntimeMemorySpec (planner/runtime_memory_spec.h).
//
// Keys, all optional (absent = 0), units in the names (MiB = 2^20 bytes):
//   cuda_context_MiB                  >= 0, per process
//   nccl_buffer_MiB_per_communicator  >= 0, per NCCL communicator a rank joins
//   cublas_workspace_MiB              >= 0, per (cuBLAS handle, stream) pair
//   attention_workspace_MiB           >= 0, a fixed attention-kernel workspace per process
//   allocator_fragmentation           in [0, 1): share of the caching allocator's reserved
//                                     memory that no live tensor holds
// Reading throws InputError at file:line:column naming the field (unknown key, wrong type,
// out of range), as every YamlFields read does. Writing emits nothing for an all-zero spec,
// so CPU profiles and plan files without the section stay as they were.
#pragma once

#include <string>

#include "planner/config/yaml_fields.h"
#include "planner/runtime_memory_spec.h"

namespace meshplan {

RuntimeMemorySpec RuntimeMemoryFromYaml(const YamlFields& section);

// The section as YAML lines ("runtime_memory:" and its keys, indented by two); "" for an
// all-zero spec. Numbers are exact (shortest text that reads back equal).
std::string RuntimeMemoryToYaml(const RuntimeMemorySpec& spec);

}  // namespace meshplan
