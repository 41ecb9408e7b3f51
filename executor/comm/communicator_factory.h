// Choosing a communicator backend: Gloo (CPU, and CUDA tensors staged through the host)
// or NCCL (one GPU per rank; in the build only with the CUDA toolkit and NCCL).
//
// MakeCommunicator builds one group of either kind with the same arguments;
// MakeGroupFactory wraps it for DeviceMesh (one communicator per mesh dimension, named
// by the dimension). Asking for NCCL in a build without it throws std::runtime_error
// saying how to get it; constructor errors of the backends pass through unchanged.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "executor/comm/gloo_communicator.h"
#include "executor/parallel/device_mesh.h"

namespace meshplan {

enum class CommBackend { kGloo, kNccl };
const char* ToString(CommBackend backend);  // gloo | nccl
// "gloo" | "nccl" (any case); false for anything else.
bool ParseCommBackend(const std::string& text, CommBackend* backend);
inline constexpr const char* kAllowedCommBackends = "gloo, nccl";

// True when this build has the NCCL backend (MESHPLAN_WITH_NCCL).
bool NcclBuiltIn();

struct CommOptions {
  GlooOptions gloo;  // Gloo endpoint and timeout
  std::chrono::milliseconds nccl_timeout{std::chrono::seconds(60)};
  int cuda_device = -1;            // NCCL: this rank's device (-1: the current one)
  void* cuda_compute_stream = nullptr;  // NCCL: cudaStream_t the model computes on (null: default)
};

std::unique_ptr<Communicator> MakeCommunicator(CommBackend backend,
                                               c10::intrusive_ptr<c10d::Store> store,
                                               int world_rank, std::vector<int> members,
                                               std::string name, const CommOptions& options);

GroupFactory MakeGroupFactory(CommBackend backend, c10::intrusive_ptr<c10d::Store> store,
                              int world_rank, CommOptions options);

}  // namespace meshplan
