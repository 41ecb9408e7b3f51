// One rank's pipeline-parallel step (pp > 1): the schedule's items in order (see
// trainer.h and executor/parallel/pipeline_p2p.h).
#include <cmath>
#include <map>
#include <stdexcept>
#include <utility>

#include "executor/trainer.h"
#include "planner/pipeline_schedule.h"

namespace meshplan {

StepLog Trainer::PipelineStep() {
  StepLog log;
  timer_.Start();
  const int64_t m = shard_.microbatches(), pp = plan_.pp, v = chunks_per_rank_;
  const int64_t rank = pp_.rank(), last = pp * v - 1;
  const double dloss = 1.0 / static_cast<double>(m);
  const ParamLayout& layout = engine_.layout();
  PipelineChannels channels(pp_, plan_.schedule, v, m, BoundaryShape(), activations_);
  std::map<std::pair<int32_t, int32_t>, MicroBatch> in_flight;  // (micro-batch, chunk)
  engine_.BeginStep(m);
  at::Tensor loss_sum = at::zeros({}, activations_.dtype(at::kDouble));  // last stage: on the device
  std::vector<std::pair<int64_t, at::Tensor>> losses;  // last stage, for a NaN's origin
  for (const ScheduleItem& item : StageOrder(plan_.schedule, pp, v, m, rank)) {
    if (item.pass == PipelinePass::kWeight) continue;  // zb_h1: W runs inside B
    channels.Reap();
    const int64_t stage = item.chunk * pp + rank;
    const ChunkGroups& chunk = layout.chunks[static_cast<size_t>(item.chunk)];
    const std::pair<int32_t, int32_t> key{item.microbatch, item.chunk};
    BeginPhase();
    if (item.pass == PipelinePass::kForward) {
      MicroBatch& mb = in_flight[key];
      LoadTokens(item.microbatch, stage == 0, stage == last, mb);
      at::Tensor x;
      if (stage > 0) x = channels.Receive(PipelineTensor::kActivation, item.microbatch, stage);
      at::Tensor loss;
      at::Tensor y = ForwardChunk(chunk, mb, std::move(x), &loss);
      if (stage == last) {
        loss_sum.add_(loss);
        losses.emplace_back(item.microbatch, loss);
      } else {
        channels.Send(PipelineTensor::kActivation, item.microbatch, stage + 1, std::move(y));
      }
      EndPhase("forward", log);
      continue;
    }
    auto it = in_flight.find(key);
    if (it == in_flight.end())
      throw std::logic_error("pipeline: backward of micro-batch " +
                             std::to_string(item.microbatch) + " before its forward");
    at::Tensor dy;
    if (stage < last) dy = channels.Receive(PipelineTensor::kGradient, item.microbatch, stage);
    at::Tensor dx = BackwardChunk(chunk, it->second, std::move(dy), dloss);
    in_flight.erase(it);
    engine_.EndBackward();
    if (stage > 0) channels.Send(PipelineTensor::kGradient, item.microbatch, stage - 1, std::move(dx));
    EndPhase("backward", log);
  }
  channels.FinishStep();
  // The global-batch loss: the last stage's mean over micro-batches, broadcast over pp from
  // the last pp rank, then averaged over dp x cp (equal token counts).
  const double local_sum = loss_sum.item<double>();
  if (!std::isfinite(local_sum)) log.first_nonfinite_microbatch = FirstNonFinite(losses);
  at::Tensor loss = at::full({1}, local_sum / static_cast<double>(m), at::kDouble);
  pp_.Broadcast(loss, static_cast<int>(pp - 1));
  Communicator& replicas = mesh_.weight_replicas();
  replicas.AllReduceSum(loss);
  log.loss = loss.item<double>() / static_cast<double>(replicas.size());
  engine_.Step();
  log.time_s = timer_.Stop();
  EndPhase("optimizer", log);
  log.step = ++step_;
  return log;
}

}  // namespace meshplan
