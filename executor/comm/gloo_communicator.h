// GlooCommunicator: the Communicator of executor/comm/communicator.h over LibTorch's
// c10d::ProcessGroupGloo (CPU tensors; other devices are staged through host memory).
// One instance is one group: the world ranks in `members` (group rank = index), joined
// through a shared c10d::Store; each (name, members) pair may be created once per store.
// The constructor blocks until every member has joined, at most options.timeout.
// Calls run in issue order on the communicator's own thread; a rank may post a send and a
// recv to the same peer before waiting on either. Collective handles never Test() true; a
// send/recv handle destroyed after Test() and before completion blocks until it completes
// (or times out). A dead peer or a step past options.timeout throws std::runtime_error from
// Wait() (or Barrier()) naming the group, the operation and the peer's group and world rank
// when the operation has one; the communicator is then broken and every later call throws at
// once. Size, dtype or peer mistakes throw std::invalid_argument from the call itself.
// Not thread-safe: one thread issues calls.
// Execution, algorithms, memory: docs/executor_internals.md#gloo-communicator.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"

namespace meshplan {

struct GlooOptions {
  // Bound on joining the group and on every operation (a dead peer is noticed earlier
  // when its connection closes).
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // Where this rank's Gloo endpoint listens: a network interface (e.g. "eth0"), else an
  // address or host name, else (both empty) the address this host's name resolves to.
  std::string interface;
  std::string hostname = "127.0.0.1";
  // Collectives (all-reduce, reduce-scatter, all-gather, broadcast, all-to-all) run to
  // completion before their *Async call returns; send/recv stay asynchronous. For ranks
  // whose communication runs on the cores that compute (CPU ranks, `meshplan run` sets it):
  // there an overlapped collective only takes the core from the compute beside it, and
  // costs more than run alone (docs/validation/cpu_ranks.md); the cost model times CPU
  // profiles the same way (GpuSpec::comm_overlaps_compute). Failures still surface at Wait().
  bool complete_collectives_at_post = false;
  // A thread waiting for a collective keeps its core, yielding to the communicator's
  // threads, instead of sleeping. On a virtual machine an idle vCPU halts, and waking it
  // waits for the hypervisor to schedule it again: on the 2-vCPU VM of
  // docs/validation/cpu_ranks.md (item 4) spinning took 23-28% off a tp=2 sp step.
  bool spin_while_waiting = false;
};

// The options of ranks that compute on the cores their communication runs on (CPU ranks:
// `meshplan run` and calibrate's collective benchmark): collectives complete at post and
// their waiters spin.
GlooOptions ForRanksOnComputeCores(GlooOptions options);

class GlooCommunicator final : public Communicator {
 public:
  // world_rank must be one of `members` (distinct world ranks). Throws
  // std::invalid_argument on bad members, std::runtime_error when joining fails.
  GlooCommunicator(c10::intrusive_ptr<c10d::Store> store, int world_rank, std::vector<int> members,
                   std::string name, GlooOptions options = {});
  ~GlooCommunicator() override;
  GlooCommunicator(const GlooCommunicator&) = delete;
  GlooCommunicator& operator=(const GlooCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  const std::string& name() const;
  const std::vector<int>& members() const;  // world ranks, in group-rank order

  std::unique_ptr<CommHandle> AllReduceSumAsync(torch::Tensor& buffer) override;
  std::unique_ptr<CommHandle> ReduceScatterSumAsync(const torch::Tensor& input,
                                                    torch::Tensor& output) override;
  std::unique_ptr<CommHandle> AllGatherAsync(const torch::Tensor& input,
                                             torch::Tensor& output) override;
  std::unique_ptr<CommHandle> BroadcastAsync(torch::Tensor& buffer, int root) override;
  std::unique_ptr<CommHandle> SendAsync(const torch::Tensor& buffer, int dst) override;
  std::unique_ptr<CommHandle> RecvAsync(torch::Tensor& buffer, int src) override;
  // c10d's alltoall_base (Gloo alltoallv) on the comm thread.
  std::unique_ptr<CommHandle> AllToAllAsync(const torch::Tensor& input,
                                            const std::vector<int64_t>& send_rows,
                                            torch::Tensor& output,
                                            const std::vector<int64_t>& recv_rows) override;
  void Barrier() override;

  struct Impl;  // opaque: the process group, the comm thread and its queue

 private:
  std::shared_ptr<Impl> impl_;
};

// The c10-allocated temporaries of one GlooCommunicator call in a group of `size` ranks,
// allocated as the call allocates them (docs/executor_internals.md#gloo-communicator):
//   kReduceScatter (`buffer` = the output): one output-sized temporary when size > 2;
//   kAllReduce (`buffer` = the buffer): none, except for bf16 when size > 1: a shard
//     (numel / size) and its reduce-scatter's temporary, or an fp32 copy when the buffer
//     does not split into size equal chunks.
// All in host memory. The communicator allocates them when a call is posted and frees them
// when it is waited on, whenever its thread runs the call, so a rank's peak is independent
// of thread timing; an emulation of Gloo holds the same (executor/comm/emulated_communicator.h).
enum class GlooScratchOp { kAllReduce, kReduceScatter };
std::vector<torch::Tensor> GlooScratch(GlooScratchOp op, const torch::Tensor& buffer, int size);

}  // namespace meshplan
