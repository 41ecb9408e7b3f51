// PlanSpace: the grid of candidate plans the search walks, in a fixed order: every ordered
// factorisation of the world size into (dp, tp, pp, cp), then ep, sp, mbs, (schedule, vpp,
// stage split), zero and recompute, each axis holding only values that can make sense and
// CheckPlan() judging each candidate; pins replace an axis; the recompute axis is the
// framework's offer. The axes, their order and the pins' rules: docs/cost_model.md section 8.
// A candidate's ordinal is its index in this order (ties break by it, so results do not
// depend on the thread count). Immutable after construction: safe to share between threads.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_fields.h"
#include "planner/stage_layers.h"
#include "planner/training_spec.h"

namespace meshplan {

// Plan fields pinned to one value (planner/plan_fields.h; a value as the table reads it:
// a bool as 0/1, an enum as its enumerator); unset fields are searched.
class PlanPins {
 public:
  // The pinned value of `field`, or nullopt.
  std::optional<int64_t> operator[](PlanField field) const {
    return values_[static_cast<size_t>(field)];
  }
  // The same, as the member's type (bool, int, a Recompute, ...).
  template <typename T>
  std::optional<T> Get(PlanField field) const {
    const std::optional<int64_t> v = (*this)[field];
    return v ? std::optional<T>(static_cast<T>(*v)) : std::nullopt;
  }
  void Pin(PlanField field, int64_t value) { values_[static_cast<size_t>(field)] = value; }

  bool empty() const;
  // The pinned keys alone, as a short plan string ("tp=1,zero=3"); "" when empty.
  std::string ToString() const;
  // The same pins without `key` ("tp", "zero", ... as in plan strings).
  PlanPins Without(const std::string& key) const;
  // The keys that are pinned, in plan-string order.
  std::vector<std::string> Keys() const;
  // Sets the search's per-point choices of *plan (PlanFieldRole::kChoice) to the pins, else
  // to their defaults.
  void SetKnobs(ParallelPlan* plan) const;

 private:
  std::array<std::optional<int64_t>, kNumPlanFields> values_{};
};
// "tp=1,zero=3": plan-string keys (planner/parallel_plan.h) to pin, each at most once, each
// in its field's pin range. Throws InputError naming the key and the allowed values.
PlanPins ParsePlanPins(const std::string& text, const std::string& source = "--only");

struct PlanSpaceOptions {
  bool allow_tp_across_nodes = false;  // else tp must divide gpus_per_node
  bool uneven_stages = true;           // also try LighterEndsSplit on pp > 1 (above)
  PlanPins pins;
  // The recompute policies to try, in grid order; empty: the framework's
  // (OfferedRecomputePolicies). A recompute pin replaces them.
  std::vector<RecomputePolicy> recomputes;
};

struct MeshShape {
  int64_t dp = 1, tp = 1, pp = 1, cp = 1;
  int64_t ep = 1;  // carved out of dp (planner/mesh_layout.h)
  int64_t weight_replicas() const { return dp * cp; }  // as ParallelPlan::weight_replicas()
};

// The pipeline choices of one candidate: schedule, virtual stages and the stage split.
struct ScheduleChoice {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;
  StageSplit split{};  // 0, 0: even stages
};

// The values of the inner axes for one mesh, in enumeration order.
struct MeshAxes {
  std::span<const bool> sequence_parallel;
  std::span<const int64_t> micro_batch;
  std::span<const ScheduleChoice> schedule;
  std::span<const int> zero_stage;  // the stages offered at this mesh's replicas and pp
  std::span<const RecomputePolicy> recompute;

  // Candidates that differ only in zero and recompute (each axis holds only what the
  // framework offers this mesh, so neither enters a constraint).
  int64_t inner_size() const { return static_cast<int64_t>(zero_stage.size() * recompute.size()); }
  int64_t size() const {
    return static_cast<int64_t>(sequence_parallel.size() * micro_batch.size() * schedule.size()) *
           inner_size();
  }
};

class PlanSpace {
 public:
  PlanSpace(const ModelSpec& model, const TrainingSpec& training, const ClusterSpec& cluster,
            const PlanSpaceOptions& options);

  int64_t size() const { return size_; }  // candidates in the grid
  int64_t num_meshes() const { return static_cast<int64_t>(meshes_.size()); }
  int64_t num_micro_batches() const { return static_cast<int64_t>(micro_batches_.size()); }
  const MeshShape& mesh(int64_t i) const { return meshes_[i]; }
  int64_t mesh_offset(int64_t i) const { return offsets_[i]; }  // ordinal of its first candidate
  MeshAxes axes(const MeshShape& mesh) const;

  // For CheckPlan(): TpGroupLimit() of the cluster and allow_tp_across_nodes.
  int64_t tp_group_limit() const { return tp_group_limit_; }
  int64_t world_size() const { return world_size_; }
  // A grid point's overlap and offload choices before the search varies them: the pins,
  // else the defaults (planner/parallel_plan.h).
  void SetBaseKnobs(ParallelPlan* plan) const;
  const PlanPins& pins() const { return pins_; }

  // Where `plan` sits in the grid (nullopt: not a candidate, e.g. zero=1 with dp=1).
  std::optional<int64_t> OrdinalOf(const ParallelPlan& plan) const;
  // The candidate that stands for `plan` when the grid leaves it out as a duplicate
  // (pp == 1 with another schedule -> the single stage's entry; zero > 0 with dp*cp == 1 ->
  // zero 0); else plan.
  ParallelPlan Canonical(const ParallelPlan& plan) const;

 private:
  int64_t world_size_ = 0;
  int64_t tp_group_limit_ = 0;
  PlanPins pins_;
  std::vector<MeshShape> meshes_;
  std::vector<int64_t> offsets_;
  int64_t size_ = 0;
  // sp values for tp == 1 and tp > 1 (std::array: a span needs contiguous bools).
  std::array<bool, 2> sp_single_{}, sp_multi_{};
  size_t sp_single_n_ = 0, sp_multi_n_ = 0;
  std::vector<int64_t> micro_batches_;
  std::vector<ScheduleChoice> single_stage_schedules_;
  // Per distinct pp > 1 of the meshes: the schedule choices (the stage split depends on pp).
  std::vector<std::pair<int64_t, std::vector<ScheduleChoice>>> pipelined_schedules_;
  // dp*cp == 1; > 1; > 1 with tp or cp > 1 (pp == 1); > 1 with pp > 1 (ZeroOfferFor)
  std::vector<int> zero_single_, zero_multi_, zero_tp_cp_, zero_pipelined_;
  std::vector<RecomputePolicy> recomputes_;
};

// The uneven split the grid tries on pp stages: LighterEndsSplit when pp does not divide
// the layers; when it does, only if that lowers the largest stage's parameters (blocks,
// plus the vocabulary matrix on the first and last stage: models whose embedding or
// lm_head outweighs a block). nullopt: even stages only.
std::optional<StageSplit> UnevenSplitWorthTrying(const ModelSpec& model, int64_t pp);

// The interleaved choices on lighter ends: among the vpp >= 2 that divide the middle
// stages' count of `split` (UnevenSplitWorthTrying's) and have a LighterEndsSplit(L, pp,
// vpp), the smallest (the fewest sends) and the largest (the smallest bubble), or the
// pinned vpp alone. 126 layers on pp=16 (middle 8): vpp 2 and 8 (4 when pinned), each
// 7 + 14 x 8 + 7. Two, not all: the search must stay fast (docs/benchmarks.md).
std::vector<ScheduleChoice> UnevenInterleavedChoices(const ModelSpec& model, int64_t pp,
                                                     const StageSplit& split,
                                                     std::optional<int64_t> pinned_vpp = {});

// Divisors of n (n >= 1), ascending.
std::vector<int64_t> Divisors(int64_t n);

}  // namespace meshplan
