// Pipeline point-to-point: the activations and gradients that cross pipeline stages, over
// the pp Communicator (mesh.comm(MeshDim::kPp)), in an order both ends agree on.
//
// Virtual stage s (chunk s / pp of pp rank s % pp, planner/pipeline_schedule.h) sends its
// forward output (B,S,E) to virtual stage s+1 and, in its backward, the gradient of its
// input (B,S,E) to virtual stage s-1. A CHANNEL is an ordered pair of pp ranks
// (src -> dst); with the interleaved schedule one channel carries activations and
// gradients mixed (pp = 2: rank 0 -> rank 1 carries stage 0 -> 1 activations and stage
// 2 -> 1 gradients), and rank pp-1 -> rank 0 carries the chunk wrap-around.
//
// Ordering. The Communicator has no tags and NCCL (like Gloo with one tag) matches the
// send/recv pairs of a channel in issue order, so the k-th recv posted on a channel gets
// the k-th message sent on it. Every rank can compute every other rank's issue order
// from StageOrder(schedule, pp, v, m, sender) (SentMessages below: a forward of a stage
// that is not last sends, a backward of a stage that is not first sends). The receiver
// therefore posts its recvs on each channel in the SENDER's order: when a schedule item
// needs message X from rank p, it receives p's pending messages in p's order up to and
// including X, and stashes the earlier ones (they arrived "early": a later item of this
// rank needs them) until the item that needs them takes them. This never waits longer
// than the schedule itself: the sender issued those messages before X. For gpipe, 1f1b,
// interleaved and zb_h1 each channel is in fact consumed in its send order (tested for
// several (pp, v, m)), so the stash stays empty; it is there for any other order.
// NCCL note: this fixes the matching per channel, not progress across channels. A rank's
// sends and recvs to different peers must not be serialised on one blocking stream (NCCL
// sends rendezvous with their recv). executor/nccl_communicator.h queues point-to-point
// calls and launches them as one group when a handle is waited on, so each send goes out
// grouped with the recv that follows it (as Megatron's batch_isend_irecv does); its
// Test() never launches a queued send on its own. (Not run on GPUs yet: one GPU cannot
// hold two NCCL ranks.)
//
// Sends are asynchronous: each send's handle and tensor are kept until the send is
// complete. Reap() (called before every schedule item) drops the sends known to be done
// (CommHandle::Test) and FinishStep() waits for all of them at the end of the step, after
// this rank's last item, when every peer's matching recvs are posted or about to be.
//
// Memory (for the memory model), every message (B,S,E) in the activation dtype:
//   send buffer : the forward output of a chunk (an activation no stash keeps) or the
//                 input gradient dx of a chunk's backward, alive from the send until the
//                 receiver has posted the matching recv and the transfer is done (Gloo:
//                 detected at the next Reap after that, at the latest FinishStep).
//   recv buffer : allocated when received. An activation becomes the first block's input
//                 x (the BlockStash keeps it: no copy) until that micro-batch's backward
//                 of the chunk; a gradient is the dy of the chunk's last block, freed
//                 inside its backward. Early arrivals live in the stash in between.
// Not thread-safe (like the Communicator).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "executor/communicator.h"
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
