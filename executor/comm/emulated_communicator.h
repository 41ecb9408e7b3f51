// EmulatedCommunicator: the Communicator of a group in which only this rank is real and its
// peers are emulated (`meshplan run --emulate-rank`, docs/executor.md#emulated-ranks).
//
// Each call checks its arguments like every Communicator (comm_checks.h) and fills its
// outputs deterministically with finite values, as if the peers had sent them:
//   all_reduce       the buffer as it is (the peers add zeros)
//   reduce_scatter   this rank's chunk of the input
//   all_gather       this rank's input in every slot
//   broadcast        the root's buffer: unchanged on the root, else drawn from N(0, 1)
//   recv             drawn from N(0, 1) (a generator seeded by options.seed and the group)
//   all_to_all       this rank's own rows into its slot; floating rows from a peer drawn
//                    from N(0, 1); integer rows from a peer (the token counts of expert
//                    parallelism) are a copy of what this rank sends itself, as if every
//                    peer routed its tokens like this rank (a fixed-seed, about even split
//                    when the router is): the shapes that follow are a real run's
//   send, barrier    nothing
// Integer and bool buffers that are received get zeros. Outputs are finite whenever this
// rank's inputs are, so no NaN or inf enters the maths.
// Memory: the message buffers are the caller's (allocated as for a real receive); with
// workspace kGloo each call also holds the c10 temporaries GlooCommunicator allocates for it
// (GlooScratch, gloo_communicator.h) until its handle is waited or destroyed, so a CPU rank's
// peak is that of a real Gloo run. kNone (NCCL) holds nothing: NCCL's buffers are its own.
// Time: kZero completes every call when it returns. kModel completes a call the cost
// model's CollectiveTime after the later of its issue and the previous call on the group
// (planner/cost/collective_time.h, with the group placed as the plan places it); sends
// have a clock of their own (links are full duplex). Wait() sleeps until then; Test() says
// whether that time has passed. On CUDA a kModel call first waits for the device's queued
// work, so its clock starts where the device reaches it.
// Not thread-safe, like every Communicator.
#pragma once

#include <ATen/core/Generator.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "executor/comm/communicator.h"
#include "executor/parallel/device_mesh.h"
#include "planner/cluster_spec.h"
#include "planner/cost/collective_time.h"

namespace meshplan {

// How long an emulated call takes: `meshplan run --emulated-comm`.
enum class EmulatedCommTime { kZero, kModel };
const char* ToString(EmulatedCommTime time);  // zero | model
// "zero" | "model" (any case); false for anything else.
bool ParseEmulatedCommTime(const std::string& text, EmulatedCommTime* time);
inline constexpr const char* kAllowedEmulatedCommTimes = "zero, model";

// Whose temporaries an emulated call holds: the backend a real run of the rank would use.
enum class EmulatedWorkspace { kNone, kGloo };

struct EmulatedCommOptions {
  EmulatedCommTime time = EmulatedCommTime::kZero;
  EmulatedWorkspace workspace = EmulatedWorkspace::kGloo;
  ClusterSpec cluster;  // kModel: the network the cost model times on
  CommGroup group;      // kModel: the group's placement (planner/cost/collective_time.h)
  uint64_t seed = 0;    // received values
};

class EmulatedCommunicator final : public Communicator {
 public:
  // 0 <= rank < size (std::invalid_argument otherwise); `name` names the group in errors.
  EmulatedCommunicator(std::string name, int size, int rank, EmulatedCommOptions options);

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::unique_ptr<CommHandle> AllReduceSumAsync(torch::Tensor& buffer) override;
  std::unique_ptr<CommHandle> ReduceScatterSumAsync(const torch::Tensor& input,
                                                    torch::Tensor& output) override;
  std::unique_ptr<CommHandle> AllGatherAsync(const torch::Tensor& input,
                                             torch::Tensor& output) override;
  std::unique_ptr<CommHandle> BroadcastAsync(torch::Tensor& buffer, int root) override;
  std::unique_ptr<CommHandle> SendAsync(const torch::Tensor& buffer, int dst) override;
  std::unique_ptr<CommHandle> RecvAsync(torch::Tensor& buffer, int src) override;
  std::unique_ptr<CommHandle> AllToAllAsync(const torch::Tensor& input,
                                            const std::vector<int64_t>& send_rows,
                                            torch::Tensor& output,
                                            const std::vector<int64_t>& recv_rows) override;
  void Barrier() override;

 private:
  using Clock = std::chrono::steady_clock;
  // When a call of `kind` on `bytes` issued now completes, advancing `clock` (kModel).
  Clock::time_point Schedule(CollectiveKind kind, double bytes, const torch::Tensor& on,
                             Clock::time_point& clock);
  std::unique_ptr<CommHandle> Handle(CollectiveKind kind, const torch::Tensor& on, double bytes,
                                     Clock::time_point& clock,
                                     std::vector<torch::Tensor> scratch = {});
  void FillReceived(torch::Tensor& buffer);

  std::string name_;
  int size_, rank_;
  EmulatedCommOptions options_;
  Clock::time_point busy_until_{}, send_busy_until_{};
  at::Generator cpu_generator_;
  at::Generator device_generator_;  // CUDA buffers (created on the first one)
};

// The DeviceMesh factory of an emulated rank: every group it is asked for is an
// EmulatedCommunicator with this rank's index among the members, placed (for kModel) as
// the plan places that group: one mesh dimension ("dp", "pp", "cp", "tp") or the weight
// replicas ("dp_cp"); the expert groups ("ep", "edp_cp") are timed as the dp and dp_cp
// groups they are carved from. An unknown group name throws std::invalid_argument.
GroupFactory EmulatedGroupFactory(const ParallelPlan& plan, int world_rank,
                                  EmulatedCommOptions options);

}  // namespace meshplan
