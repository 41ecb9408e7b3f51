#include "planner/cost/collective_time.h"

#include <algorithm>
#include <cmath>

namespace meshplan {

const char* ToString(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kSendRecv: return "send_recv";
    case CollectiveKind::kRingExchange: return "ring_exchange";
    case CollectiveKind::kAllToAll: return "all_to_all";
  }
  return "?";
}

CommGroup MeshGroup(const ParallelPlan& plan, MeshDim dim) {
  CommGroup group;
  switch (dim) {
    case MeshDim::kTp: group.inner = {1, plan.tp}; break;
    case MeshDim::kCp: group.inner = {plan.tp, plan.cp}; break;
    case MeshDim::kPp: group.inner = {plan.tp * plan.cp, plan.pp}; break;
    case MeshDim::kDp: group.inner = {plan.tp * plan.cp * plan.pp, plan.dp}; break;
    case MeshDim::kEp: group.inner = {plan.tp * plan.cp * plan.pp, plan.ep}; break;
  }
  return group;
}

CommGroup ExpertDataParallelGroup(const ParallelPlan& plan) {
  CommGroup group;
  group.inner = {plan.tp, plan.cp};
  group.outer = {plan.tp * plan.cp * plan.pp * plan.ep, plan.expert_dp()};
  return group;
}

CommGroup TiedEmbeddingGroup(const ParallelPlan& plan) {
  CommGroup group;
  if (plan.pp > 1) group.inner = {plan.tp * plan.cp * (plan.pp - 1), 2};
  return group;
}

RankGroups RankGroupsOf(const ParallelPlan& plan) {
  RankGroups g;
  for (MeshDim dim : kAllCommDims) g.of_dim[static_cast<int>(dim)] = MeshGroup(plan, dim);
  g.weight_replicas = DataParallelGroup(plan);
  g.expert_replicas = ExpertDataParallelGroup(plan);
  g.tied_embedding = TiedEmbeddingGroup(plan);
  return g;
}

CommGroup DataParallelGroup(const ParallelPlan& plan) {
  CommGroup group;
  group.inner = {plan.tp, plan.cp};
  group.outer = {plan.tp * plan.cp * plan.pp, plan.dp};
  return group;
}

namespace {

bool AxisInNode(const GroupAxis& axis, int64_t gpus_per_node) {
  if (axis.size <= 1) return true;
  const int64_t extent = axis.stride * axis.size;  // ranks from the first member's block on
  return extent <= gpus_per_node && gpus_per_node % extent == 0;
}

}  // namespace

bool StaysInNode(const CommGroup& group, int64_t gpus_per_node) {
  return AxisInNode(group.inner, gpus_per_node) && AxisInNode(group.outer, gpus_per_node);
}

const NetworkTier& TierFor(const CommGroup& group, const ClusterSpec& cluster) {
  if (cluster.nodes <= 1 || StaysInNode(group, cluster.gpus_per_node)) return cluster.intra_node;
  return cluster.inter_node;
}

double RingFactor(CollectiveKind kind, int64_t n) {
  if (n <= 1) return 0;
  const double share = static_cast<double>(n - 1) / static_cast<double>(n);
  switch (kind) {
    case CollectiveKind::kAllReduce: return 2 * share;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kRingExchange:
    case CollectiveKind::kAllToAll: return share;
    case CollectiveKind::kSendRecv: return 1;
  }
  return 0;
}

int64_t RingSteps(CollectiveKind kind, int64_t n) {
  if (n <= 1) return 0;
  switch (kind) {
    case CollectiveKind::kAllReduce: return 2 * (n - 1);
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kRingExchange: return n - 1;
    case CollectiveKind::kSendRecv:
    case CollectiveKind::kAllToAll: return 1;
  }
  return 0;
}

double BytesSentPerRank(CollectiveKind kind, double bytes, int64_t n) {
  return RingFactor(kind, n) * bytes;
}

int64_t MembersPerNode(const CommGroup& group, int64_t gpus_per_node) {
  auto in_node = [&](const GroupAxis& axis) -> int64_t {
    if (axis.size <= 1) return 1;
    if (axis.stride >= gpus_per_node) return 1;
    return std::min(axis.size, std::max<int64_t>(1, gpus_per_node / axis.stride));
  };
  return std::min(group.size(), in_node(group.inner) * in_node(group.outer));
}

namespace {

CollectiveCost operator+(CollectiveCost a, const CollectiveCost& b) {
  a.latency_s += b.latency_s;
  a.transfer_s += b.transfer_s;
  return a;
}

// One ring collective over n ranks of one tier.
CollectiveCost Ring(CollectiveKind kind, double bytes, int64_t n, const NetworkTier& tier) {
  CollectiveCost c;
  if (n <= 1) return c;
  const bool all_reduce = kind == CollectiveKind::kAllReduce;
  const double bandwidth = tier.bus_bandwidth_of(all_reduce);
  c.latency_s = static_cast<double>(RingSteps(kind, n)) * tier.latency_of(all_reduce);
  c.transfer_s = bandwidth > 0 ? BytesSentPerRank(kind, bytes, n) / bandwidth : 0;
  return c;
}

// Across nodes with one member per node: a ring, or for an all-reduce NCCL's tree when
// faster: a reduce up and a broadcast down a double binary tree, 2 ceil(log2 n) latency
// steps and about 2 x bytes per rank.
CollectiveCost InterNode(CollectiveKind kind, double bytes, int64_t n, const NetworkTier& tier) {
  CollectiveCost ring = Ring(kind, bytes, n, tier);
  ring.inter_node = true;
  if (kind != CollectiveKind::kAllReduce || n <= 2) return ring;
  CollectiveCost tree = ring;
  const double bandwidth = tier.bus_bandwidth_of(true);
  tree.latency_s = 2 * std::ceil(std::log2(static_cast<double>(n))) * tier.latency_of(true);
  tree.transfer_s = bandwidth > 0 ? 2 * bytes / bandwidth : 0;
  return tree.total() < ring.total() ? tree : ring;
}

// An all-to-all over n ranks, k of them in each node (see the header): the slices to the
// node's peers and to the other nodes leave at once, each on its tier.
CollectiveCost AllToAllAcrossNodes(double bytes, int64_t n, int64_t k, const ClusterSpec& cluster) {
  CollectiveCost c;
  c.inter_node = true;
  c.latency_s = cluster.inter_node.latency_s;
  const double dn = static_cast<double>(n);
  const double intra_bw = cluster.intra_node.bus_bandwidth_Bps();
  const double inter_bw = cluster.inter_node.bus_bandwidth_Bps();
  const double intra = intra_bw > 0 ? static_cast<double>(k - 1) / dn * bytes / intra_bw : 0;
  const double inter = inter_bw > 0 ? static_cast<double>(n - k) / dn * bytes / inter_bw : 0;
  c.transfer_s = std::max(intra, inter);
  return c;
}

}  // namespace

CollectiveCost CollectiveCostOf(CollectiveKind kind, double bytes, const CommGroup& group,
                                const ClusterSpec& cluster) {
  const int64_t n = group.size();
  if (n <= 1) return {};
  if (cluster.nodes <= 1 || StaysInNode(group, cluster.gpus_per_node))
    return Ring(kind, bytes, n, cluster.intra_node);
  const int64_t k = MembersPerNode(group, cluster.gpus_per_node);
  const int64_t nodes = n / std::max<int64_t>(k, 1);
  if (kind == CollectiveKind::kAllToAll) return AllToAllAcrossNodes(bytes, n, k, cluster);
  const bool collective = kind == CollectiveKind::kAllReduce ||
                          kind == CollectiveKind::kReduceScatter ||
                          kind == CollectiveKind::kAllGather;
  if (k <= 1 || nodes <= 1 || !collective) return InterNode(kind, bytes, n, cluster.inter_node);
  // Hierarchical: the k members of a node split the buffer over the intra-node tier, each
  // carries its 1/k across the nodes on its own NIC, and the node's result is put back.
  const NetworkTier& intra = cluster.intra_node;
  const double shard = bytes / static_cast<double>(k);
  if (kind == CollectiveKind::kAllReduce)
    return Ring(CollectiveKind::kReduceScatter, bytes, k, intra) +
           InterNode(CollectiveKind::kAllReduce, shard, nodes, cluster.inter_node) +
           Ring(CollectiveKind::kAllGather, bytes, k, intra);
  return Ring(kind, bytes, k, intra) + InterNode(kind, shard, nodes, cluster.inter_node);
}

double RingTime(CollectiveKind kind, double bytes, int64_t group_size, const NetworkTier& tier) {
  return Ring(kind, bytes, group_size, tier).total();
}

double CollectiveTime(CollectiveKind kind, double bytes, const CommGroup& group,
                      const ClusterSpec& cluster) {
  return CollectiveCostOf(kind, bytes, group, cluster).total();
}

}  // namespace meshplan
