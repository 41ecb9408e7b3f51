// Communicator: the collectives one parallel dimension needs, on tensors.
//
// One interface with a Gloo implementation (CPU, and CUDA tensors via Gloo) and
// an NCCL one (GPU); a DeviceMesh hands each mesh dimension (dp, pp, cp, tp) its
// own Communicator over the ranks that share the other coordinates.
// Contract: every rank of the group calls the same collectives in the same
// order. Buffers are contiguous; sizes must match as documented or the call
// throws std::invalid_argument. Async calls return a handle; the buffers must
// stay alive and untouched until Wait() returns. Not thread-safe: one thread
// issues calls per communicator. Failures (a peer died, a timeout) throw
// std::runtime_error naming the peer rank when known.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

namespace meshplan {

class CommHandle {
 public:
  virtual ~CommHandle() = default;
  virtual void Wait() = 0;  // blocks until the collective is complete
  // Non-blocking: true when the operation is known to be complete (Wait() then returns at
  // once). The default never knows (false): callers keep the handle and Wait() later.
  virtual bool Test() { return false; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  // rank inside this group, 0 <= rank < size
  virtual int size() const = 0;

  // Sum over the group, in place.
  virtual std::unique_ptr<CommHandle> AllReduceSumAsync(torch::Tensor& buffer) = 0;
  // input holds size() equal chunks; output (numel = input.numel() / size()) receives
  // the sum of every rank's chunk rank().
  virtual std::unique_ptr<CommHandle> ReduceScatterSumAsync(const torch::Tensor& input,
                                                            torch::Tensor& output) = 0;
  // output (numel = input.numel() * size()) receives every rank's input, in rank order.
  virtual std::unique_ptr<CommHandle> AllGatherAsync(const torch::Tensor& input,
                                                     torch::Tensor& output) = 0;
  virtual std::unique_ptr<CommHandle> BroadcastAsync(torch::Tensor& buffer, int root) = 0;
  virtual std::unique_ptr<CommHandle> SendAsync(const torch::Tensor& buffer, int dst) = 0;
  virtual std::unique_ptr<CommHandle> RecvAsync(torch::Tensor& buffer, int src) = 0;
  virtual void Barrier() = 0;
  // All-to-all with variable split sizes along dim 0 (expert-parallel token dispatch):
  // input's first send_rows[0] rows go to rank 0, the next send_rows[1] to rank 1, ...;
  // output receives recv_rows[j] rows from rank j, in rank order. Both lists have size()
  // entries, input.size(0) == sum(send_rows), output.size(0) == sum(recv_rows), the other
  // dims, the dtype and the device equal; recv_rows[j] must equal rank j's send_rows[rank()]
  // (exchange the counts first, with an all-to-all of one row per rank). The default throws
  // std::logic_error: a communicator that cannot do it says so (test fakes).
  virtual std::unique_ptr<CommHandle> AllToAllAsync(const torch::Tensor& input,
                                                    const std::vector<int64_t>& send_rows,
                                                    torch::Tensor& output,
                                                    const std::vector<int64_t>& recv_rows);

  // Blocking forms.
  void AllReduceSum(torch::Tensor& buffer) { AllReduceSumAsync(buffer)->Wait(); }
  void ReduceScatterSum(const torch::Tensor& input, torch::Tensor& output) {
    ReduceScatterSumAsync(input, output)->Wait();
  }
  void AllGather(const torch::Tensor& input, torch::Tensor& output) {
    AllGatherAsync(input, output)->Wait();
  }
  void Broadcast(torch::Tensor& buffer, int root) { BroadcastAsync(buffer, root)->Wait(); }
  void Send(const torch::Tensor& buffer, int dst) { SendAsync(buffer, dst)->Wait(); }
  void Recv(torch::Tensor& buffer, int src) { RecvAsync(buffer, src)->Wait(); }
  void AllToAll(const torch::Tensor& input, const std::vector<int64_t>& send_rows,
                torch::Tensor& output, const std::vector<int64_t>& recv_rows) {
    AllToAllAsync(input, send_rows, output, recv_rows)->Wait();
  }
};

inline std::unique_ptr<CommHandle> Communicator::AllToAllAsync(const torch::Tensor&,
                                                               const std::vector<int64_t>&,
                                                               torch::Tensor&,
                                                               const std::vector<int64_t>&) {
  throw std::logic_error("all_to_all: this communicator does not implement it");
}

}  // namespace meshplan
