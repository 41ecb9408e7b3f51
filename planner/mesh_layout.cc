#include "planner/mesh_layout.h"

#include <stdexcept>
#include <string>

namespace meshplan {

int64_t MeshDimSize(const ParallelPlan& plan, MeshDim dim) {
  switch (dim) {
    case MeshDim::kDp: return plan.dp;
    case MeshDim::kPp: return plan.pp;
    case MeshDim::kCp: return plan.cp;
    case MeshDim::kTp: return plan.tp;
    case MeshDim::kEp: return plan.ep;
  }
  return 1;
}

MeshCoords CoordsOfRank(const ParallelPlan& plan, int64_t rank) {
  if (rank < 0 || rank >= plan.world_size())
    throw std::out_of_range("rank " + std::to_string(rank) + " is outside a mesh of " +
                            std::to_string(plan.world_size()) + " ranks");
  // Peel rank = ((dp_i * pp + pp_i) * cp + cp_i) * tp + tp_i from the inside.
  MeshCoords c;
  int64_t rest = rank;
  c[MeshDim::kTp] = rest % plan.tp;
  rest /= plan.tp;
  c[MeshDim::kCp] = rest % plan.cp;
  rest /= plan.cp;
  c[MeshDim::kPp] = rest % plan.pp;
  c[MeshDim::kDp] = rest / plan.pp;
  return c;
}

int64_t RankOfCoords(const ParallelPlan& plan, const MeshCoords& coords) {
  int64_t rank = 0;
  for (const MeshDim dim : kAllMeshDims) {
    if (coords[dim] < 0 || coords[dim] >= MeshDimSize(plan, dim))
      throw std::out_of_range(std::string(ToString(dim)) + " coordinate " +
                              std::to_string(coords[dim]) + " is outside 0.." +
                              std::to_string(MeshDimSize(plan, dim) - 1));
    rank = rank * MeshDimSize(plan, dim) + coords[dim];
  }
  return rank;
}

std::vector<int64_t> MeshGroupMembers(const ParallelPlan& plan, int64_t rank, MeshDim dim) {
  if (dim == MeshDim::kEp) return ExpertParallelMembers(plan, rank);
  MeshCoords c = CoordsOfRank(plan, rank);
  std::vector<int64_t> members;
  members.reserve(static_cast<size_t>(MeshDimSize(plan, dim)));
  for (int64_t i = 0; i < MeshDimSize(plan, dim); ++i) {
    c[dim] = i;
    members.push_back(RankOfCoords(plan, c));
  }
  return members;
}

std::vector<int64_t> WeightReplicaMembers(const ParallelPlan& plan, int64_t rank) {
  MeshCoords c = CoordsOfRank(plan, rank);
  std::vector<int64_t> members;
  members.reserve(static_cast<size_t>(plan.weight_replicas()));
  for (int64_t d = 0; d < plan.dp; ++d)
    for (int64_t k = 0; k < plan.cp; ++k) {
      c[MeshDim::kDp] = d;
      c[MeshDim::kCp] = k;
      members.push_back(RankOfCoords(plan, c));
    }
  return members;
}

int64_t WeightReplicaIndex(const ParallelPlan& plan, int64_t rank) {
  const MeshCoords c = CoordsOfRank(plan, rank);
  return c[MeshDim::kDp] * plan.cp + c[MeshDim::kCp];
}

namespace {

// plan.ep, checked: the expert groups need ep >= 1 dividing dp (CheckPlan's rules).
int64_t CheckedEp(const ParallelPlan& plan) {
  if (plan.ep < 1 || plan.dp % plan.ep != 0)
    throw std::out_of_range("ep=" + std::to_string(plan.ep) + " does not divide dp=" +
                            std::to_string(plan.dp));
  return plan.ep;
}

}  // namespace

std::vector<int64_t> ExpertParallelMembers(const ParallelPlan& plan, int64_t rank) {
  const int64_t ep = CheckedEp(plan);
  MeshCoords c = CoordsOfRank(plan, rank);
  const int64_t first = c[MeshDim::kDp] / ep * ep;
  std::vector<int64_t> members;
  members.reserve(static_cast<size_t>(ep));
  for (int64_t e = 0; e < ep; ++e) {
    c[MeshDim::kDp] = first + e;
    members.push_back(RankOfCoords(plan, c));
  }
  return members;
}

int64_t ExpertParallelIndex(const ParallelPlan& plan, int64_t rank) {
  return CoordsOfRank(plan, rank)[MeshDim::kDp] % CheckedEp(plan);
}

std::vector<int64_t> ExpertWeightReplicaMembers(const ParallelPlan& plan, int64_t rank) {
  const int64_t ep = CheckedEp(plan);
  MeshCoords c = CoordsOfRank(plan, rank);
  const int64_t ep_i = c[MeshDim::kDp] % ep;
  std::vector<int64_t> members;
  members.reserve(static_cast<size_t>(plan.expert_weight_replicas()));
  for (int64_t d = 0; d < plan.dp / ep; ++d)
    for (int64_t k = 0; k < plan.cp; ++k) {
      c[MeshDim::kDp] = d * ep + ep_i;
      c[MeshDim::kCp] = k;
      members.push_back(RankOfCoords(plan, c));
    }
  return members;
}

int64_t ExpertWeightReplicaIndex(const ParallelPlan& plan, int64_t rank) {
  const MeshCoords c = CoordsOfRank(plan, rank);
  return c[MeshDim::kDp] / CheckedEp(plan) * plan.cp + c[MeshDim::kCp];
}

}  // namespace meshplan
