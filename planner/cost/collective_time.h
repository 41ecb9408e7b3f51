// Collectives on a cluster: which network tier a group uses, how many bytes each
// rank sends, and how long it takes with ring algorithms (docs/cost_model.md section 3).
//
// Shared by the analytic cost model and the event simulator: pure functions of
// (kind, buffer bytes, group, ClusterSpec), no allocation.
//
// Buffer convention: `bytes` is the full buffer: the all-reduced tensor, the
// reduce-scatter input, the all-gather output, the K/V of every rank for a ring
// exchange, the tensor sent for send/recv. Per rank a ring
//   all-reduce moves      2(n-1)/n * bytes in 2(n-1) steps,
//   reduce-scatter moves   (n-1)/n * bytes in  (n-1) steps,
//   all-gather moves       (n-1)/n * bytes in  (n-1) steps,
//   ring exchange moves    (n-1)/n * bytes in  (n-1) steps (ring attention's K/V pass),
//   send/recv moves              bytes in        1 step,
//   all-to-all moves       (n-1)/n * bytes in        1 step (each rank's buffer holds n
//                          equal slices, one per peer; NCCL sends to every peer at once,
//                          a grouped send/recv, so the latency is one step).
// All-to-all follows nccl-tests' bus-bandwidth convention (doc/PERFORMANCE.md, "AllToAll":
// busBw = algBw * (n-1)/n): time = (n-1)/n * bytes / bus bandwidth.
// time = steps * tier latency + bytes moved / tier bus bandwidth (per GPU, per direction:
// the line rate times the tier's bus_efficiency, the fraction NCCL achieves).
// Groups that span nodes (NCCL's hierarchy, as its rings and trees use the NICs):
//  * one member per node: a ring over the inter-node tier; an all-reduce takes the faster
//    of the ring and NCCL's tree (2 log2(n) latency steps, 2 x bytes);
//  * k > 1 members per node: hierarchical: reduce-scatter (all-gather) inside the node
//    over k, then each member's 1/k shard across the nodes on its own NIC; an all-reduce
//    is intra reduce-scatter + inter all-reduce of bytes/k + intra all-gather;
//  * send/recv and ring exchanges that leave the node: the inter-node tier;
//  * all-to-all with k members per node: of its (n-1)/n * bytes, (k-1)/n go to peers in the
//    node (intra-node tier) and (n-k)/n to the other nodes (inter-node tier, own NIC), at
//    the same time: the slower of the two (latency: the inter-node tier's).
#pragma once

#include <cstdint>

#include "planner/cluster_spec.h"
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
