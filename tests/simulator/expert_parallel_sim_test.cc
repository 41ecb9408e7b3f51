// Expert parallelism in the simulator: the dispatch and combine all-to-alls appear on the
// timeline, on the ep stream and their network tier, on the critical path between the
// router and the experts (nothing overlaps them), and the simulated step agrees with the
// analytic one where nothing is pipelined.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "planner/cost/cost_model.h"
#include "sim_test_util.h"
#include "simulator/simulate.h"
#include "simulator/step_graph.h"

namespace meshplan {
namespace {

// TinyLlama with 8 routed experts, top-2, dropless.
ModelSpec TinyMoe() {
  ModelSpec m = test::TinyLlama(4);
  m.name = "tiny-moe";
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 256;
  return m;
}

// Communication spans carry no pass; the label names the exchange.
struct A2a {
  int dispatch = 0, combine = 0, other_stream = 0, inter = 0, intra = 0;
};

A2a CountAllToAlls(const SimResult& r) {
  A2a n;
  for (const SimSpan& s : r.timeline) {
    if (s.label.find("all_to_all") == std::string::npos) continue;
    if (s.stream != SimStream::kEp) ++n.other_stream;
    (s.label.find("expert_dispatch") != std::string::npos ? n.dispatch : n.combine) += 1;
    (s.tier == TierId::kInterNode ? n.inter : n.intra) += 1;
  }
  return n;
}

TEST_CASE("the all-to-alls are on the timeline, on the ep stream, 4 per block and micro-batch",
          "[simulator][moe][ep]") {
  const ModelSpec m = TinyMoe();
  const TrainingSpec t = test::Training(8, 128);
  const ClusterSpec c = test::TestCluster(2, 4, 3e11, 2.5e10, 3e-6);
  const ParallelPlan inside = ParsePlanString("dp=8,ep=4");  // ranks 0-3: one node
  REQUIRE(Validate(inside, m, t, 8).empty());
  const SimResult r = Simulate(m, c, t, inside);
  const A2a n = CountAllToAlls(r);
  // 4 blocks x 1 micro-batch: a dispatch and a combine, forward and backward.
  CHECK(n.dispatch == 4 * 2);
  CHECK(n.combine == 4 * 2);
  CHECK(n.other_stream == 0);
  CHECK(n.intra == 16);
  CHECK(n.inter == 0);
  CHECK(r.time.exposed_comm_s[MeshDim::kEp] > 0);

  const ParallelPlan across = ParsePlanString("dp=8,ep=8");  // two nodes
  const SimResult x = Simulate(m, c, t, across);
  CHECK(CountAllToAlls(x).inter == 16);
  CHECK(x.time.exposed_comm_s[MeshDim::kEp] > r.time.exposed_comm_s[MeshDim::kEp]);

  // ep = 1: no exchange.
  const A2a none = CountAllToAlls(Simulate(m, c, t, ParsePlanString("dp=8")));
  CHECK(none.dispatch + none.combine == 0);
}

TEST_CASE("a dispatch sits between the attention and the experts, the combine after them",
          "[simulator][moe][ep]") {
  const ModelSpec m = TinyMoe();
  const TrainingSpec t = test::Training(8, 128);
  const ClusterSpec c = test::TestCluster(1, 8, 3e11, 2.5e10, 3e-6);
  const SimResult r = Simulate(m, c, t, ParsePlanString("dp=8,ep=8"));
  // In the first block's forward: attention ends <= dispatch starts; dispatch ends <= MLP
  // starts; MLP ends <= combine starts (no overlap: on the data path). The forward's
  // exchanges are the first of their kind for block 0, micro-batch 0.
  double attention_end = -1, dispatch_start = -1, dispatch_end = -1, mlp_start = -1,
         mlp_end = -1, combine_start = -1;
  auto first = [](double& start, double candidate) {
    if (start < 0 || candidate < start) start = candidate;
  };
  for (const SimSpan& s : r.timeline) {
    if (s.layer != 0 || s.microbatch != 0) continue;
    if (s.kind == SimOpKind::kForward && s.stream == SimStream::kCompute &&
        s.label.find("attention") != std::string::npos)
      attention_end = std::max(attention_end, s.end_s);
    if (s.kind == SimOpKind::kForward && s.stream == SimStream::kCompute &&
        s.label.find("mlp") != std::string::npos)
      mlp_start = s.start_s, mlp_end = s.end_s;
    if (s.label.find("all_to_all expert_dispatch") != std::string::npos) {
      if (dispatch_start < 0 || s.start_s < dispatch_start) dispatch_end = s.end_s;
      first(dispatch_start, s.start_s);
    }
    if (s.label.find("all_to_all expert_combine") != std::string::npos)
      first(combine_start, s.start_s);
  }
  INFO(attention_end << " " << dispatch_start << " " << dispatch_end << " " << mlp_start << " "
                     << mlp_end << " " << combine_start);
  REQUIRE(dispatch_start >= 0);
  REQUIRE(combine_start >= 0);
  REQUIRE(mlp_start >= 0);
  CHECK(attention_end <= dispatch_start);
  CHECK(dispatch_end <= mlp_start);
  CHECK(mlp_end <= combine_start);
}

// The analytic model times each all-to-all alone on its tier; the simulator shares the link
// with the gradient all-reduces running beside the backward, so it can only be slower.
TEST_CASE("simulated ep time is the analytic one, or slower where links are shared",
          "[simulator][moe][ep]") {
  const ModelSpec m = TinyMoe();
  const TrainingSpec t = test::Training(8, 128);
  const ClusterSpec c = test::TestCluster(2, 4, 3e11, 2.5e10, 3e-6);
  const ParallelPlan p = ParsePlanString("dp=8,ep=8");
  const PlanCost analytic = Estimate(m, c, t, p);
  const SimResult sim = Simulate(m, c, t, p);
  const double a = analytic.time.exposed_comm_s[MeshDim::kEp];
  const double s = sim.time.exposed_comm_s[MeshDim::kEp];
  CHECK(a > 0);
  CHECK(s >= a * (1 - 1e-6));
  CHECK(s <= 2 * a);
}

// With ep > 1 and more replicas than ep, a MoE block syncs its dense weights over dp x cp and
// its routed experts over dp/ep: two groups, so two parameter gathers per block, both issued.
TEST_CASE("a MoE block's dense and expert parameter gathers are both issued (ZeRO-3, and "
          "ZeRO-1 gathering in the next forward)",
          "[simulator][moe][ep][dp]") {
  const ModelSpec m = TinyMoe();
  const ClusterSpec c = test::TestCluster(2, 4, 3e11, 2.5e10, 3e-6);
  for (const char* plan_text : {"dp=8,ep=2,zero=3", "dp=8,ep=2,zero=1"}) {
    INFO(plan_text);
    TrainingSpec t = test::Training(16, 128);
    t.framework.param_gather = ParamGather::kNextForward;
    const ParallelPlan plan = ParsePlanString(plan_text);
    REQUIRE(Validate(plan, m, t, 8).empty());
    const StepWork work = BuildStepWork(m, t, plan);
    const CollectivePosition at = plan.zero_stage == 3 ? CollectivePosition::kBeforePart
                                                       : CollectivePosition::kAfterOptimizer;
    int per_block = 0;  // the block's gathers of one forward
    for (const Collective& col : work.block.collectives)
      if (col.dim == MeshDim::kDp && col.position == at && col.phase != StepPhase::kBackward &&
          col.group.size() > 1)
        ++per_block;
    REQUIRE(per_block == 2);
    const StepGraph graph = BuildStepGraphFromWork(work, m, c, t.precision);
    int issued = 0;  // the blocks' gathers before micro-batch 0's forward
    for (const SimOp& op : graph.ops)
      if (op.part == SimPart::kBlock && op.position == at && op.microbatch == 0 &&
          op.phase != StepPhase::kBackward)
        ++issued;
    CHECK(issued == per_block * static_cast<int>(m.layers));
  }
}

}  // namespace
}  // namespace meshplan
