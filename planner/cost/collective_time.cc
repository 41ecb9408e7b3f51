#include "planner/cost/collective_time.h"

namespace meshplan {

const char* ToString(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kSendRecv: return "send_recv";
    case CollectiveKind::kRingExchange: return "ring_exchange";
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
  }
  return group;
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
    case CollectiveKind::kRingExchange: return share;
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
    case CollectiveKind::kSendRecv: return 1;
  }
  return 0;
}

double BytesSentPerRank(CollectiveKind kind, double bytes, int64_t n) {
  return RingFactor(kind, n) * bytes;
}

double CollectiveTime(CollectiveKind kind, double bytes, const CommGroup& group,
                      const ClusterSpec& cluster) {
  const int64_t n = group.size();
  if (n <= 1) return 0;
  const NetworkTier& tier = TierFor(group, cluster);
  const double moved = BytesSentPerRank(kind, bytes, n);
  const double transfer = tier.bandwidth_Bps > 0 ? moved / tier.bandwidth_Bps : 0;
  return static_cast<double>(RingSteps(kind, n)) * tier.latency_s + transfer;
}

}  // namespace meshplan
