// Mesh layout: where each rank sits on the device mesh, and who shares a group.
//
// The placement of docs/cost_model.md section 3: tp innermost, then cp, then pp, dp
// outermost:  rank = ((dp_i * pp + pp_i) * cp + cp_i) * tp + tp_i. This is Megatron-Core's
// order option "tp-cp-pp-dp"; its default, "tp-cp-ep-dp-pp", puts pp outermost instead.
// Expert parallelism (plan.ep, docs/cost_model.md section 3) is carved out of dp, as in
// Megatron-Core (its expert mesh splits the data-parallel ranks into ep x edp, ep inner):
//   dp_i = edp_i * ep + ep_i     (ep_i in 0..ep-1, edp_i in 0..dp/ep-1)
// * expert-parallel group of a rank: the ep ranks with the same pp, cp, tp coordinates and
//   the same edp_i, i.e. dp coordinates edp_i*ep .. edp_i*ep + ep-1 (world ranks spaced
//   pp*cp*tp apart); ep rank ep_i holds routed experts ep_i*X/ep .. (ep_i+1)*X/ep - 1.
// * expert-data-parallel group: the ranks that hold the same experts: same pp, tp and ep_i,
//   every edp_i and cp coordinate (dp/ep x cp ranks); expert gradients are reduced and
//   ZeRO shards expert states over it. Dense weights keep the dp x cp group.
// The group of a rank along one dimension is the ranks that share every other
// coordinate, ordered by their coordinate along that dimension (so a rank's
// coordinate is its rank inside that group). Pure functions: the executor's
// DeviceMesh builds communicators from them, the simulator places groups on nodes.
// Ranks outside 0..world_size()-1, and the expert groups of a plan whose ep does not divide
// dp, are a programming error (std::out_of_range).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "planner/parallel_plan.h"
#include "planner/mesh_dim.h"

namespace meshplan {

// One coordinate per mesh dimension, indexed by MeshDim.
struct MeshCoords {
  std::array<int64_t, kNumMeshDims> index{};
  int64_t& operator[](MeshDim d) { return index[static_cast<int>(d)]; }
  int64_t operator[](MeshDim d) const { return index[static_cast<int>(d)]; }
  bool operator==(const MeshCoords&) const = default;
};

// The plan's factor for `dim` (dp, pp, cp, tp; ep: plan.ep, a sub-group of dp).
int64_t MeshDimSize(const ParallelPlan& plan, MeshDim dim);

MeshCoords CoordsOfRank(const ParallelPlan& plan, int64_t rank);
int64_t RankOfCoords(const ParallelPlan& plan, const MeshCoords& coords);

// World ranks of the group along `dim` that contains `rank`, by coordinate along `dim`
// (kEp: ExpertParallelMembers).
std::vector<int64_t> MeshGroupMembers(const ParallelPlan& plan, int64_t rank, MeshDim dim);

// The ranks that hold the same weights as `rank` (same pp and tp coordinates): the dp x cp
// group over which gradients are averaged and ZeRO shards. Ordered by dp_i * cp + cp_i,
// which is a rank's index inside the group.
std::vector<int64_t> WeightReplicaMembers(const ParallelPlan& plan, int64_t rank);
int64_t WeightReplicaIndex(const ParallelPlan& plan, int64_t rank);

// The expert-parallel group of `rank` (ep ranks, ordered by ep_i = dp_i % ep, which is the
// rank's index inside it) and the index. ep == 1: the rank alone, index 0.
std::vector<int64_t> ExpertParallelMembers(const ParallelPlan& plan, int64_t rank);
int64_t ExpertParallelIndex(const ParallelPlan& plan, int64_t rank);
// The ranks that hold the same experts as `rank`: dp/ep x cp ranks, ordered by
// edp_i * cp + cp_i (edp_i = dp_i / ep), which is the rank's index inside the group.
std::vector<int64_t> ExpertWeightReplicaMembers(const ParallelPlan& plan, int64_t rank);
int64_t ExpertWeightReplicaIndex(const ParallelPlan& plan, int64_t rank);

}  // namespace meshplan
