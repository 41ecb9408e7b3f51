#include "executor/device_mesh.h"

#include <stdexcept>

#include "executor/single_rank_communicator.h"

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
      comm = factory(dim, members);
      if (!comm || comm->size() != static_cast<int>(members.size()) ||
          comm->rank() != coords_[dim])
        throw std::logic_error(std::string("DeviceMesh: the group factory returned a wrong ") +
                               ToString(dim) + " communicator for world rank " +
                               std::to_string(world_rank_));
    }
    members_[Index(dim)] = std::move(members);
    comms_[Index(dim)] = std::move(comm);
  }
}

GroupFactory GlooGroupFactory(c10::intrusive_ptr<c10d::Store> store, int world_rank,
                              GlooOptions options) {
  return [store = std::move(store), world_rank, options = std::move(options)](
             MeshDim dim, const std::vector<int>& members) -> std::unique_ptr<Communicator> {
    return std::make_unique<GlooCommunicator>(store, world_rank, members, ToString(dim), options);
  };
}

}  // namespace meshplan
