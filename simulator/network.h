// The simulator's network: which tier a transfer uses and how tiers share bandwidth.
//
// Tiers come from the ClusterSpec: intra_node (NVLink) inside a node and inter_node
// (the NIC) between nodes. A collective's tier is planner/cost/collective_time.h's choice
// (CollectiveCostOf: a group that crosses nodes runs on the inter-node tier's link), and
// its cost is split into the two parts that formula adds up:
//   latency_s  = the collective's latency steps             (fixed, uses no bandwidth)
//   link_bytes = transfer_s * the tier's bus bandwidth      (served at that bandwidth)
// so a transfer that runs alone takes exactly CollectiveTime() (tests check this);
// `bytes` is what the rank sends (BytesSentPerRank), for reports.
// A point-to-point send between two pipeline stages uses intra_node when both ranks
// sit in the same node, else inter_node (the exact pair, not the whole pp group).
//
// Sharing (processor sharing): every simulated rank has one link per tier. The
// transfers of that rank that are in their bandwidth phase on the same link at the
// same moment split its bandwidth equally: with k of them active each moves bytes at
// bandwidth_Bps / k, and the rates change whenever one starts or ends. So two
// dimensions whose traffic shares a tier at the same time (dp and pp on the NIC, tp
// and cp on NVLink) slow each other down; traffic on different tiers does not.
// Receive-side contention and other ranks' traffic are not modelled.
// Not thread-safe; plain values, no allocation after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/cost/collective_time.h"

namespace meshplan {

enum class TierId : uint8_t { kIntraNode = 0, kInterNode = 1 };
inline constexpr int kNumTiers = 2;
const char* ToString(TierId tier);  // intra_node | inter_node

const NetworkTier& TierOf(const ClusterSpec& cluster, TierId tier);
// collective_time.h's tier choice for a group, as an id.
TierId TierIdFor(const CommGroup& group, const ClusterSpec& cluster);
// The tier between two global ranks: intra_node when they share a node (or the cluster
// has one node), else inter_node.
TierId TierBetween(int64_t rank_a, int64_t rank_b, const ClusterSpec& cluster);

// What one rank's part of a communication costs on the network.
struct Transfer {
  TierId tier = TierId::kIntraNode;
  double latency_s = 0;  // fixed part
  double bytes = 0;       // bytes this rank sends (reports)
  double link_bytes = 0;  // served at the tier's (shared) bus bandwidth: see the header
};
// `count` back-to-back collectives of one kind and buffer over `group` (see the header).
Transfer CollectiveTransfer(CollectiveKind kind, double buffer_bytes, const CommGroup& group,
                            int64_t count, const ClusterSpec& cluster);
// A send of `bytes` from global rank `from` to global rank `to` (one ring step).
Transfer SendTransfer(double bytes, int64_t from, int64_t to, const ClusterSpec& cluster);
// Seconds the transfer takes when it runs alone on its tier.
double AloneTime(const Transfer& transfer, const ClusterSpec& cluster);

// One rank's link on one tier, shared by the transfers active on it (processor sharing).
// Times are absolute simulation seconds and must not decrease between calls.
class SharedLink {
 public:
  explicit SharedLink(double bandwidth_Bps = 0) : bandwidth_Bps_(bandwidth_Bps) {}

  double bandwidth_Bps() const { return bandwidth_Bps_; }
  int active() const { return static_cast<int>(flows_.size()); }
  // Adds a flow of `bytes` at time `now` (the rates of the others drop).
  void Add(int32_t flow_id, double bytes, double now);
  // Removes a flow (finished) at time `now` (the others speed up).
  void Remove(int32_t flow_id, double now);
  // When `flow_id` finishes if nothing changes; +inf if unknown.
  double FinishTime(int32_t flow_id) const;
  // Ids of the flows now active, for rescheduling their finish times.
  template <typename F>
  void ForEachFlow(F&& f) const {
    for (const Flow& flow : flows_) f(flow.id);
  }

 private:
  struct Flow {
    int32_t id;
    double remaining_bytes;
  };
  void Advance(double now);  // serve the active flows up to `now`
  double bandwidth_Bps_ = 0;
  double last_s_ = 0;
  std::vector<Flow> flows_;
};

}  // namespace meshplan
