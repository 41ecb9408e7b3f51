// The network: tiers, transfers that take CollectiveTime() when alone, and bandwidth
// shared by transfers that overlap on one tier of one rank.
#include <catch2/catch.hpp>

#include "planner/config/config_loader.h"
#include "planner/cost/collective_time.h"
#include "sim_test_util.h"
#include "simulator/event_sim.h"
#include "simulator/network.h"
#include "simulator/simulate.h"

namespace meshplan {
namespace {

TEST_CASE("a transfer alone takes CollectiveTime() on the tier collective_time.h picks",
          "[simulator][network]") {
  const ClusterSpec cluster = LoadCluster("64xh100-ib");
  const auto kind = GENERATE(CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                             CollectiveKind::kAllGather, CollectiveKind::kRingExchange,
                             CollectiveKind::kSendRecv);
  CommGroup group;
  group.inner = GENERATE(GroupAxis{1, 8}, GroupAxis{8, 8}, GroupAxis{2, 4}, GroupAxis{1, 1});
  const double bytes = 123e6;
  const Transfer t = CollectiveTransfer(kind, bytes, group, 1, cluster);
  CHECK(AloneTime(t, cluster) == Approx(CollectiveTime(kind, bytes, group, cluster)).epsilon(1e-12));
  CHECK(&TierOf(cluster, t.tier) == &TierFor(group, cluster));
  const Transfer three = CollectiveTransfer(kind, bytes, group, 3, cluster);
  CHECK(AloneTime(three, cluster) ==
        Approx(3 * CollectiveTime(kind, bytes, group, cluster)).epsilon(1e-12));
}

TEST_CASE("a pipeline send uses the tier between the two ranks", "[simulator][network]") {
  const ClusterSpec cluster = LoadCluster("64xh100-ib");  // 8 GPUs per node
  CHECK(TierBetween(0, 4, cluster) == TierId::kIntraNode);
  CHECK(TierBetween(4, 8, cluster) == TierId::kInterNode);
  CHECK(TierBetween(8, 15, cluster) == TierId::kIntraNode);
  const Transfer t = SendTransfer(1e6, 4, 8, cluster);
  CHECK(AloneTime(t, cluster) == Approx(cluster.inter_node.latency_s +
                                        1e6 / cluster.inter_node.bus_bandwidth_Bps()).epsilon(1e-12));
}

TEST_CASE("a shared link splits its bandwidth equally between active flows",
          "[simulator][network]") {
  SharedLink link(100.0);  // bytes/s
  link.Add(1, 100, 0.0);
  CHECK(link.FinishTime(1) == Approx(1.0));
  link.Add(2, 100, 0.5);  // flow 1 has 50 left, now at 50 B/s each
  CHECK(link.FinishTime(1) == Approx(1.5));
  CHECK(link.FinishTime(2) == Approx(2.5));  // if nothing changed
  link.Remove(1, 1.5);  // flow 2 has moved 50 of its 100 bytes; alone now at 100 B/s
  CHECK(link.FinishTime(2) == Approx(2.0));
}

// A hand-made graph: one rank, a dp and a pp transfer of equal size with no dependencies,
// on the same tier or on different tiers.
StepGraph TwoTransfers(TierId dp_tier, TierId pp_tier, double bandwidth) {
  StepGraph g;
  g.ranks = 1;
  g.global_rank = {0};
  for (auto [stream, tier] : {std::pair{SimStream::kDp, dp_tier}, std::pair{SimStream::kPp, pp_tier}}) {
    SimOp op;
    op.stream = stream;
    op.kind = SimOpKind::kCollective;
    op.transfer = {tier, 0.0, 1000.0, 1000.0};
    g.ops.push_back(op);
  }
  g.pred_begin = {0, 0, 0};
  g.stream_begin.assign(kNumSimStreams + 1, 0);
  // Stream order: compute (none), dp: op 0, pp: op 1, cp, tp (none).
  g.stream_begin = {0, 0, 1, 2, 2, 2};
  g.stream_ops = {0, 1};
  g.link_bandwidth_Bps = {bandwidth, bandwidth};
  return g;
}

TEST_CASE("two transfers that overlap on one tier share its bandwidth", "[simulator][network]") {
  const double bandwidth = 100.0;
  const EventTrace apart = RunEvents(TwoTransfers(TierId::kIntraNode, TierId::kInterNode, bandwidth));
  CHECK(apart.end_s[0] == Approx(10.0));
  CHECK(apart.end_s[1] == Approx(10.0));
  const EventTrace shared = RunEvents(TwoTransfers(TierId::kInterNode, TierId::kInterNode, bandwidth));
  CHECK(shared.end_s[0] == Approx(20.0));
  CHECK(shared.end_s[1] == Approx(20.0));
}

TEST_CASE("DP traffic sharing NVLink with TP slows the step, on another tier it does not",
          "[simulator][network]") {
  // dp=2 x tp=2: on one node both use NVLink; on two nodes of 2 the dp all-reduce crosses
  // nodes. Equal bandwidths and latencies, so only the sharing differs.
  const ModelSpec model = test::TinyLlama(8);
  ParallelPlan plan;
  plan.dp = 2;
  plan.tp = 2;
  const TrainingSpec training = test::Training(2, 256);
  const ClusterSpec one_node = test::TestCluster(1, 4, 2e9, 2e9, 1e-6);
  const ClusterSpec two_nodes = test::TestCluster(2, 2, 2e9, 2e9, 1e-6);
  const SimResult shared = Simulate(model, one_node, training, plan, {.timeline = false});
  const SimResult apart = Simulate(model, two_nodes, training, plan, {.timeline = false});
  CHECK(shared.time.compute_s == Approx(apart.time.compute_s).epsilon(1e-12));
  CHECK(shared.time.total_s > apart.time.total_s * (1 + 1e-6));
  CHECK(shared.time.exposed_comm_s[MeshDim::kTp] > apart.time.exposed_comm_s[MeshDim::kTp]);
}

}  // namespace
}  // namespace meshplan
