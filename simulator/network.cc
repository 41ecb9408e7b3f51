#include "simulator/network.h"

#include <algorithm>
#include <limits>

namespace meshplan {

const char* ToString(TierId tier) {
  return tier == TierId::kIntraNode ? "intra_node" : "inter_node";
}

const NetworkTier& TierOf(const ClusterSpec& cluster, TierId tier) {
  return tier == TierId::kIntraNode ? cluster.intra_node : cluster.inter_node;
}

TierId TierIdFor(const CommGroup& group, const ClusterSpec& cluster) {
  return &TierFor(group, cluster) == &cluster.intra_node ? TierId::kIntraNode
                                                         : TierId::kInterNode;
}

TierId TierBetween(int64_t rank_a, int64_t rank_b, const ClusterSpec& cluster) {
  if (cluster.nodes <= 1 || cluster.gpus_per_node <= 0) return TierId::kIntraNode;
  return rank_a / cluster.gpus_per_node == rank_b / cluster.gpus_per_node ? TierId::kIntraNode
                                                                          : TierId::kInterNode;
}

Transfer CollectiveTransfer(CollectiveKind kind, double buffer_bytes, const CommGroup& group,
                            int64_t count, const ClusterSpec& cluster) {
  Transfer t;
  const int64_t n = group.size();
  if (n <= 1) return t;
  const CollectiveCost cost = CollectiveCostOf(kind, buffer_bytes, group, cluster);
  t.tier = cost.inter_node ? TierId::kInterNode : TierId::kIntraNode;
  const double c = static_cast<double>(count);
  t.latency_s = c * cost.latency_s;
  t.bytes = c * BytesSentPerRank(kind, buffer_bytes, n);
  t.link_bytes = c * cost.transfer_s * TierOf(cluster, t.tier).bus_bandwidth_Bps();
  return t;
}

Transfer SendTransfer(double bytes, int64_t from, int64_t to, const ClusterSpec& cluster) {
  Transfer t;
  t.tier = TierBetween(from, to, cluster);
  t.latency_s = static_cast<double>(RingSteps(CollectiveKind::kSendRecv, 2)) *
                TierOf(cluster, t.tier).latency_s;
  t.bytes = BytesSentPerRank(CollectiveKind::kSendRecv, bytes, 2);
  t.link_bytes = t.bytes;
  return t;
}

double AloneTime(const Transfer& transfer, const ClusterSpec& cluster) {
  const double bw = TierOf(cluster, transfer.tier).bus_bandwidth_Bps();
  return transfer.latency_s + (bw > 0 ? transfer.link_bytes / bw : 0);
}

// ---------------------------------------------------------------------------
// SharedLink

void SharedLink::Advance(double now) {
  if (now <= last_s_) return;
  if (!flows_.empty() && bandwidth_Bps_ > 0) {
    const double served = (now - last_s_) * bandwidth_Bps_ / static_cast<double>(flows_.size());
    for (Flow& f : flows_) f.remaining_bytes = std::max(0.0, f.remaining_bytes - served);
  }
  last_s_ = now;
}

void SharedLink::Add(int32_t flow_id, double bytes, double now) {
  Advance(now);
  last_s_ = std::max(last_s_, now);
  flows_.push_back({flow_id, bytes});
}

void SharedLink::Remove(int32_t flow_id, double now) {
  Advance(now);
  for (size_t i = 0; i < flows_.size(); ++i) {
    if (flows_[i].id != flow_id) continue;
    flows_[i] = flows_.back();
    flows_.pop_back();
    return;
  }
}

double SharedLink::FinishTime(int32_t flow_id) const {
  for (const Flow& f : flows_) {
    if (f.id != flow_id) continue;
    if (bandwidth_Bps_ <= 0) return last_s_;  // no bandwidth given: free, as CollectiveTime
    return last_s_ + f.remaining_bytes * static_cast<double>(flows_.size()) / bandwidth_Bps_;
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace meshplan
