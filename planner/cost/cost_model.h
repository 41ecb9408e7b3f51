// The analytic cost model: one call turns (model, cluster, training, plan) into
// a PlanCost: parameters, FLOPs, memory, communication, step time, MFU, fit.
//
// Estimate() is what `meshplan estimate` prints, what the search ranks (millions
// of times, through planner/cost/plan_evaluator.h: it allocates nothing on the hot path)
// and what the simulator's event timeline must agree with where no overlap or pipelining
// is involved.
#pragma once

#include "planner/cluster_spec.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/training_spec.h"

namespace meshplan {

struct EstimateOptions {
  MemoryModel memory_model = MemoryModel::kDetailed;
  double memory_headroom = 0.0;  // fraction of GPU memory kept free (0.1 = plans may use 90%)
};

// The headroom `estimate`, `search`, `simulate` and the GUI keep free unless told otherwise:
// memory the cost model does not see (a framework's own extra buffers, fragmentation beyond
// the allocator model, a longer batch); a planning margin, not a measured quantity, so it
// is stated beside every verdict. Published runs are judged at 0 (`validate`: they ran).
inline constexpr double kDefaultMemoryHeadroom = 0.05;

// The GPU memory a plan may use: the capacity less the headroom fraction. A plan fits
// (PlanCost::fits) when its peak memory per GPU is at most this.
double UsableBytes(const GpuSpec& gpu, double memory_headroom);

// The plan must be valid (Validate() empty); the result for an invalid plan is unspecified.
// A plan that offloads is judged against the cluster's host memory too (PlanCost::fits_host);
// callers check MissingHostField() (planner/cost/offload.h) first and refuse the plan
// when the cluster has no host data.
PlanCost Estimate(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
                  const ParallelPlan& plan, const EstimateOptions& options = {});

}  // namespace meshplan
