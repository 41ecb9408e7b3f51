// TimelineView: what the Timeline panel draws, a Gantt chart of one step.
//
// Streams (rows: "stage 0 compute", "stage 0 dp comm", ...) of time spans
// [start_s, end_s) with a label and a kind that picks the colour. Kept apart
// from the simulator's own types so the panel can be drawn and tested without
// it: gui/timeline_from_sim.cc converts the simulator's result into this.
#pragma once

#include <string>
#include <vector>

#include "planner/plan_cost.h"  // MeshDim

namespace meshplan {

enum class SpanKind { kCompute, kRecompute, kComm, kBubble, kOptimizer, kOther };

struct TimelineSpan {
  double start_s = 0;
  double end_s = 0;
  std::string label;  // "F3" (forward of micro-batch 3), "all-gather dp", ...
  SpanKind kind = SpanKind::kOther;
  MeshDim dim = MeshDim::kDp;  // kComm spans: which mesh dimension's communicator
};

struct TimelineStream {
  std::string name;
  std::vector<TimelineSpan> spans;  // sorted by start_s
};

struct TimelineView {
  std::vector<TimelineStream> streams;
  double end_s = 0;  // the step's length: the latest end_s over all spans
  std::string note;  // why it is empty, or where it came from ("simulated: ...")
};

}  // namespace meshplan
