// Simulate(): one training step of a plan played out in time, event by event.
//
// Builds the step graph (step_graph.h) from the cost model's StepWork, runs it
// (event_sim.h) and reads back:
//  * the step time: when the last op of the slowest pipeline stage ends;
//  * per stage the split of that time, in the cost model's names (StepTimeBreakdown):
//    compute_s (forward, backward, recompute on the compute stream; recompute_s of it),
//    optimizer_s, and the compute stream's idle time, each idle interval charged to
//    what it waited for: walking back from the op that ended the wait, the time a
//    communication op of dimension d was running counts as exposed_comm_s[d]
//    (pipeline send/recv and the tied-embedding sync as pp), the time before it goes
//    to what that op waited for in turn, and time spent waiting on another stage's
//    compute is bubble_s. So total_s = compute_s + exposed + bubble_s + optimizer_s;
//  * each stream's busy time and its share of the step (utilisation);
//  * optionally the timeline: one span per op (stage, stream, label, start, end).
// The analytic estimate (planner/cost/cost_model.h) and Simulate() time the same work with
// the same functions; where nothing overlaps and nothing is pipelined they agree to
// rounding (tests/simulator/agreement_test.cc).
// Reentrant; allocates the graph and the result, within the bounds of planner/limits.h:
// a step of more than kMaxSimOps ops, or a timeline of more than kMaxTraceOps, throws
// SimulationTooLarge (step_graph.h) instead.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/cost/step_work.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/training_spec.h"
#include "simulator/step_graph.h"

namespace meshplan {

struct SimOptions {
  bool timeline = true;  // fill SimResult::timeline (off for re-ranking many plans)
};

// One op as it ran.
struct SimSpan {
  int32_t stage = 0;
  SimStream stream = SimStream::kCompute;
  SimOpKind kind = SimOpKind::kForward;
  std::string label;    // DescribeOp(): "F mb3 L17 attention", "tp all_reduce after_mlp mb3 L17"
  double start_s = 0;
  double end_s = 0;
  int32_t microbatch = -1;  // -1 for per-step ops
  int32_t chunk = 0;
  int32_t layer = -1;       // global block index, -1 for other parts
  double bytes = 0;         // communication: bytes this rank sends
  double buffer_bytes = 0;  // communication: the buffer (planner/cost/collective_time.h convention)
  TierId tier = TierId::kIntraNode;  // communication: the network tier
  double flops = 0;         // compute: FLOPs
};

struct StreamUse {
  double busy_s = 0;
  double utilisation = 0;  // busy_s / step time
};

struct SimStage {
  int64_t stage = 0;
  int64_t global_rank = 0;  // the stage's first rank (its tp/cp/dp peers are symmetric)
  StepTimeBreakdown time;   // total_s: when this stage's last op ends
  std::array<StreamUse, kNumSimStreams> streams;  // indexed by SimStream
};

struct SimResult {
  StepTimeBreakdown time;     // of the slowest stage; time.total_s is the step time
  int64_t slowest_stage = 0;
  std::vector<SimStage> stages;
  std::vector<SimSpan> timeline;  // in op order (empty unless SimOptions::timeline)
  int64_t ops = 0;
  int64_t events = 0;
};

// The plan must be valid (Validate() empty).
SimResult Simulate(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
                   const ParallelPlan& plan, const SimOptions& options = {});
// From an already built (possibly edited) StepWork; see BuildStepGraphFromWork.
SimResult SimulateWork(const StepWork& work, const ModelSpec& model, const ClusterSpec& cluster,
                       Precision precision, const SimOptions& options = {});
// A graph already built.
SimResult SimulateGraph(const StepGraph& graph, const SimOptions& options = {});

// The plan's choices the simulation does not draw (step_graph.h: the offloads), as plan
// keys ("offload_opt=1"); the simulated step runs the plan as if they were off.
std::vector<std::string> NotSimulated(const ParallelPlan& plan);

// The label of one op in a timeline or trace: "F mb3 L17 attention", "W mb0 L5",
// "tp all_reduce after_mlp mb3 L17", "send activation mb3 chunk 1", "optimizer L17".
std::string DescribeOp(const SimOp& op);

}  // namespace meshplan
