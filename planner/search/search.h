// Search: every candidate plan of a PlanSpace (planner/search/plan_space.h) judged by
// CheckPlan(), every valid one costed by Estimate(), the fitting ones ranked by
// predicted tokens/s.
//
// Contract:
//  * Exhaustive: `valid` equals the number of grid points that pass every rule, and
//    each of them is evaluated once.
//  * Deterministic: the result is the same for any thread count (ties in tokens/s
//    are broken by the grid ordinal, lower first; counts are sums).
//  * Bounded memory: the top K is a bounded heap per thread, merged at the end;
//    nothing of size "candidates" is ever stored (a dump streams its rows to its file
//    mesh by mesh).
//  * Search() throws nothing for a grid with no valid plan (valid == 0); the CLI turns
//    that into an InputError (DescribeNoValidPlan).
//  * Bounded time: a grid of more than SearchOptions::max_candidates candidates
//    (kMaxSearchCandidates, planner/limits.h) is refused with an InputError naming the
//    bound and how to shrink the grid (--only, --global-batch), before any is judged.
// Thread-safety: Search() is reentrant; the progress callback runs on the calling thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/limits.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/search/candidate_dump.h"
#include "planner/search/knob_variants.h"
#include "planner/search/pareto.h"
#include "planner/search/plan_space.h"
#include "planner/training_spec.h"

namespace meshplan {

struct SearchOptions {
  int top_k = 10;                // plans kept, best first
  double memory_headroom = 0.05; // fraction of GPU memory kept free (plans may use 95%)
  MemoryModel memory_model = MemoryModel::kDetailed;
  int threads = 0;               // worker threads; 0 = std::thread::hardware_concurrency()
  PlanSpaceOptions space;        // tp across nodes, pinned keys
  // When set, result.probe tells where this plan stands (--explain-plan).
  std::optional<ParallelPlan> probe;
  // The largest grid searched; more candidates are refused (InputError) before the walk.
  int64_t max_candidates = kMaxSearchCandidates;
  // Called on the calling thread about ten times a second while the workers run,
  // with meshes (dp, tp, pp, cp shapes) done and in all. May be empty.
  std::function<void(int64_t done, int64_t total)> progress;
  // When set, every evaluated (valid) candidate is written to it, in grid order, by the
  // workers (planner/search/candidate_dump.h); the caller commits it. Not owned.
  CandidateDump* dump = nullptr;
};

// How many candidates one rule removed.
struct ConstraintTally {
  int64_t removed = 0;   // candidates whose FIRST broken rule (PlanConstraint order) is this:
                         // the funnel; these sum to candidates - valid
  int64_t violated = 0;  // candidates that break it at all (a candidate may break several)
  std::optional<ParallelPlan> example;  // the lowest-ordinal candidate it removed
};

// Where the probe plan of SearchOptions stands.
struct ProbeReport {
  ParallelPlan plan;                   // as asked
  ParallelPlan candidate;              // the grid's stand-in (PlanSpace::Canonical)
  std::vector<PlanViolation> violations;  // Validate() with the cluster's placement rule
  bool in_space = false;               // the candidate is a grid point (not excluded by a pin)
  std::optional<PlanCost> cost;        // when valid
  std::optional<int64_t> rank;         // 1-based among the fitting plans, when it fits
};

struct SearchResult {
  int64_t candidates = 0;  // grid points
  int64_t valid = 0;       // pass every rule; each evaluated with its overlap choices
  int64_t variants = 0;    // prefetch / offload variants of them evaluated besides
                           // (planner/search/knob_variants.h)
  int64_t fitting = 0;     // of valid + variants: within memory (after the headroom)
  std::array<ConstraintTally, kNumPlanConstraints> constraints;
  int64_t removed_by_memory = 0;       // valid + variants - fitting
  int64_t removed_by_host_memory = 0;  // of those: within GPU memory, over host memory
                                       // (kHostMemoryExceeded, offload variants)
  KnobTally knobs;                     // the overlap / offload variants (knob_variants.h)
  std::optional<RankedPlan> smallest;  // least memory per GPU among the valid plans
  std::vector<RankedPlan> top;         // best first: tokens/s descending, then ordinal
  std::vector<RankedPlan> pareto;      // memory ascending (tokens/s ascending too)
  std::optional<ProbeReport> probe;
  int threads = 1;
  double wall_s = 0;
  double cpu_s = 0;              // CPU time of the process during the search, all threads
  double evaluations_per_s = 0;  // (valid + variants) / wall_s
};

SearchResult Search(const ModelSpec& model, const ClusterSpec& cluster,
                    const TrainingSpec& training, const SearchOptions& options);

// Why no plan is valid, for the InputError the CLI raises when result.valid == 0:
// the world size, then each rule that removed candidates with its count and an example.
std::string DescribeNoValidPlan(const SearchResult& result, const ModelSpec& model,
                                const ClusterSpec& cluster, const TrainingSpec& training,
                                const SearchOptions& options);

// The example message for one rule (Validate() of its example candidate), "" if none.
std::string ExampleMessage(const SearchResult& result, PlanConstraint constraint,
                           const ModelSpec& model, const ClusterSpec& cluster,
                           const TrainingSpec& training, const SearchOptions& options);

}  // namespace meshplan
