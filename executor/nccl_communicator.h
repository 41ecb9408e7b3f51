// NcclCommunicator: the Communicator of executor/communicator.h over NCCL (GPU ranks).
//
// Built only when the CUDA toolkit and NCCL are found (MESHPLAN_WITH_NCCL=1; see
// executor/cuda.cmake). It talks to CUDA through the runtime API and raw device pointers
// (tensor.data_ptr()), so it compiles against a CPU-only LibTorch too; it needs CUDA
// tensors (a LibTorch with CUDA) only to run.
//
// One instance is one group: the world ranks in `members` (group rank = index in that
// list), one ncclComm_t, created from a unique id that group rank 0 publishes in the
// shared c10d::Store (the rendezvous store the Gloo path uses) under
// "meshplan/nccl/<name>/<members>"; so each (name, members) pair may be created once per
// store. The constructor blocks until every member has joined the store (at most
// options.timeout), then in ncclCommInitRank (NCCL has no timeout there).
//
// Streams: every operation runs on this communicator's own communication stream. It is
// ordered after the work already queued on the compute stream (an event recorded there,
// waited on by the communication stream) and signals a done event; the handle's Wait()
// makes the compute stream wait on that event. Wait() therefore orders later GPU work
// after the collective without blocking the host (kernels that read the result are safe;
// the host must synchronise the compute stream before it reads device memory itself).
// Test() asks a handle's done event (cudaEventQuery): true once the GPU has finished the
// operation; false while its point-to-point call is still queued (Test never launches the
// batch: a send must go out grouped with the recv that follows it).
// Point-to-point calls are grouped: SendAsync / RecvAsync are queued and launched together
// in one ncclGroupStart/End when a handle of theirs is waited on or any other operation is
// issued, so a rank may post a send and a recv to the same peer before waiting on either
// (as with Gloo) without deadlocking.
// CPU tensors (small host values such as a loss) are staged through device memory: the
// call copies them in, runs the collective, copies back and returns when done (host
// blocking, bounded by options.timeout). Send/recv need CUDA tensors.
// Memory: staged CPU tensors use a temporary device buffer of their size (outside
// LibTorch's caching allocator); NCCL's own buffers are outside it too.
// Failures: argument mistakes throw std::invalid_argument (the shared comm_checks, plus
// device and dtype checks); NCCL or CUDA errors, and host waits that exceed options.timeout
// (Barrier, staged calls), throw std::runtime_error naming the group and the operation;
// the communicator is then broken (aborted) and every later call throws at once. Not
// thread-safe: one thread issues calls.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "executor/communicator.h"

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
  void Barrier() override;

  struct Impl;  // opaque: the ncclComm_t, the streams, the pending point-to-point group

 private:
  std::shared_ptr<Impl> impl_;
};

// The NCCL version this build was compiled against, "2.28.9".
std::string NcclVersionString();

}  // namespace meshplan
