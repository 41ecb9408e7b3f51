#include "planner/pipeline_schedule.h"

#include <algorithm>

namespace meshplan {

int64_t InterleavedWarmup(int64_t pp, int64_t v, int64_t m, int64_t stage) {
  const int64_t total = m * v;
  return m == pp ? total : std::min((pp - stage - 1) * 2 + (v - 1) * pp, total);
}

InterleavedCursor::InterleavedCursor(int64_t pp, int64_t v, PipelinePass pass)
    : pp_(pp), v_(v), backward_(pass != PipelinePass::kForward) {}

void InterleavedCursor::Next() {
  if (++slot_ < pp_) return;
  slot_ = 0;
  if (++chunk_ < v_) return;
  chunk_ = 0;
  ++round_;
}

namespace {

ScheduleItem Item(int64_t microbatch, int64_t chunk, PipelinePass pass) {
  return {static_cast<int32_t>(microbatch), static_cast<int32_t>(chunk), pass};
}

std::vector<ScheduleItem> GpipeOrder(int64_t m) {
  std::vector<ScheduleItem> order;
  order.reserve(2 * m);
  for (int64_t i = 0; i < m; ++i) order.push_back(Item(i, 0, PipelinePass::kForward));
  for (int64_t i = 0; i < m; ++i) order.push_back(Item(i, 0, PipelinePass::kBackward));
  return order;
}

std::vector<ScheduleItem> OneFOneBOrder(int64_t pp, int64_t m, int64_t stage) {
  const int64_t warmup = std::min(pp - stage - 1, m);
  std::vector<ScheduleItem> order;
  order.reserve(2 * m);
  for (int64_t i = 0; i < warmup; ++i) order.push_back(Item(i, 0, PipelinePass::kForward));
  for (int64_t i = 0; i < m - warmup; ++i) {
    order.push_back(Item(warmup + i, 0, PipelinePass::kForward));
    order.push_back(Item(i, 0, PipelinePass::kBackward));
  }
  for (int64_t i = m - warmup; i < m; ++i) order.push_back(Item(i, 0, PipelinePass::kBackward));
  return order;
}

std::vector<ScheduleItem> InterleavedOrder(int64_t pp, int64_t v, int64_t m, int64_t stage) {
  const int64_t total = m * v;
  const int64_t warmup = InterleavedWarmup(pp, v, m, stage);
  InterleavedCursor forward(pp, v, PipelinePass::kForward), backward(pp, v, PipelinePass::kBackward);
  std::vector<ScheduleItem> order;
  order.reserve(2 * total);
  auto take = [&](InterleavedCursor& cursor, PipelinePass pass) {
    order.push_back(Item(cursor.microbatch(), cursor.chunk(), pass));
    cursor.Next();
  };
  for (int64_t k = 0; k < warmup; ++k) take(forward, PipelinePass::kForward);
  for (int64_t i = 0; i < total - warmup; ++i) {
    take(forward, PipelinePass::kForward);
    take(backward, PipelinePass::kBackward);
  }
  for (int64_t k = total - warmup; k < total; ++k) take(backward, PipelinePass::kBackward);
  return order;
}

// ZB-H1: the 1f1b order with W(k) after B(k + stage) and the rest at the end.
std::vector<ScheduleItem> ZeroBubbleH1Order(int64_t pp, int64_t m, int64_t stage) {
  const std::vector<ScheduleItem> base = OneFOneBOrder(pp, m, stage);
  std::vector<ScheduleItem> order;
  order.reserve(3 * m);
  std::vector<ScheduleItem> backwards;
  size_t weights = 0;
  for (const ScheduleItem& item : base) {
    order.push_back(item);
    if (item.pass != PipelinePass::kBackward) continue;
    backwards.push_back(item);
    if (static_cast<int64_t>(backwards.size()) > stage) {
      ScheduleItem w = backwards[weights++];
      w.pass = PipelinePass::kWeight;
      order.push_back(w);
    }
  }
  for (; weights < backwards.size(); ++weights) {
    ScheduleItem w = backwards[weights];
    w.pass = PipelinePass::kWeight;
    order.push_back(w);
  }
  return order;
}

}  // namespace

std::vector<ScheduleItem> StageOrder(PipelineSchedule schedule, int64_t pp, int64_t v,
                                     int64_t m, int64_t stage) {
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return GpipeOrder(m);
    case PipelineSchedule::kInterleaved:
      if (v > 1) return InterleavedOrder(pp, v, m, stage);
      return OneFOneBOrder(pp, m, stage);
    case PipelineSchedule::k1F1B:
      return OneFOneBOrder(pp, m, stage);
    case PipelineSchedule::kZeroBubbleH1:
      return ZeroBubbleH1Order(pp, m, stage);
  }
  return OneFOneBOrder(pp, m, stage);
}

bool SplitsWeightGradients(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kZeroBubbleH1;
}

}  // namespace meshplan
