// Ring collectives: bytes per rank, steps, network tier of each mesh dimension's group.
#include <catch2/catch.hpp>

#include "planner/cost/collective_time.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::H100Cluster;

ParallelPlan Plan(int64_t dp, int64_t tp, int64_t pp = 1, int64_t cp = 1) {
  ParallelPlan p;
  p.dp = dp;
  p.tp = tp;
  p.pp = pp;
  p.cp = cp;
  return p;
}

TEST_CASE("ring factors: all-reduce 2(n-1)/n, reduce-scatter and all-gather (n-1)/n",
          "[planner][collective]") {
  const int64_t n = GENERATE(2, 4, 8, 64);
  const double share = double(n - 1) / double(n);
  CHECK(RingFactor(CollectiveKind::kAllReduce, n) == Approx(2 * share));
  CHECK(RingFactor(CollectiveKind::kReduceScatter, n) == Approx(share));
  CHECK(RingFactor(CollectiveKind::kAllGather, n) == Approx(share));
  CHECK(RingFactor(CollectiveKind::kRingExchange, n) == Approx(share));
  CHECK(RingFactor(CollectiveKind::kSendRecv, n) == 1);
  // An all-reduce is a reduce-scatter followed by an all-gather.
  CHECK(BytesSentPerRank(CollectiveKind::kAllReduce, 1e9, n) ==
        Approx(BytesSentPerRank(CollectiveKind::kReduceScatter, 1e9, n) +
               BytesSentPerRank(CollectiveKind::kAllGather, 1e9, n)));
  CHECK(RingSteps(CollectiveKind::kAllReduce, n) == 2 * (n - 1));
  CHECK(RingSteps(CollectiveKind::kAllGather, n) == n - 1);
  CHECK(RingSteps(CollectiveKind::kSendRecv, n) == 1);
}

TEST_CASE("a group of one moves nothing and takes no time", "[planner][collective]") {
  CHECK(RingFactor(CollectiveKind::kAllReduce, 1) == 0);
  CHECK(RingSteps(CollectiveKind::kAllReduce, 1) == 0);
  CHECK(CollectiveTime(CollectiveKind::kAllReduce, 1e9, MeshGroup(Plan(1, 1), MeshDim::kTp),
                       H100Cluster(1)) == 0);
}

TEST_CASE("time is steps * latency + bytes / bandwidth of the tier", "[planner][collective]") {
  const ClusterSpec c = H100Cluster(2);
  const ParallelPlan p = Plan(2, 8);
  // tp=8 inside a node of 8: NVLink.
  const double tp = CollectiveTime(CollectiveKind::kAllReduce, 64e6, MeshGroup(p, MeshDim::kTp), c);
  CHECK(tp == Approx(14 * 3e-6 + 2.0 * 7 / 8 * 64e6 / 450e9));
  // dp=2 across the two nodes: InfiniBand.
  const double dp = CollectiveTime(CollectiveKind::kAllGather, 1e9, MeshGroup(p, MeshDim::kDp), c);
  CHECK(dp == Approx(1 * 6e-6 + 0.5 * 1e9 / 50e9));
}

TEST_CASE("tier follows the rank layout: tp innermost, dp outermost", "[planner][collective]") {
  const ClusterSpec c = H100Cluster(2);  // 2 nodes x 8 GPUs
  {
    const ParallelPlan p = Plan(2, 8);
    CHECK(&TierFor(MeshGroup(p, MeshDim::kTp), c) == &c.intra_node);
    CHECK(&TierFor(MeshGroup(p, MeshDim::kDp), c) == &c.inter_node);
  }
  {
    const ParallelPlan p = Plan(4, 4);  // dp stride 4, 4 members: spans 16 ranks
    CHECK(&TierFor(MeshGroup(p, MeshDim::kTp), c) == &c.intra_node);
    CHECK(&TierFor(MeshGroup(p, MeshDim::kDp), c) == &c.inter_node);
  }
  {
    const ParallelPlan p = Plan(1, 4, 4, 1);  // pp stride 4 x 4 stages: crosses nodes
    CHECK(&TierFor(MeshGroup(p, MeshDim::kPp), c) == &c.inter_node);
    const ParallelPlan q = Plan(2, 4, 1, 2);  // cp stride 4 x 2 = 8: one node
    CHECK(&TierFor(MeshGroup(q, MeshDim::kCp), c) == &c.intra_node);
  }
  // A tp group that does not divide the node straddles a node boundary somewhere.
  CHECK_FALSE(StaysInNode(MeshGroup(Plan(1, 3), MeshDim::kTp), 8));
  // On a single node everything is intra-node.
  const ClusterSpec one = H100Cluster(1, 16);
  CHECK(&TierFor(MeshGroup(Plan(16, 1), MeshDim::kDp), one) == &one.intra_node);
}

TEST_CASE("the dp x cp gradient group crosses nodes when either axis does", "[planner][collective]") {
  const ParallelPlan p = Plan(2, 1, 2, 2);  // ranks {0,1} x {0,4}: {0,1,4,5}
  const CommGroup g = DataParallelGroup(p);
  CHECK(g.size() == 4);
  CHECK(StaysInNode(g, 8));
  CHECK_FALSE(StaysInNode(g, 4));  // dp members 4 apart land in different 4-GPU nodes
}

}  // namespace
}  // namespace meshplan

namespace meshplan {
namespace {

TEST_CASE("NCCL's bus efficiency scales the bandwidth term only", "[planner][collective]") {
  ClusterSpec c = testing::H100Cluster(1);
  c.intra_node.bus_efficiency = 0.82;
  const CommGroup tp = MeshGroup(Plan(1, 8), MeshDim::kTp);
  CHECK(CollectiveTime(CollectiveKind::kAllReduce, 64e6, tp, c) ==
        Approx(14 * 3e-6 + 2.0 * 7 / 8 * 64e6 / (450e9 * 0.82)));
}

TEST_CASE("a group with several members per node goes hierarchical", "[planner][collective]") {
  // dp = 16 over 2 nodes of 8 (tp = 1): 8 members per node. The node's 8 GPUs reduce-scatter
  // over NVLink, each all-reduces its eighth across the 2 nodes on its own NIC, then all-gather.
  const ClusterSpec c = testing::H100Cluster(2);
  const CommGroup dp = MeshGroup(Plan(16, 1), MeshDim::kDp);
  CHECK(MembersPerNode(dp, 8) == 8);
  const double bytes = 1e9;
  const double intra = 7 * 3e-6 + 7.0 / 8 * bytes / 450e9;             // reduce-scatter, all-gather
  const double inter = 2 * 6e-6 + 2.0 * 1 / 2 * (bytes / 8) / 50e9;    // 2 ranks: ring
  CHECK(CollectiveTime(CollectiveKind::kAllReduce, bytes, dp, c) == Approx(2 * intra + inter));
  CHECK(CollectiveTime(CollectiveKind::kAllGather, bytes, dp, c) ==
        Approx(intra + 6e-6 + 0.5 * (bytes / 8) / 50e9));
  // Far below the flat ring over the NIC that every rank's traffic would cross.
  CHECK(CollectiveTime(CollectiveKind::kAllReduce, bytes, dp, c) <
        0.25 * (30 * 6e-6 + 2.0 * 15 / 16 * bytes / 50e9));
}

TEST_CASE("one member per node: ring, or NCCL's tree for latency-bound all-reduces",
          "[planner][collective]") {
  const ClusterSpec c = testing::H100Cluster(64);
  const CommGroup dp = MeshGroup(Plan(64, 8), MeshDim::kDp);  // tp fills each node
  CHECK(MembersPerNode(dp, 8) == 1);
  const double big = 1e9, small = 1e4;
  // Over 4 nodes the ring's 2 (n-1)/n bytes beat the tree's 2 bytes.
  const CommGroup dp4 = MeshGroup(Plan(4, 8), MeshDim::kDp);
  CHECK(CollectiveTime(CollectiveKind::kAllReduce, big, dp4, testing::H100Cluster(4)) ==
        Approx(6 * 6e-6 + 2.0 * 3 / 4 * big / 50e9));
  CHECK(CollectiveTime(CollectiveKind::kAllReduce, small, dp, c) ==
        Approx(2 * 6 * 6e-6 + 2 * small / 50e9));  // tree: 2 log2(64) steps
}

}  // namespace
}  // namespace meshplan
