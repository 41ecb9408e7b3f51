// Pipeline activations and gradients over the pp communicator (see pipeline_p2p.h).
#include "executor/parallel/pipeline_p2p.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace meshplan {

namespace {

std::string Describe(PipelineTensor kind, int64_t microbatch, int64_t stage) {
  return std::string(kind == PipelineTensor::kActivation ? "activation" : "gradient") +
         " of micro-batch " + std::to_string(microbatch) + " for virtual stage " +
         std::to_string(stage);
}

}  // namespace

std::vector<PipelineMessage> SentMessages(PipelineSchedule schedule, int64_t pp, int64_t v,
                                          int64_t m, int64_t rank) {
  const int64_t last = pp * v - 1;
  std::vector<PipelineMessage> out;
  for (const ScheduleItem& item : StageOrder(schedule, pp, v, m, rank)) {
    const int64_t s = item.chunk * pp + rank;
    PipelineMessage msg;
    msg.microbatch = item.microbatch;
    msg.src = static_cast<int32_t>(rank);
    if (item.pass == PipelinePass::kForward && s < last) {
      msg.kind = PipelineTensor::kActivation;
      msg.stage = static_cast<int32_t>(s + 1);
    } else if (item.pass == PipelinePass::kBackward && s > 0) {
      msg.kind = PipelineTensor::kGradient;
      msg.stage = static_cast<int32_t>(s - 1);
    } else {
      continue;  // the last stage's forward, the first stage's backward, W passes
    }
    msg.dst = static_cast<int32_t>(msg.stage % pp);
    out.push_back(msg);
  }
  return out;
}

PipelineChannels::PipelineChannels(Communicator& pp, PipelineSchedule schedule, int64_t v,
                                   int64_t m, std::vector<int64_t> message_shape,
                                   at::TensorOptions options)
    : pp_(pp), v_(v), shape_(std::move(message_shape)), options_(options) {
  const int64_t n = pp.size(), me = pp.rank();
  to_send_ = SentMessages(schedule, n, v, m, me);
  incoming_.resize(static_cast<size_t>(n));
  received_.assign(static_cast<size_t>(n), 0);
  for (int64_t src = 0; src < n; ++src) {
    if (src == me) continue;
    for (const PipelineMessage& msg : SentMessages(schedule, n, v, m, src))
      if (msg.dst == me) incoming_[static_cast<size_t>(src)].push_back(msg);
  }
}

void PipelineChannels::Send(PipelineTensor kind, int64_t microbatch, int64_t to_stage,
                            at::Tensor tensor) {
  if (sent_ >= to_send_.size() || to_send_[sent_].kind != kind ||
      to_send_[sent_].microbatch != microbatch || to_send_[sent_].stage != to_stage)
    throw std::logic_error("pipeline: sending the " + Describe(kind, microbatch, to_stage) +
                           " out of the schedule's order");
  const int dst = to_send_[sent_].dst;
  ++sent_;
  if (!tensor.is_contiguous()) tensor = tensor.contiguous();
  InFlightSend send;
  send.handle = pp_.SendAsync(tensor, dst);
  send.tensor = std::move(tensor);
  sends_.push_back(std::move(send));
}

at::Tensor PipelineChannels::Receive(PipelineTensor kind, int64_t microbatch, int64_t stage) {
  const int64_t pp = pp_.size();
  const Key want{static_cast<int>(kind), static_cast<int>(microbatch), static_cast<int>(stage)};
  if (auto it = early_.find(want); it != early_.end()) {
    at::Tensor t = std::move(it->second);
    early_.erase(it);
    return t;
  }
  const int64_t from_stage = kind == PipelineTensor::kActivation ? stage - 1 : stage + 1;
  if (from_stage < 0 || from_stage >= pp * v_)
    throw std::logic_error("pipeline: no stage sends the " + Describe(kind, microbatch, stage));
  const size_t src = static_cast<size_t>(from_stage % pp);
  const std::vector<PipelineMessage>& expected = incoming_[src];
  // Receive src's messages in its issue order until the wanted one; stash the others.
  while (received_[src] < expected.size()) {
    const PipelineMessage& msg = expected[received_[src]++];
    at::Tensor buffer = at::empty(shape_, options_);
    pp_.RecvAsync(buffer, static_cast<int>(src))->Wait();
    receive_log_.push_back(msg);
    if (KeyOf(msg) == want) return buffer;
    early_.emplace(KeyOf(msg), std::move(buffer));
  }
  throw std::logic_error("pipeline: rank " + std::to_string(src) + " never sends the " +
                         Describe(kind, microbatch, stage) + " in this schedule");
}

void PipelineChannels::Reap() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->handle->Test()) it = sends_.erase(it);
    else ++it;
  }
}

void PipelineChannels::FinishStep() {
  for (InFlightSend& send : sends_) send.handle->Wait();
  sends_.clear();
  if (sent_ != to_send_.size())
    throw std::logic_error("pipeline: " + std::to_string(to_send_.size() - sent_) +
                           " messages of the schedule were not sent");
  for (size_t src = 0; src < incoming_.size(); ++src)
    if (received_[src] != incoming_[src].size())
      throw std::logic_error("pipeline: " + std::to_string(incoming_[src].size() - received_[src]) +
                             " messages from rank " + std::to_string(src) + " were not received");
  if (!early_.empty())
    throw std::logic_error("pipeline: " + std::to_string(early_.size()) +
                           " received messages were never used");
}

}  // namespace meshplan
