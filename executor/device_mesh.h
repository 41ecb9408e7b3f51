// DeviceMesh: this rank's Communicator for each mesh dimension (dp, pp, cp, tp).
//
// Groups follow planner/mesh_layout.h (tp innermost, dp outermost): the group of a
// dimension is the ranks that share every other coordinate, and this rank's
// coordinate along the dimension is its rank inside that group. Groups are created
// in kAllMeshDims order on every rank, so joining cannot deadlock. A dimension of
// size 1 gets a SingleRankCommunicator (no network); the others come from a
// GroupFactory (Gloo here, NCCL later), which must return a communicator of the
// members' size in which this rank has its coordinate as rank (checked:
// std::logic_error otherwise). Not thread-safe, like the communicators it holds.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/communicator.h"
#include "executor/gloo_communicator.h"
#include "planner/mesh_layout.h"
#include "planner/parallel_plan.h"

namespace meshplan {

// Makes the communicator of one group: `members` are world ranks in group-rank order.
using GroupFactory =
    std::function<std::unique_ptr<Communicator>(MeshDim dim, const std::vector<int>& members)>;

class DeviceMesh {
 public:
  // world_rank in 0..plan.world_size()-1 (std::out_of_range otherwise). Throws what
  // the factory throws (std::runtime_error when a group cannot be joined).
  DeviceMesh(const ParallelPlan& plan, int world_rank, const GroupFactory& factory);

  int world_rank() const { return world_rank_; }
  int world_size() const { return static_cast<int>(plan_.world_size()); }
  const ParallelPlan& plan() const { return plan_; }
  const MeshCoords& coords() const { return coords_; }
  int64_t coord(MeshDim dim) const { return coords_[dim]; }
  int64_t size(MeshDim dim) const { return MeshDimSize(plan_, dim); }
  const std::vector<int>& members(MeshDim dim) const { return members_[Index(dim)]; }
  Communicator& comm(MeshDim dim) const { return *comms_[Index(dim)]; }

 private:
  static size_t Index(MeshDim dim) { return static_cast<size_t>(dim); }

  ParallelPlan plan_;
  int world_rank_;
  MeshCoords coords_;
  std::array<std::vector<int>, kNumMeshDims> members_;
  std::array<std::unique_ptr<Communicator>, kNumMeshDims> comms_;
};

// Gloo groups over one store, each named by its dimension ("dp", "pp", "cp", "tp").
GroupFactory GlooGroupFactory(c10::intrusive_ptr<c10d::Store> store, int world_rank,
                              GlooOptions options);

}  // namespace meshplan
