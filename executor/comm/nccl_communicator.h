// NcclCommunicator: the Communicator of executor/comm/communicator.h over NCCL (GPU ranks),
// built only with MESHPLAN_WITH_NCCL=1 (executor/cuda.cmake). One instance is one group: the
// world ranks in `members` (group rank = index); each (name, members) pair may be created
// once per store. The constructor blocks until every member has joined the store (at most
// options.timeout), then in ncclCommInitRank (NCCL has no timeout there).
// Wait() orders later GPU work after the operation without blocking the host (the host must
// synchronise the compute stream before it reads device memory). Test() is true once the GPU
// has finished; it never launches queued point-to-point calls, and a rank may post a send and
// a recv to the same peer before waiting on either. CPU tensors are staged (host blocking,
// bounded by options.timeout); send/recv need CUDA tensors. Argument mistakes throw
// std::invalid_argument; NCCL or CUDA errors and host waits past options.timeout throw
// std::runtime_error naming the group and the operation, and break (abort) the communicator:
// every later call throws at once. Not thread-safe: one thread issues calls.
// Streams, grouping, staging, memory: docs/executor_internals.md#nccl-communicator.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"

namespace meshplan {

struct NcclOptions {
  // This rank's CUDA device; -1: the calling thread's current device (cudaGetDevice).
  int device = -1;
  // Bound on joining the group and on host-side waits (Barrier, CPU-staged calls).
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // The cudaStream_t the model computes on; null: the legacy default stream (LibTorch's
  // default stream unless the caller switched streams).
  void* compute_stream = nullptr;
};

class NcclCommunicator final : public Communicator {
 public:
  // world_rank must be one of `members` (distinct world ranks): std::invalid_argument
  // otherwise. std::runtime_error when no CUDA device is visible or joining fails.
  NcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int world_rank, std::vector<int> members,
                   std::string name, NcclOptions options = {});
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  const std::string& name() const;
  const std::vector<int>& members() const;
  int device() const;

  std::unique_ptr<CommHandle> AllReduceSumAsync(torch::Tensor& buffer) override;
  std::unique_ptr<CommHandle> ReduceScatterSumAsync(const torch::Tensor& input,
                                                    torch::Tensor& output) override;
  std::unique_ptr<CommHandle> AllGatherAsync(const torch::Tensor& input,
                                             torch::Tensor& output) override;
  std::unique_ptr<CommHandle> BroadcastAsync(torch::Tensor& buffer, int root) override;
  std::unique_ptr<CommHandle> SendAsync(const torch::Tensor& buffer, int dst) override;
  std::unique_ptr<CommHandle> RecvAsync(torch::Tensor& buffer, int src) override;
  // One grouped ncclSend/ncclRecv per peer with rows to move (CUDA tensors only); its own
  // rows are copied on the compute stream. Launched at once (not queued with later p2p).
  std::unique_ptr<CommHandle> AllToAllAsync(const torch::Tensor& input,
                                            const std::vector<int64_t>& send_rows,
                                            torch::Tensor& output,
                                            const std::vector<int64_t>& recv_rows) override;
  void Barrier() override;

  struct Impl;  // opaque: the ncclComm_t, the streams, the pending point-to-point group

 private:
  std::shared_ptr<Impl> impl_;
};

// The NCCL version this build was compiled against, "2.28.9".
std::string NcclVersionString();

}  // namespace meshplan
