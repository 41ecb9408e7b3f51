#include "simulator/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "planner/limits.h"
#include "simulator/event_sim.h"

namespace meshplan {
namespace {

const char* PartName(SimPart part) {
  switch (part) {
    case SimPart::kEmbedding: return "embedding";
    case SimPart::kHead: return "head";
    case SimPart::kBlock: return "block";
    case SimPart::kStage: return "stage";
  }
  return "?";
}

// Appends " mb3" (per-micro-batch ops) and " L17" / " embedding" / " head".
void AppendWhere(const SimOp& op, fmt::memory_buffer& out) {
  if (op.microbatch >= 0) fmt::format_to(std::back_inserter(out), " mb{}", op.microbatch);
  if (op.part == SimPart::kBlock && op.layer >= 0) fmt::format_to(std::back_inserter(out), " L{}", op.layer);
  else fmt::format_to(std::back_inserter(out), " {}", PartName(op.part));
}

// Charges the idle interval [a, b] of a compute stream to what it waited for, starting
// from op `waited` (the op whose end let the compute stream go on): see simulate.h.
void ChargeWait(const StepGraph& g, const EventTrace& trace, int32_t rank, double a, double b,
                int32_t waited, StepTimeBreakdown* out) {
  while (b > a && waited >= 0) {
    const SimOp& op = g.ops[waited];
    if (op.is_compute()) break;  // another stage's compute (or unexplained): bubble
    const double start = trace.start_s[waited], end = trace.end_s[waited];
    const double hi = std::min(b, end), lo = std::max(a, start);
    if (hi < b) out->bubble_s += b - std::max(hi, a);  // not covered by the op (should not happen)
    if (hi > lo) out->exposed_comm_s[DimOf(op.stream)] += hi - lo;
    b = std::min(b, lo);
    waited = trace.enabler[waited];
  }
  if (b > a) out->bubble_s += b - a;
}

// What each rank ran, by op index: its compute ops and the op that ended last.
struct RankOps {
  std::vector<std::vector<int32_t>> compute;
  std::vector<int32_t> last_op;
};

// Per rank, from the trace: when its last op ends (the stage's total_s) and each stream's
// busy time, filled into `stages`; returns the ops each rank ran.
RankOps ReadRanks(const StepGraph& g, const EventTrace& trace, std::vector<SimStage>& stages) {
  std::vector<std::vector<int32_t>> compute(g.ranks);
  std::vector<int32_t> last_op(g.ranks, -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const SimOp& op = g.ops[i];
    SimStage& st = stages[op.rank];
    const double d = trace.end_s[i] - trace.start_s[i];
    st.streams[static_cast<int>(op.stream)].busy_s += d;
    if (trace.end_s[i] > st.time.total_s || last_op[op.rank] < 0) {
      st.time.total_s = std::max(st.time.total_s, trace.end_s[i]);
      last_op[op.rank] = static_cast<int32_t>(i);
    }
    if (op.is_compute()) compute[op.rank].push_back(static_cast<int32_t>(i));
  }
  return {std::move(compute), std::move(last_op)};
}

// Splits rank r's time (t->total_s is set) into compute, recompute and optimizer time,
// walking its compute ops in the order they ran; each idle gap before one, and the tail
// after the last, is charged to what it waited for (ChargeWait).
void SplitStageTime(const StepGraph& g, const EventTrace& trace, int64_t r,
                    std::vector<int32_t>& compute_ops, int32_t last_op, StepTimeBreakdown* t) {
  std::sort(compute_ops.begin(), compute_ops.end(), [&](int32_t a, int32_t b) {
    return trace.start_s[a] < trace.start_s[b] || (trace.start_s[a] == trace.start_s[b] && a < b);
  });
  const int32_t rank = static_cast<int32_t>(r);
  double cursor = 0;
  for (int32_t id : compute_ops) {
    const SimOp& op = g.ops[id];
    const double start = trace.start_s[id], d = trace.end_s[id] - start;
    if (start > cursor) ChargeWait(g, trace, rank, cursor, start, trace.enabler[id], t);
    cursor = std::max(cursor, trace.end_s[id]);
    if (op.kind == SimOpKind::kOptimizer) t->optimizer_s += d;
    else t->compute_s += d;
    if (op.kind == SimOpKind::kRecompute) t->recompute_s += d;
  }
  if (t->total_s > cursor)  // the tail: communication still running after the last op
    ChargeWait(g, trace, rank, cursor, t->total_s, last_op, t);
}

// The first stage whose end is the step's end.
int64_t SlowestStage(const std::vector<SimStage>& stages, double step_s) {
  for (size_t r = 0; r < stages.size(); ++r)
    if (stages[r].time.total_s >= step_s) return static_cast<int64_t>(r);
  return 0;
}

// Op i as it ran, for the timeline.
SimSpan SpanOf(const SimOp& op, const EventTrace& trace, size_t i) {
  SimSpan s;
  s.stage = op.rank;
  s.stream = op.stream;
  s.kind = op.kind;
  s.label = DescribeOp(op);
  s.start_s = trace.start_s[i];
  s.end_s = trace.end_s[i];
  s.microbatch = op.microbatch;
  s.chunk = op.chunk;
  s.layer = op.layer;
  if (!op.is_compute()) {
    s.bytes = op.transfer.bytes;
    s.buffer_bytes = op.buffer_bytes;
    s.tier = op.transfer.tier;
  }
  s.flops = op.flops;
  return s;
}

}  // namespace

std::vector<std::string> NotSimulated(const ParallelPlan& plan) {
  std::vector<std::string> out;
  if (plan.offload_optimizer) out.push_back("offload_opt=1");
  if (plan.offload_activations) out.push_back("offload_act=1");
  if (plan.offload_params) out.push_back("offload_params=1");
  return out;
}

std::string DescribeOp(const SimOp& op) {
  fmt::memory_buffer out;
  auto it = std::back_inserter(out);
  switch (op.kind) {
    case SimOpKind::kForward:
    case SimOpKind::kBackward:
    case SimOpKind::kBackwardInput:
    case SimOpKind::kBackwardWeight:
    case SimOpKind::kRecompute:
      fmt::format_to(it, "{}", op.kind == SimOpKind::kForward          ? "F"
                               : op.kind == SimOpKind::kBackward       ? "B"
                               : op.kind == SimOpKind::kBackwardInput  ? "B(input)"
                               : op.kind == SimOpKind::kBackwardWeight ? "W"
                                                                       : "R");
      AppendWhere(op, out);
      if (op.piece == SimPiece::kAttention) fmt::format_to(it, " attention");
      if (op.piece == SimPiece::kMlp) fmt::format_to(it, " mlp");
      if (op.piece == SimPiece::kAttentionCore) fmt::format_to(it, " attention core {}", op.step);
      break;
    case SimOpKind::kOptimizer:
      fmt::format_to(it, "optimizer");
      AppendWhere(op, out);
      break;
    case SimOpKind::kSendRecv:
      fmt::format_to(it, "send {}", op.phase == StepPhase::kForward ? "activation" : "gradient");
      if (op.microbatch >= 0) fmt::format_to(it, " mb{}", op.microbatch);
      fmt::format_to(it, " chunk {}", op.chunk);
      break;
    case SimOpKind::kCollective:
      fmt::format_to(it, "{} {} {}", ToString(DimOf(op.stream)), ToString(op.collective),
                     ToString(op.position));
      AppendWhere(op, out);
      if (op.collective == CollectiveKind::kRingExchange) fmt::format_to(it, " step {}", op.step);
      else if (op.step > 1) fmt::format_to(it, " x{}", op.step);
      break;
  }
  return fmt::to_string(out);
}

// Run the events -> read each rank's end and stream use -> split each stage's time ->
// pick the slowest stage -> (optionally) the timeline.
SimResult SimulateGraph(const StepGraph& g, const SimOptions& options) {
  if (options.timeline && static_cast<int64_t>(g.ops.size()) > kMaxTraceOps)
    throw SimulationTooLarge(fmt::format(
        "a timeline of this step has {} ops; expected at most {} (kMaxTraceOps, docs/limits.md)",
        g.ops.size(), kMaxTraceOps));
  const EventTrace trace = RunEvents(g);
  SimResult result;
  result.ops = static_cast<int64_t>(g.ops.size());
  result.events = trace.events;
  result.stages.resize(g.ranks);
  RankOps ops = ReadRanks(g, trace, result.stages);
  double step_s = 0;
  for (const SimStage& st : result.stages) step_s = std::max(step_s, st.time.total_s);

  for (int64_t r = 0; r < g.ranks; ++r) {
    SimStage& st = result.stages[r];
    st.stage = r;
    st.global_rank = g.global_rank[r];
    SplitStageTime(g, trace, r, ops.compute[r], ops.last_op[r], &st.time);
    for (StreamUse& use : st.streams) use.utilisation = step_s > 0 ? use.busy_s / step_s : 0;
  }
  result.slowest_stage = SlowestStage(result.stages, step_s);
  result.time = result.stages[result.slowest_stage].time;

  if (options.timeline) {
    result.timeline.reserve(g.ops.size());
    for (size_t i = 0; i < g.ops.size(); ++i) result.timeline.push_back(SpanOf(g.ops[i], trace, i));
  }
  return result;
}

SimResult SimulateWork(const StepWork& work, const ModelSpec& model, const ClusterSpec& cluster,
                       Precision precision, const SimOptions& options) {
  return SimulateGraph(BuildStepGraphFromWork(work, model, cluster, precision), options);
}

SimResult Simulate(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
                   const ParallelPlan& plan, const SimOptions& options) {
  return SimulateGraph(BuildStepGraph(model, cluster, training, plan), options);
}

}  // namespace meshplan
