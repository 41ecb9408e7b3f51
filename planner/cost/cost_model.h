// The analytic cost model: one call turns (model, cluster, training, plan) into
// a PlanCost: parameters, FLOPs, memory, communication, step time, MFU, fit.
//
// Estimate() is what `meshplan estimate` prints, what the search ranks (millions
// of times: it allocates nothing on the hot path) and what the simulator's
// event timeline must agree with where no overlap or pipelining is involved.
#pragma once

#include "planner/cluster_spec.h"
#include "planner/cost/step_work.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/training_spec.h"

namespace meshplan {

struct EstimateOptions {
  MemoryModel memory_model = MemoryModel::kDetailed;
  double memory_headroom = 0.0;  // fraction of GPU memory kept free (0.1 = plans may use 90%)
};

// The GPU memory a plan may use: the capacity less the headroom fraction. A plan fits
// (PlanCost::fits) when its peak memory per GPU is at most this.
double UsableBytes(const GpuSpec& gpu, double memory_headroom);

// The plan must be valid (Validate() empty); the result for an invalid plan is unspecified.
// A plan that offloads is judged against the cluster's host memory too (PlanCost::fits_host);
// callers check MissingHostField() (planner/cost/offload.h) first and refuse the plan
// when the cluster has no host data.
PlanCost Estimate(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
                  const ParallelPlan& plan, const EstimateOptions& options = {});

// Estimate() in two halves, for the search's variants of one candidate that differ only in
// overlap choices (planner/search/knob_variants.h): everything but the step time, with
// the step's work in *work (freshly default-constructed); then the time of `work` (its choices set by SetPlanKnobs,
// planner/cost/step_work.h), tokens/s and utilisation over the plan's GPUs.
PlanCost EstimateUntimed(const ModelSpec& model, const ClusterSpec& cluster,
                         const TrainingSpec& training, const ParallelPlan& plan,
                         const EstimateOptions& options, StepWork* work);
void AddStepTime(const ClusterSpec& cluster, const TrainingSpec& training,
                 const ParallelPlan& plan, const StepWork& work, PlanCost* cost);
// A plan's memory and fit (cost->memory, fits, ...), the rest of *cost kept: for a variant
// of an estimated plan that differs from it only in overlap and offload choices.
void EstimateVariantMemory(const ModelSpec& model, const ClusterSpec& cluster,
                           const TrainingSpec& training, const ParallelPlan& plan,
                           const EstimateOptions& options, PlanCost* cost);
// PlanCost::fits, fits_host, reason and host_bytes_per_node from cost->memory: within the
// usable GPU memory and, when the plan offloads, the node's host memory (same headroom).
void JudgeFit(const ClusterSpec& cluster, const EstimateOptions& options, PlanCost* cost);
// The same with the step time already computed (AnalyticStepTime of the plan's work).
void SetStepTime(const ClusterSpec& cluster, const TrainingSpec& training,
                 const ParallelPlan& plan, const StepTimeBreakdown& time, PlanCost* cost);

}  // namespace meshplan
