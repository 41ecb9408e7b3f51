#include "gui/timeline_source.h"

#include <algorithm>
#include <exception>
#include <fmt/format.h>

#include "simulator/simulate.h"

namespace meshplan {

namespace {

SpanKind KindOf(SimOpKind kind) {
  switch (kind) {
    case SimOpKind::kForward:
    case SimOpKind::kBackward:
    case SimOpKind::kBackwardInput:
    case SimOpKind::kBackwardWeight: return SpanKind::kCompute;
    case SimOpKind::kRecompute: return SpanKind::kRecompute;
    case SimOpKind::kOptimizer: return SpanKind::kOptimizer;
    case SimOpKind::kCollective:
    case SimOpKind::kSendRecv: return SpanKind::kComm;
  }
  return SpanKind::kOther;
}

}  // namespace

TimelineView SimulatedTimeline(const ModelSpec& model, const ClusterSpec& cluster,
                               const TrainingSpec& training, const ParallelPlan& plan) {
  TimelineView view;
  SimResult sim;
  try {
    sim = Simulate(model, cluster, training, plan);
  } catch (const std::exception& e) {
    view.note = std::string("The simulation failed: ") + e.what();
    return view;
  }
  // One row per (stage, stream) that ran something: stage-major, compute first.
  const int64_t stages = plan.pp;
  std::vector<TimelineStream> rows(static_cast<size_t>(stages) * kNumSimStreams);
  for (int64_t s = 0; s < stages; ++s)
    for (int k = 0; k < kNumSimStreams; ++k) {
      const auto stream = static_cast<SimStream>(k);
      const std::string what = stream == SimStream::kCompute
                                   ? "compute"
                                   : std::string(ToString(stream)) + " comm";
      rows[s * kNumSimStreams + k].name = stages > 1 ? fmt::format("stage {} {}", s, what) : what;
    }
  for (const SimSpan& span : sim.timeline) {
    TimelineSpan out;
    out.start_s = span.start_s;
    out.end_s = span.end_s;
    out.label = span.label;
    out.kind = KindOf(span.kind);
    if (span.stream != SimStream::kCompute) out.dim = DimOf(span.stream);
    rows[static_cast<size_t>(span.stage) * kNumSimStreams + static_cast<int>(span.stream)]
        .spans.push_back(std::move(out));
    view.end_s = std::max(view.end_s, span.end_s);
  }
  for (TimelineStream& row : rows) {
    if (row.spans.empty()) continue;
    std::stable_sort(row.spans.begin(), row.spans.end(),
                     [](const TimelineSpan& a, const TimelineSpan& b) { return a.start_s < b.start_s; });
    view.streams.push_back(std::move(row));
  }
  view.note = fmt::format("simulated step {:.3f} s (slowest stage {}), {} ops", sim.time.total_s,
                          sim.slowest_stage, sim.ops);
  return view;
}

}  // namespace meshplan
