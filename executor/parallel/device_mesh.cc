#include "executor/parallel/device_mesh.h"

#include <stdexcept>

#include "executor/comm/single_rank_communicator.h"

namespace meshplan {

DeviceMesh::DeviceMesh(const ParallelPlan& plan, int world_rank, const GroupFactory& factory)
    : plan_(plan), world_rank_(world_rank), coords_(CoordsOfRank(plan, world_rank)) {
  for (const MeshDim dim : kAllMeshDims) {
    const auto members64 = MeshGroupMembers(plan_, world_rank_, dim);
    std::vector<int> members(members64.begin(), members64.end());
    std::unique_ptr<Communicator> comm;
    if (members.size() == 1) {
      comm = std::make_unique<SingleRankCommunicator>(ToString(dim));
    } else {
      comm = Join(factory, ToString(dim), members, coords_[dim]);
    }
    members_[Index(dim)] = std::move(members);
    comms_[Index(dim)] = std::move(comm);
  }
  if (plan_.cp == 1) {
    weight_replicas_ = comms_[Index(MeshDim::kDp)].get();
  } else if (plan_.dp == 1) {
    weight_replicas_ = comms_[Index(MeshDim::kCp)].get();
  } else {
    const auto members64 = WeightReplicaMembers(plan_, world_rank_);
    own_weight_replicas_ = Join(factory, "dp_cp", {members64.begin(), members64.end()},
                                WeightReplicaIndex(plan_, world_rank_));
    weight_replicas_ = own_weight_replicas_.get();
  }
  JoinExpertGroups(factory);
}

void DeviceMesh::JoinExpertGroups(const GroupFactory& factory) {
  // planner/mesh_layout.h: dp_i = edp_i * ep + ep_i; both groups are joined in this order on
  // every rank (ep, then the expert replicas), after the mesh dimensions.
  if (plan_.ep == 1) {
    ep_comm_ = std::make_unique<SingleRankCommunicator>("ep");
    expert_weight_replicas_ = weight_replicas_;
    return;
  }
  auto join = [&](const char* name, const std::vector<int64_t>& members64,
                  int64_t index) -> std::unique_ptr<Communicator> {
    if (members64.size() == 1) return std::make_unique<SingleRankCommunicator>(name);
    return Join(factory, name, {members64.begin(), members64.end()}, index);
  };
  ep_comm_ = join("ep", ExpertParallelMembers(plan_, world_rank_),
                  ExpertParallelIndex(plan_, world_rank_));
  own_expert_weight_replicas_ = join("edp_cp", ExpertWeightReplicaMembers(plan_, world_rank_),
                              ExpertWeightReplicaIndex(plan_, world_rank_));
  expert_weight_replicas_ = own_expert_weight_replicas_.get();
}

std::unique_ptr<Communicator> DeviceMesh::Join(const GroupFactory& factory,
                                               const std::string& name,
                                               const std::vector<int>& members,
                                               int64_t my_index) const {
  std::unique_ptr<Communicator> comm = factory(name, members);
  if (!comm || comm->size() != static_cast<int>(members.size()) || comm->rank() != my_index)
    throw std::logic_error("DeviceMesh: the group factory returned a wrong " + name +
                           " communicator for world rank " + std::to_string(world_rank_));
  return comm;
}

void DeviceMesh::Barrier() const {
  for (const MeshDim dim : kAllMeshDims) comm(dim).Barrier();
}

GroupFactory GlooGroupFactory(c10::intrusive_ptr<c10d::Store> store, int world_rank,
                              GlooOptions options) {
  return [store = std::move(store), world_rank, options = std::move(options)](
             const std::string& name,
             const std::vector<int>& members) -> std::unique_ptr<Communicator> {
    return std::make_unique<GlooCommunicator>(store, world_rank, members, name, options);
  };
}

}  // namespace meshplan
