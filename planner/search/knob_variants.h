// KnobVariants: the overlap and offload choices the search tries on each grid point
// (issue 17), and how it keeps their cost down.
//
// The grid (planner/search/plan_space.h) enumerates a plan's structure; each valid grid
// point is a base candidate with its choices at the pins or the defaults (tp_overlap 0,
// dp_overlap 1, prefetch 1, nothing offloaded). Unpinned choices are then tried on it:
//  1. tp_overlap (tp > 1) changes the time only: it is flipped on the base's work and kept
//     when faster (two timings of one StepWork, one memory estimate). It is a real trade-off:
//     overlap hides TP time but slows the overlapped GEMMs (GpuSpec::comm_overlap_slowdown).
//     dp_overlap=0 (dp*cp > 1) exposes the gradient sync that overlap hides, which costs
//     more than the compute that overlap slows (planner/cost/step_time.h): dominated,
//     counted without a timing. pp_overlap=0 on an interleaved pipeline whose framework
//     overlaps its sends (FrameworkSpec::pp_overlap) exposes what 1 hides behind the next
//     chunk for less slowdown: 1 is set before the base's timing. The slower setting of each
//     is not ranked (same memory, more time).
//  2. prefetch (zero=3): 0 keeps one gathered block less and exposes every gather; it is
//     tried only when the base does not fit and one gathered block could make it fit. Depths
//     above 1 time as 1 in the closed form with more memory (dominated): only when pinned.
//  3. offload (the cluster has host data, HostSpec::known()): a plan that fits without
//     offload is only slower with it (dominated), so offload is tried only on a base that does
//     not fit in GPU memory, and only the combinations whose largest possible saving (the
//     base's optimizer states and Adam temporaries; its activations; its parameter shard;
//     plus the allocator overhead on them) could bring it under the limit, in this order:
//     offload_act, offload_opt, both, and on zero=3 offload_opt + offload_params without and
//     with offload_act, each only if the framework runs it (FrameworkSpec::offload); a
//     combination that holds one that already fits is dominated (more
//     offload, more time: the CPU AdamW is slower than the GPU's) and skipped. A variant
//     re-estimates memory only; its time comes from the base's StepWork with the variant's
//     choices set, and from the base's GEMM and collective times (StepWorkTimes,
//     planner/cost/step_time.h), which those choices do not change. Each keeps the base's overlap choices.
// Every variant kept is a candidate: it keeps the grid point's ordinal and gets its own
// variant index (the tie-break after the ordinal), so results are the same for any
// thread count. Pure; allocates nothing but the PlanCost strings.
#pragma once

#include <cstdint>

#include "planner/cluster_spec.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/plan_evaluator.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/search/plan_space.h"
#include "planner/training_spec.h"

namespace meshplan {

// What the variants of one search did, summed over its candidates (--explain).
struct KnobTally {
  int64_t timings = 0;              // step-time evaluations (bases, overlap flips, variants)
  int64_t tp_overlap_on = 0;        // bases (tp > 1, unpinned) where tp_overlap=1 was faster
  int64_t tp_overlap_off = 0;       // ... where it was not (the compute slowdown outweighs it)
  int64_t dp_overlap_dominated = 0; // bases (dp*cp > 1, unpinned): dp_overlap=0 is never faster
  int64_t pp_overlap_on = 0;        // interleaved bases (unpinned) the framework overlaps: set to 1
  int64_t prefetch0_tried = 0;      // zero=3 bases that did not fit, prefetch=0 evaluated
  int64_t prefetch0_fit = 0;        // ... and then fit
  int64_t offload_tried = 0;        // offload variants evaluated
  int64_t offload_fit = 0;          // ... that fit in GPU and host memory
  int64_t offload_pruned = 0;       // offload combinations skipped: could not save enough
  int64_t offload_dominated = 0;    // ... skipped: a smaller combination already fits
  int64_t host_memory_exceeded = 0; // offload variants that fit the GPU but not host memory
  void Add(const KnobTally& other);
};

// Receives each candidate kept: the plan, its cost and its variant index (0: the grid point
// with its chosen overlap; 1: prefetch=0; 2..: offload combinations). A plain function
// pointer and its context: no allocation per candidate.
using OfferCandidateFn = void (*)(void* context, const ParallelPlan& plan, const PlanCost& cost,
                                  int variant);

struct KnobSearch {
  const ModelSpec& model;
  const ClusterSpec& cluster;
  const TrainingSpec& training;
  const PlanSpace& space;      // its pins fix choices
  EstimateOptions estimate;
};

// The base (a valid grid point with SetBaseKnobs applied) and the variants kept, each
// handed to offer(context, ...) in variant order. `evaluator`: this thread's, for
// search.model, cluster, training and estimate (planner/cost/plan_evaluator.h).
void EvaluateKnobVariants(const KnobSearch& search, PlanEvaluator* evaluator,
                          const ParallelPlan& base, KnobTally* tally, OfferCandidateFn offer,
                          void* context);

}  // namespace meshplan
