// Collectives on a cluster: which network tier a group uses, how many bytes each rank
// sends, and how long it takes as NCCL runs it (rings, the tree all-reduce, hierarchical
// groups across nodes, all-to-all).
//
// Buffer convention: `bytes` is the full buffer (the all-reduced tensor, the reduce-scatter
// input, the all-gather output, every rank's K/V for a ring exchange, the tensor sent for
// send/recv). The bytes and latency steps per collective and the cross-node rules are
// derived once in docs/cost_model.md section 3. Shared by the analytic cost model and the
// event simulator: pure functions of (kind, buffer bytes, group, ClusterSpec), no
// allocation.
#pragma once

#include <array>
#include <cstdint>

#include "planner/cluster_spec.h"
#include "planner/mesh_dim.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"

namespace meshplan {

enum class CollectiveKind : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kSendRecv,
  kRingExchange,
  kAllToAll,
};
// all_reduce | reduce_scatter | all_gather | send_recv | ring_exchange | all_to_all
const char* ToString(CollectiveKind kind);

// `size` ranks spaced `stride` apart in the rank layout of planner/parallel_plan.h.
struct GroupAxis {
  int64_t stride = 1;
  int64_t size = 1;
};
// The ranks of one communicator: one mesh dimension, or two (dp x cp for the
// gradient sync of context-parallel ranks, which hold the same weights).
struct CommGroup {
  GroupAxis inner;
  GroupAxis outer;  // size 1 when the group spans one dimension
  int64_t size() const { return inner.size * outer.size; }
};

// The group of one mesh dimension: strides tp 1, cp tp, pp tp*cp, dp tp*cp*pp; ep: ep
// consecutive dp coordinates, stride tp*cp*pp (planner/mesh_layout.h).
CommGroup MeshGroup(const ParallelPlan& plan, MeshDim dim);
// The ranks that hold the same weights and so sync gradients / shard ZeRO state: dp x cp.
CommGroup DataParallelGroup(const ParallelPlan& plan);
// The ranks that hold the same routed experts (expert gradients, ZeRO of expert states):
// cp x dp/ep, the dp axis strided by ep (tp*cp*pp*ep). ep == 1: DataParallelGroup.
CommGroup ExpertDataParallelGroup(const ParallelPlan& plan);
// The two stages that hold a tied embedding's copies (the first and the last: Megatron's
// embedding group); pp == 1: a group of one.
CommGroup TiedEmbeddingGroup(const ParallelPlan& plan);

// Every group a rank of `plan` communicates in, derived once (PlanShape::groups).
struct RankGroups {
  std::array<CommGroup, kNumCommDims> of_dim;  // MeshGroup(plan, dim)
  CommGroup weight_replicas;                   // DataParallelGroup
  CommGroup expert_replicas;                   // ExpertDataParallelGroup
  CommGroup tied_embedding;                    // TiedEmbeddingGroup
  const CommGroup& operator[](MeshDim dim) const { return of_dim[static_cast<int>(dim)]; }
};
RankGroups RankGroupsOf(const ParallelPlan& plan);

// True when every aligned group of this shape lies inside one node: for each
// axis of size n > 1 and stride s, s*n <= gpus_per_node and divides it.
bool StaysInNode(const CommGroup& group, int64_t gpus_per_node);
// Ranks of the group inside one node (aligned layout, as StaysInNode).
int64_t MembersPerNode(const CommGroup& group, int64_t gpus_per_node);
// intra_node when the group stays inside a node (or the cluster has one node), else inter_node.
const NetworkTier& TierFor(const CommGroup& group, const ClusterSpec& cluster);

// Fraction of the buffer each rank sends (0 for a group of one).
double RingFactor(CollectiveKind kind, int64_t group_size);
// Latency-bound steps (0 for a group of one).
int64_t RingSteps(CollectiveKind kind, int64_t group_size);
// Bytes one rank sends: RingFactor * bytes.
double BytesSentPerRank(CollectiveKind kind, double bytes, int64_t group_size);
// A collective's time split into latency steps and transfer (the simulator shares a link's
// bandwidth among transfers, planner and simulator both start here).
struct CollectiveCost {
  double latency_s = 0;
  double transfer_s = 0;    // bytes over the bus bandwidth of each tier used
  bool inter_node = false;  // the group leaves the node
  double total() const { return latency_s + transfer_s; }
};
CollectiveCost CollectiveCostOf(CollectiveKind kind, double bytes, const CommGroup& group,
                                const ClusterSpec& cluster);
// Seconds: CollectiveCostOf(...).total().
// One ring of `group_size` ranks on one tier: RingSteps x latency + BytesSentPerRank / bus
// bandwidth (an all-reduce on the tier's own all-reduce figures where it has them).
double RingTime(CollectiveKind kind, double bytes, int64_t group_size, const NetworkTier& tier);
double CollectiveTime(CollectiveKind kind, double bytes, const CommGroup& group,
                      const ClusterSpec& cluster);

}  // namespace meshplan
