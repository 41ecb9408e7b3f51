// SingleRankCommunicator: the Communicator of a group with one member.
//
// What a mesh dimension of size 1 (and a single-process run) uses: no network,
// no threads. All-reduce and broadcast leave the buffer as it is; reduce-scatter
// all-gather and all-to-all copy input to output; send/recv have no valid peer and throw
// std::invalid_argument. Argument checks are those of every Communicator
// (executor/comm/comm_checks.h). Handles are complete when returned.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "executor/comm/comm_checks.h"
#include "executor/comm/communicator.h"

namespace meshplan {

class SingleRankCommunicator final : public Communicator {
 public:
  explicit SingleRankCommunicator(std::string name = "single") : name_(std::move(name)) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }

  std::unique_ptr<CommHandle> AllReduceSumAsync(torch::Tensor& buffer) override {
    comm_checks::CheckBuffer("all_reduce", name_, buffer, "buffer");
    return Done();
  }
  std::unique_ptr<CommHandle> ReduceScatterSumAsync(const torch::Tensor& input,
                                                    torch::Tensor& output) override {
    comm_checks::CheckReduceScatter(name_, 1, input, output);
    output.view(-1).copy_(input.view(-1));
    return Done();
  }
  std::unique_ptr<CommHandle> AllGatherAsync(const torch::Tensor& input,
                                             torch::Tensor& output) override {
    comm_checks::CheckAllGather(name_, 1, input, output);
    output.view(-1).copy_(input.view(-1));
    return Done();
  }
  std::unique_ptr<CommHandle> BroadcastAsync(torch::Tensor& buffer, int root) override {
    comm_checks::CheckBuffer("broadcast", name_, buffer, "buffer");
    comm_checks::CheckPeer("broadcast", name_, 1, 0, root, "root", /*allow_self=*/true);
    return Done();
  }
  std::unique_ptr<CommHandle> SendAsync(const torch::Tensor& buffer, int dst) override {
    comm_checks::CheckPeer("send", name_, 1, 0, dst, "dst", /*allow_self=*/false);
    return Done();
  }
  std::unique_ptr<CommHandle> RecvAsync(torch::Tensor& buffer, int src) override {
    comm_checks::CheckPeer("recv", name_, 1, 0, src, "src", /*allow_self=*/false);
    return Done();
  }
  std::unique_ptr<CommHandle> AllToAllAsync(const torch::Tensor& input,
                                            const std::vector<int64_t>& send_rows,
                                            torch::Tensor& output,
                                            const std::vector<int64_t>& recv_rows) override {
    comm_checks::CheckAllToAll(name_, 1, input, send_rows, output, recv_rows);
    output.copy_(input);
    return Done();
  }
  void Barrier() override {}

 private:
  struct DoneHandle final : CommHandle {
    void Wait() override {}
  };
  static std::unique_ptr<CommHandle> Done() { return std::make_unique<DoneHandle>(); }

  std::string name_;
};

}  // namespace meshplan
