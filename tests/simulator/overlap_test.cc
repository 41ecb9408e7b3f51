// Overlap of communication with compute: DDP's bucketed all-reduce behind the backward,
// CP's ring exchange behind the attention core, ZeRO-3's prefetched all-gathers.
#include <catch2/catch.hpp>

#include "planner/cost/collective_time.h"
#include "planner/cost/step_time.h"
#include "sim_test_util.h"
#include "simulator/event_sim.h"
#include "simulator/simulate.h"

namespace meshplan {
namespace {

struct DdpCase {
  double bucket_s = 0;    // one block's gradient all-reduce
  double backward_s = 0;  // one block's backward
  int64_t blocks = 0;
  SimResult sim;
  StepTimeBreakdown analytic;  // planner/cost/step_time.h on the same work
};

// dp=2, one micro-batch, equal blocks (no embedding / head / optimizer), no latency; the
// all-reduce of one block's gradients takes `ratio` times the block's backward. `slowdown`:
// the GPU's DP overlap slowdown (compute beside communication runs 1 + slowdown times
// longer), as dp_overlap_slowdown or, with `from_tp_figure`, through its fallback
// comm_overlap_slowdown.
DdpCase RunDdp(double ratio, double slowdown = 0, bool from_tp_figure = true) {
  const ModelSpec model = test::TinyLlama(8);
  ParallelPlan plan;
  plan.dp = 2;
  const TrainingSpec training = test::Training(2);
  const StepWork work = test::EqualStages(BuildStepWork(model, training, plan));
  const ComputeRates rates = RatesFor(test::TestGpu(), training.precision);
  DdpCase c;
  c.blocks = work.stage_layers.middle;
  c.backward_s = TimeOf(work.block.backward_input, rates).total() +
                 TimeOf(work.block.backward_weight, rates).total();
  const Collective* bucket = nullptr;
  for (const Collective& col : work.block.collectives)
    if (col.dim == MeshDim::kDp) bucket = &col;
  REQUIRE(bucket != nullptr);
  REQUIRE(bucket->kind == CollectiveKind::kAllReduce);
  // A ring all-reduce over 2 ranks sends the buffer once: time = bytes / bandwidth.
  const double bandwidth = bucket->bytes / (ratio * c.backward_s);
  ClusterSpec cluster = test::TestCluster(1, 2, bandwidth, bandwidth, 0);
  if (from_tp_figure) {
    cluster.gpu.comm_overlap_slowdown = slowdown;
  } else {
    cluster.gpu.dp_overlap_slowdown = slowdown;
    cluster.gpu.comm_overlap_slowdown = 0.7;  // the TP figure: nothing here overlaps TP
  }
  c.bucket_s = CollectiveTime(bucket->kind, bucket->bytes, bucket->group, cluster);
  REQUIRE(c.bucket_s == Approx(ratio * c.backward_s).epsilon(1e-12));
  c.sim = SimulateWork(work, model, cluster, training.precision, {.timeline = false});
  c.analytic = AnalyticStepTime(work, cluster, training.precision);
  return c;
}

TEST_CASE("a DP all-reduce shorter than the backward it hides behind adds only its tail",
          "[simulator][overlap][dp]") {
  const double ratio = GENERATE(0.1, 0.5, 0.99);
  const DdpCase c = RunDdp(ratio);
  // Each bucket finishes while the next block computes; only the last one shows.
  CHECK(c.sim.time.exposed_comm_s[MeshDim::kDp] == Approx(c.bucket_s).epsilon(1e-9));
  CHECK(c.sim.time.total_s == Approx(c.sim.time.compute_s + c.bucket_s).epsilon(1e-9));
}

TEST_CASE("a DP all-reduce longer than the backward shows as exposed time equal to the excess",
          "[simulator][overlap][dp]") {
  const double ratio = GENERATE(1.5, 3.0);
  const DdpCase c = RunDdp(ratio);
  // The buckets queue on the dp stream from the end of the first block's backward on:
  // exposed = all communication - the backward it overlaps (every block but the first).
  const double n = static_cast<double>(c.blocks);
  const double excess = n * c.bucket_s - (n - 1) * c.backward_s;
  CHECK(c.sim.time.exposed_comm_s[MeshDim::kDp] == Approx(excess).epsilon(1e-9));
  CHECK(c.sim.time.total_s == Approx(c.sim.time.compute_s + excess).epsilon(1e-9));
}

TEST_CASE("compute beside a DP all-reduce runs (1 + slowdown) times slower, in both models",
          "[simulator][overlap][dp]") {
  // Each bucket but the last runs beside the next block's backward: for bucket_s of wall
  // time that backward computes at 1 / (1 + s) speed, so it ends bucket_s * s / (1 + s) later.
  const double s = GENERATE(0.15, 0.5);
  const double ratio = GENERATE(0.1, 0.5);
  const bool from_tp_figure = GENERATE(true, false);
  const DdpCase c = RunDdp(ratio, s, from_tp_figure);
  const double n = static_cast<double>(c.blocks);
  const double slowed = (n - 1) * c.bucket_s * s / (1 + s);
  CHECK(c.sim.time.total_s == Approx(c.analytic.compute_s + c.bucket_s + slowed).epsilon(1e-9));
  CHECK(c.sim.time.compute_s == Approx(c.analytic.compute_s + slowed).epsilon(1e-9));
  CHECK(c.analytic.overlap_slowdown_s == Approx(slowed).epsilon(1e-9));
  CHECK(c.analytic.total_s == Approx(c.sim.time.total_s).epsilon(1e-9));
}

TEST_CASE("a DP all-reduce that outlasts the slowed backward hides the slowdown, in both models",
          "[simulator][overlap][dp]") {
  // The dp stream is busy from the first block's end to the step's: the backward runs slower
  // beside it but still ends first, so the step is the communication's, as without slowdown.
  const double ratio = 3.0, s = 0.5;  // 3 > 1 + s
  const DdpCase slow = RunDdp(ratio, s), free = RunDdp(ratio, 0);
  CHECK(slow.sim.time.total_s == Approx(free.sim.time.total_s).epsilon(1e-9));
  CHECK(slow.analytic.total_s == Approx(free.analytic.total_s).epsilon(1e-9));
  CHECK(slow.analytic.overlap_slowdown_s == 0);
}

// cp=2, one micro-batch, equal blocks: each attention core runs in 2 steps, the second
// waits for the one K/V exchange (backward: K/V and their gradients, twice the bytes).
SimResult RunRing(double bandwidth, double* expected_exposed) {
  const ModelSpec model = test::TinyLlama(4);
  ParallelPlan plan;
  plan.cp = 2;
  const TrainingSpec training = test::Training(1, 512);
  StepWork work = test::EqualStages(BuildStepWork(model, training, plan));
  // cp ranks hold the same weights, so their gradients sync over dp x cp, on the same
  // tier as the ring: drop that sync here to see the ring alone (no bandwidth sharing).
  PartWork& block = work.block;
  PartWork ring_only = block;
  ring_only.collectives.size = 0;
  for (const Collective& c : block.collectives)
    if (c.dim != MeshDim::kDp) ring_only.collectives.push_back(c);
  block = ring_only;
  const ClusterSpec cluster = test::TestCluster(1, 2, bandwidth, bandwidth, 0);
  const ComputeRates rates = RatesFor(cluster.gpu, training.precision);
  double exposed = 0;
  for (const Collective& c : work.block.collectives) {
    if (c.dim != MeshDim::kCp) continue;
    const double exchange = c.count * CollectiveTime(c.kind, c.bytes, c.group, cluster);
    const double core = c.phase == StepPhase::kForward
                            ? TimeOf(work.block.forward, rates).attention_s
                            : TimeOf(work.block.backward_input, rates).attention_s;
    exposed += std::max(0.0, exchange - core / 2);  // step 1 waits for the exchange
  }
  *expected_exposed = static_cast<double>(work.stage_layers.middle) * exposed;
  return SimulateWork(work, model, cluster, training.precision, {.timeline = false});
}

TEST_CASE("CP's ring exchange hides behind the previous chunk's attention",
          "[simulator][overlap][cp]") {
  double expected = 0;
  const SimResult fast = RunRing(1e13, &expected);
  CHECK(expected == 0);
  CHECK(fast.time.exposed_comm_s[MeshDim::kCp] == 0);
  const SimResult slow = RunRing(2e9, &expected);
  REQUIRE(expected > 0);
  CHECK(slow.time.exposed_comm_s[MeshDim::kCp] == Approx(expected).epsilon(1e-9));
}

TEST_CASE("ZeRO-3 prefetches the next part's all-gather behind the current part's compute",
          "[simulator][overlap][dp]") {
  const ModelSpec model = test::TinyLlama(8);
  ParallelPlan plan;
  plan.dp = 2;
  plan.zero_stage = 3;
  const TrainingSpec training = test::Training(2);
  const StepWork work = test::EqualStages(BuildStepWork(model, training, plan));
  const ComputeRates rates = RatesFor(test::TestGpu(), training.precision);
  const double forward_s = TimeOf(work.block.forward, rates).total();
  const Collective* gather = nullptr;
  const Collective* scatter = nullptr;
  for (const Collective& c : work.block.collectives) {
    if (c.dim != MeshDim::kDp) continue;
    if (c.kind == CollectiveKind::kAllGather && c.phase == StepPhase::kForward) gather = &c;
    if (c.kind == CollectiveKind::kReduceScatter) scatter = &c;
  }
  REQUIRE(gather != nullptr);
  REQUIRE(scatter != nullptr);
  // An all-gather over 2 ranks sends half the buffer: make it a fifth of a block's forward
  // (the backward is longer and carries one gather and one reduce-scatter per block).
  const double bandwidth = gather->bytes / 2 / (0.2 * forward_s);
  const ClusterSpec cluster = test::TestCluster(1, 2, bandwidth, bandwidth, 0);
  const double gather_s = CollectiveTime(gather->kind, gather->bytes, gather->group, cluster);
  const double scatter_s = CollectiveTime(scatter->kind, scatter->bytes, scatter->group, cluster);
  REQUIRE(gather_s == Approx(0.2 * forward_s).epsilon(1e-12));

  const StepGraph graph = BuildStepGraphFromWork(work, model, cluster, training.precision);
  const EventTrace trace = RunEvents(graph);
  // After the first block the forward never waits: each block's attention starts when the
  // previous block's MLP ends (its gather ran during that block).
  double previous_end = -1;
  int blocks = 0;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const SimOp& op = graph.ops[i];
    if (op.kind != SimOpKind::kForward) continue;
    if (op.piece == SimPiece::kAttention && previous_end >= 0)
      CHECK(trace.start_s[i] == Approx(previous_end).epsilon(1e-12));
    if (op.piece == SimPiece::kMlp) previous_end = trace.end_s[i], ++blocks;
  }
  CHECK(blocks == 8);
  // Exposed: the step's first gather (nothing to hide behind) and the last part's
  // reduce-scatter (after the last backward); the backward's first gather was prefetched
  // during the last forward.
  const SimResult sim = SimulateGraph(graph, {.timeline = false});
  CHECK(sim.time.exposed_comm_s[MeshDim::kDp] == Approx(gather_s + scatter_s).epsilon(1e-9));
}

// ZeRO-1, dp=2, two micro-batches, equal blocks; each block's all-gather of its updated
// parameters takes a fifth of its forward. `next_forward`: the framework gathers them in the
// step's first forward (FrameworkSpec::param_gather), else after the optimizer.
struct ParamGatherCase {
  StepWork work;
  ClusterSpec cluster;
  double gather_s = 0;  // one block's all-gather
  StepGraph graph;
  EventTrace trace;
  SimResult sim;
  StepTimeBreakdown analytic;
};
ParamGatherCase RunParamGather(bool next_forward, bool dp_overlap = true) {
  const ModelSpec model = test::TinyLlama(8);
  ParallelPlan plan;
  plan.dp = 2;
  plan.zero_stage = 1;
  plan.dp_comm_overlap = dp_overlap;
  TrainingSpec training = test::Training(4);
  training.framework.param_gather =
      next_forward ? ParamGather::kNextForward : ParamGather::kAfterStep;
  ParamGatherCase c{.work = test::EqualStages(BuildStepWork(model, training, plan))};
  REQUIRE(c.work.micro_batches == 2);
  REQUIRE(c.work.param_gather_in_forward == next_forward);
  const ComputeRates rates = RatesFor(test::TestGpu(), training.precision);
  const double forward_s = TimeOf(c.work.block.forward, rates).total();
  const Collective* gather = nullptr;
  for (const Collective& col : c.work.block.collectives)
    if (col.dim == MeshDim::kDp && col.position == CollectivePosition::kAfterOptimizer)
      gather = &col;
  REQUIRE(gather != nullptr);
  const double bandwidth = gather->bytes / 2 / (0.2 * forward_s);
  c.cluster = test::TestCluster(1, 2, bandwidth, bandwidth, 0);
  c.gather_s = CollectiveTime(gather->kind, gather->bytes, gather->group, c.cluster);
  REQUIRE(c.gather_s == Approx(0.2 * forward_s).epsilon(1e-12));
  c.graph = BuildStepGraphFromWork(c.work, model, c.cluster, training.precision);
  c.trace = RunEvents(c.graph);
  c.sim = SimulateGraph(c.graph, {.timeline = false});
  c.analytic = AnalyticStepTime(c.work, c.cluster, training.precision);
  return c;
}

TEST_CASE("ZeRO-1 under param_gather next-forward gathers the updated parameters in the first "
          "forward, in both models",
          "[simulator][overlap][dp]") {
  const ParamGatherCase after = RunParamGather(false), next = RunParamGather(true);
  // Every all-gather of the updated parameters ends before the first backward starts, and
  // each block's first forward waits only for its own.
  double first_backward = 1e30;
  for (size_t i = 0; i < next.graph.ops.size(); ++i)
    if (next.graph.ops[i].kind == SimOpKind::kBackwardInput)
      first_backward = std::min(first_backward, next.trace.start_s[i]);
  int gathers = 0;
  for (size_t i = 0; i < next.graph.ops.size(); ++i) {
    const SimOp& op = next.graph.ops[i];
    if (op.position != CollectivePosition::kAfterOptimizer) continue;
    ++gathers;
    CHECK(op.microbatch == 0);
    CHECK(next.trace.end_s[i] <= first_backward);
  }
  CHECK(gathers == 8);  // one per block (EqualStages: no embedding or head)
  // Hidden but for what the first forward cannot cover: less exposed than after the step,
  // which shows every gather; the two models agree on the step.
  CHECK(next.sim.time.exposed_comm_s[MeshDim::kDp] <
        after.sim.time.exposed_comm_s[MeshDim::kDp] - 4 * next.gather_s);
  CHECK(next.analytic.exposed_comm_s[MeshDim::kDp] <
        after.analytic.exposed_comm_s[MeshDim::kDp] - 4 * next.gather_s);
  CHECK(next.sim.time.total_s == Approx(next.analytic.total_s).epsilon(0.02));
  CHECK(after.sim.time.total_s == Approx(after.analytic.total_s).epsilon(0.02));
  // dp_overlap=0: after the step, whatever the framework.
  const ParamGatherCase off_next = RunParamGather(true, false);
  const ParamGatherCase off_after = RunParamGather(false, false);
  CHECK(off_next.sim.time.total_s == Approx(off_after.sim.time.total_s).epsilon(1e-12));
  CHECK(off_next.analytic.total_s == Approx(off_after.analytic.total_s).epsilon(1e-12));
}

}  // namespace
}  // namespace meshplan
