// Pipeline point-to-point: the activations and gradients that cross pipeline stages, over
// the pp Communicator (mesh.comm(MeshDim::kPp)), in an order both ends agree on.
// Virtual stage s sends its forward output (B,S,E) to virtual stage s+1 and, in its
// backward, the gradient of its input (B,S,E) to virtual stage s-1. The receiver posts its
// recvs on each channel (src -> dst pp rank) in the SENDER's issue order (SentMessages) and
// stashes messages that arrive before the item that needs them; this never waits longer
// than the schedule itself.
// Sends are asynchronous: each send's handle and tensor are kept until the send is
// complete; Reap() (before every schedule item) drops the finished ones, FinishStep() waits
// for all of them at the end of the step.
// Not thread-safe (like the Communicator).
// Channels, ordering, NCCL grouping, buffer lifetimes: docs/executor_internals.md#pipeline-p2p.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "executor/comm/communicator.h"
#include "planner/parallel_plan.h"
#include "planner/pipeline_schedule.h"

namespace meshplan {

enum class PipelineTensor : uint8_t { kActivation, kGradient };

struct PipelineMessage {
  PipelineTensor kind = PipelineTensor::kActivation;
  int32_t microbatch = 0;
  int32_t stage = 0;  // the RECEIVING virtual stage (the one that consumes it)
  int32_t src = 0;    // pp ranks
  int32_t dst = 0;
  bool operator==(const PipelineMessage&) const = default;
};

// The messages pp rank `rank` sends during one step, in issue order (all channels).
// v = 1 unless interleaved; m micro-batches.
std::vector<PipelineMessage> SentMessages(PipelineSchedule schedule, int64_t pp, int64_t v,
                                          int64_t m, int64_t rank);

// The chunk-boundary exchange of one rank for one step.
class PipelineChannels {
 public:
  // message_shape and options: of every message ((B,S,E) in the activation dtype).
  PipelineChannels(Communicator& pp, PipelineSchedule schedule, int64_t v, int64_t m,
                   std::vector<int64_t> message_shape, at::TensorOptions options);

  // Sends `tensor` as (kind, microbatch, to_stage) to the rank of virtual stage to_stage
  // (async; the tensor is kept until done). Must be this rank's next message in
  // SentMessages order (std::logic_error otherwise: the trainer left the schedule).
  void Send(PipelineTensor kind, int64_t microbatch, int64_t to_stage, at::Tensor tensor);
  // The message (kind, microbatch, stage) for this rank's virtual stage `stage`, from the
  // rank of stage-1 (activation) or stage+1 (gradient); blocks until it is here.
  at::Tensor Receive(PipelineTensor kind, int64_t microbatch, int64_t stage);
  // Drops the sends known to be complete.
  void Reap();
  // Waits for every send; checks that every expected message was received and sent.
  void FinishStep();

  // Bookkeeping for tests: the messages in the order this rank posted its recvs.
  const std::vector<PipelineMessage>& receive_log() const { return receive_log_; }
  int64_t sends_in_flight() const { return static_cast<int64_t>(sends_.size()); }

 private:
  using Key = std::tuple<int, int, int>;  // kind, micro-batch, stage
  static Key KeyOf(const PipelineMessage& m) {
    return {static_cast<int>(m.kind), m.microbatch, m.stage};
  }
  struct InFlightSend {
    std::unique_ptr<CommHandle> handle;
    at::Tensor tensor;
  };

  Communicator& pp_;
  int64_t v_;
  std::vector<int64_t> shape_;
  at::TensorOptions options_;
  std::vector<PipelineMessage> to_send_;                // this rank's, in issue order
  size_t sent_ = 0;
  std::vector<std::vector<PipelineMessage>> incoming_;  // per src rank, in its issue order
  std::vector<size_t> received_;                        // per src rank: how many posted
  std::map<Key, at::Tensor> early_;                     // received, not yet taken
  std::deque<InFlightSend> sends_;
  std::vector<PipelineMessage> receive_log_;
};

}  // namespace meshplan
