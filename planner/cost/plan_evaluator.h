// PlanEvaluator: Estimate() (planner/cost/cost_model.h) in parts, for the search's hot path
// (planner/search/knob_variants.h) and nothing else. A base plan's StepWork and its
// knob-independent times are built once (EstimateBase); its overlap and offload variants are
// then timed and re-costed from them without rebuilding the work. Bases are evaluated in
// turn, and a base of the same shape as the one before (SameShape: only its ZeRO stage,
// recompute and knobs differ) reuses its PlanShape (planner/cost/plan_shape.h): the search
// walks a grid point's ZeRO and recompute choices one after another. Every result equals
// Estimate() of the same plan. One evaluator per thread: it holds one StepWork and one
// PlanShape with its GEMM and attention times (KernelTimes, planner/cost/step_time.h): large,
// keep it on the stack, do not copy it. Allocates nothing but PlanCost strings.
#pragma once

#include <array>
#include <optional>

#include "planner/cluster_spec.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/flops.h"
#include "planner/cost/plan_shape.h"
#include "planner/cost/step_time.h"
#include "planner/cost/step_work.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/training_spec.h"

namespace meshplan {

class PlanEvaluator {
 public:
  // `explain_no_fit` false: PlanCost::reason is left empty (ExplainNoFit below writes it),
  // for a search that reports few of the plans that do not fit.
  PlanEvaluator(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
                const EstimateOptions& options, bool explain_no_fit = true);
  PlanEvaluator(const PlanEvaluator&) = delete;
  PlanEvaluator& operator=(const PlanEvaluator&) = delete;

  // Estimate(plan); keeps the plan's work and times for its variants, which follow it.
  PlanCost EstimateBase(const ParallelPlan& plan);
  // The step time of the base's work with `variant`'s overlap and offload choices (the base
  // plan with only those changed).
  StepTimeBreakdown TimeVariant(const ParallelPlan& variant);
  // `base` (EstimateBase's cost) re-costed for `variant`: its memory and fit estimated
  // again, its time from the base's work (TimeVariant).
  PlanCost EstimateVariant(const ParallelPlan& variant, const PlanCost& base);
  // *cost's time, tokens/s and utilisations from `time`, a time of `plan`.
  void SetTime(const ParallelPlan& plan, const StepTimeBreakdown& time, PlanCost* cost) const;

 private:
  const ModelSpec& model_;
  const ClusterSpec& cluster_;
  const TrainingSpec& training_;
  const EstimateOptions options_;
  const bool explain_;
  const int64_t params_total_, params_active_;  // the model's (CountParams, CountActiveParams)
  std::array<StepFlops, kNumBlockRecomputes> flops_;  // StepFlopsOf each block Recompute
  std::optional<ParallelPlan> shape_plan_;  // the plan shape_ was derived from
  PlanShape shape_;
  KernelTimes kernel_times_;  // of shape_'s work
  StepWork work_;
  StepWorkTimes times_;
};

// cost->reason for a cost of `cluster` and `options` (PlanEvaluator's, fits and memory set):
// why it does not fit, GPU or host memory; empty when it fits.
void ExplainNoFit(const ClusterSpec& cluster, const EstimateOptions& options, PlanCost* cost);

}  // namespace meshplan
