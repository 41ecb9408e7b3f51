// DeviceMesh: this rank's Communicator for each mesh dimension (dp, pp, cp, tp), and for
// the dp x cp group of ranks that hold the same weights (gradient averaging and ZeRO).
// Expert parallelism (plan.ep, MoE) is carved out of dp as planner/mesh_layout.h lays it
// out (dp_i = edp_i * ep + ep_i): the "ep" group (ExpertParallelMembers) and the "edp_cp"
// group of the ranks holding the same experts (ExpertWeightReplicaMembers).
// Groups follow planner/mesh_layout.h (tp innermost, dp outermost) and are created in the
// same order on every rank, so joining cannot deadlock. A dimension of size 1 gets a
// SingleRankCommunicator (no network); the others come from a GroupFactory, which must return
// a communicator of the members' size in which this rank has its coordinate as rank
// (checked: std::logic_error otherwise). Not thread-safe, like the communicators it holds.
// How the groups are formed and ordered: docs/executor_internals.md#device-mesh.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "executor/comm/gloo_communicator.h"
#include "planner/mesh_layout.h"
#include "planner/parallel_plan.h"

namespace meshplan {

// Makes the communicator of one group: `name` is "dp", "pp", "cp", "tp", "dp_cp", "ep" or
// "edp_cp";
// `members` are world ranks in group-rank order.
using GroupFactory = std::function<std::unique_ptr<Communicator>(const std::string& name,
                                                                 const std::vector<int>& members)>;

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
  // The dp x cp group (planner/mesh_layout.h WeightReplicaMembers); its rank is
  // dp_i * cp + cp_i.
  Communicator& weight_replicas() const { return *weight_replicas_; }
  // Expert parallelism: the ep group (size 1 without ep) and the ranks holding the same
  // experts, ordered by edp_i * cp + cp_i (== weight_replicas() without ep).
  int64_t ep_size() const { return plan_.ep; }
  Communicator& expert_parallel() const { return *ep_comm_; }
  Communicator& expert_weight_replicas() const { return *expert_weight_replicas_; }
  // Waits for every rank of the world: a barrier along each dimension in turn (after the
  // barrier along dims 1..k, every rank of the sub-mesh spanned by them has arrived).
  void Barrier() const;

 private:
  static size_t Index(MeshDim dim) { return static_cast<size_t>(dim); }
  std::unique_ptr<Communicator> Join(const GroupFactory& factory, const std::string& name,
                                     const std::vector<int>& members, int64_t my_index) const;
  void JoinExpertGroups(const GroupFactory& factory);  // ep, and edp_cp when ep > 1

  ParallelPlan plan_;
  int world_rank_;
  MeshCoords coords_;
  std::array<std::vector<int>, kNumMeshDims> members_;
  std::array<std::unique_ptr<Communicator>, kNumMeshDims> comms_;
  std::unique_ptr<Communicator> own_weight_replicas_;  // when dp > 1 and cp > 1
  Communicator* weight_replicas_ = nullptr;
  std::unique_ptr<Communicator> ep_comm_, own_expert_weight_replicas_;
  Communicator* expert_weight_replicas_ = nullptr;
};

// Gloo groups over one store, each named by its dimension ("dp", "pp", "cp", "tp").
GroupFactory GlooGroupFactory(c10::intrusive_ptr<c10d::Store> store, int world_rank,
                              GlooOptions options);

}  // namespace meshplan
