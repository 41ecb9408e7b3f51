#include "planner/cost/plan_evaluator.h"

#include <new>
#include <type_traits>

#include <fmt/format.h>

#include <algorithm>

#include "planner/cost/cost_report.h"
#include "planner/cost/flops.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

// A node's host memory less the headroom.
double HostUsableBytes(const ClusterSpec& cluster, const EstimateOptions& options) {
  return static_cast<double>(cluster.host.memory_bytes_per_node) * (1 - options.memory_headroom);
}

// "needs 61.2 GiB, GPU has 48.3 GiB (headroom 0%)": formatted only for plans that do not fit.
std::string NoFitReason(double needed_bytes, double capacity_bytes, double headroom,
                        double usable) {
  char buffer[160];
  const auto end =
      headroom > 0
          ? fmt::format_to_n(buffer, sizeof(buffer) - 1,
                             "needs {:.1f} GiB, GPU has {:.1f} GiB (headroom {:.0f}%: {:.1f} GiB usable)",
                             ToGiB(needed_bytes), ToGiB(capacity_bytes), headroom * 100, ToGiB(usable))
          : fmt::format_to_n(buffer, sizeof(buffer) - 1, "needs {:.1f} GiB, GPU has {:.1f} GiB (headroom 0%)",
                             ToGiB(needed_bytes), ToGiB(capacity_bytes));
  return std::string(buffer, end.out);
}

// PlanCost::fits, fits_host, usable_bytes and host_bytes_per_node from cost->memory: within
// the usable GPU memory and, when the plan offloads, the node's host memory (same headroom);
// the reason cleared (ExplainNoFit writes it).
void JudgeFit(const ClusterSpec& cluster, const EstimateOptions& options, PlanCost* cost) {
  const double usable = UsableBytes(cluster.gpu, options.memory_headroom);
  cost->fits = cost->memory.total_bytes <= usable;
  cost->usable_bytes = usable;
  cost->fits_host = true;
  cost->reason.clear();
  // Host memory (offload): the node's GPUs share its DRAM, less the same headroom.
  cost->host_bytes_per_node =
      cost->memory.host_total_bytes() * static_cast<double>(cluster.gpus_per_node);
  if (cost->host_bytes_per_node <= 0) return;
  cost->fits_host = cost->host_bytes_per_node <= HostUsableBytes(cluster, options);
  if (!cost->fits_host) cost->fits = false;
}

// A plan's memory and fit (cost->memory, fits, ...), the rest of *cost kept.
// `explain`: with the reason (ExplainNoFit).
void EstimateMemoryAndFit(const ModelSpec& model, const ClusterSpec& cluster,
                          const TrainingSpec& training, const ParallelPlan& plan,
                          const EstimateOptions& options, const PlanShape& shape, bool explain,
                          PlanCost* cost) {
  MemoryOptions memory;
  memory.runtime = cluster.gpu.runtime_memory;  // the seed model ignores it
  cost->memory = EstimateMemory(model, training, plan, options.memory_model, memory, shape);
  JudgeFit(cluster, options, cost);
  if (explain) ExplainNoFit(cluster, options, cost);
}

}  // namespace

void ExplainNoFit(const ClusterSpec& cluster, const EstimateOptions& options, PlanCost* cost) {
  cost->reason.clear();
  if (cost->fits) return;
  const double capacity = static_cast<double>(cluster.gpu.memory_bytes);
  const double usable = UsableBytes(cluster.gpu, options.memory_headroom);
  if (cost->memory.total_bytes > usable) {
    cost->reason = NoFitReason(cost->memory.total_bytes, capacity, options.memory_headroom, usable) +
                   TightNote(*cost);
    return;
  }
  // Within the GPU's memory: the node's host memory is what it exceeds (JudgeFit).
  cost->reason = fmt::format(
      "{}: needs {:.1f} GiB of host memory per node ({} GPUs x {:.1f} GiB), node has {:.1f} GiB "
      "({:.1f} GiB usable)",
      kHostMemoryExceeded, ToGiB(cost->host_bytes_per_node), cluster.gpus_per_node,
      ToGiB(cost->memory.host_total_bytes()), ToGiB(double(cluster.host.memory_bytes_per_node)),
      ToGiB(HostUsableBytes(cluster, options)));
}

PlanEvaluator::PlanEvaluator(const ModelSpec& model, const ClusterSpec& cluster,
                             const TrainingSpec& training, const EstimateOptions& options,
                             bool explain_no_fit)
    : model_(model),
      cluster_(cluster),
      training_(training),
      options_(options),
      explain_(explain_no_fit),
      params_total_(CountParams(model)),
      params_active_(CountActiveParams(model)) {
  for (size_t r = 0; r < flops_.size(); ++r)
    flops_[r] = StepFlopsOf(model, training, static_cast<Recompute>(r));
}

PlanCost PlanEvaluator::EstimateBase(const ParallelPlan& plan) {
  PlanCost cost;
  cost.params_total = params_total_;
  cost.params_active = params_active_;

  const bool new_shape = !shape_plan_ || !SameShape(plan, *shape_plan_);
  if (new_shape) {
    MakePlanShape(model_, training_, plan, AttentionImpl::kAuto, &shape_);
    shape_plan_ = plan;
  }
  // BuildStepWork's contract: a fresh one, default-initialised in place (assigning a StepWork{}
  // builds a temporary of tens of KiB and copies it; `new StepWork()` or construct_at would
  // value-initialise it, zero-filling all of it).
  static_assert(std::is_trivially_destructible_v<StepWork>);
  ::new (&work_) StepWork;
  BuildStepWork(model_, training_, plan, shape_, &work_);
  if (new_shape) kernel_times_ = TimeKernels(work_, cluster_, training_.precision);
  // The distinct pipeline stages: first, last and (pp > 2) a middle one.
  const int64_t stages[3] = {0, plan.pp - 1, 1};
  const int num_stages = plan.pp > 2 ? 3 : plan.pp == 2 ? 2 : 1;
  for (int i = 0; i < num_stages; ++i) {
    const StageParams& stage = shape_.stage(stages[i]).params;
    if (stage.total() > cost.params_per_rank) {
      cost.params_per_rank = stage.total();
      cost.expert_params_per_rank = stage.experts;
    }
    const PerMeshDim bytes = CommBytesPerStep(work_, stages[i]);
    for (MeshDim d : kAllCommDims)
      cost.comm_bytes_per_step[d] = std::max(cost.comm_bytes_per_step[d], bytes[d]);
  }

  // every:N counts each stage's checkpointed blocks; the other policies' FLOPs are the model's.
  const StepFlops flops = plan.recompute.kind == Recompute::kEvery
                              ? StepFlopsOf(model_, training_, plan)
                              : flops_[static_cast<size_t>(plan.recompute.kind)];
  cost.model_flops_per_step = flops.model;
  cost.model_flops_no_attention = flops.model_no_attention;
  cost.hardware_flops_per_step = flops.hardware;

  EstimateMemoryAndFit(model_, cluster_, training_, plan, options_, shape_, explain_, &cost);
  times_ = TimeStepWork(work_, cluster_, training_.precision, kernel_times_);
  SetTime(plan, AnalyticStepTime(work_, cluster_, times_), &cost);
  return cost;
}

StepTimeBreakdown PlanEvaluator::TimeVariant(const ParallelPlan& variant) {
  // offload_act: the base's work holds no offloaded bytes unless the base offloads too.
  if (variant.offload_activations && work_.offload.activation_bytes_per_block == 0)
    work_.offload.activation_bytes_per_block = OffloadedBytesPerBlock(shape_, variant);
  SetPlanKnobs(variant, &work_);
  return AnalyticStepTime(work_, cluster_, times_);
}

PlanCost PlanEvaluator::EstimateVariant(const ParallelPlan& variant, const PlanCost& base) {
  PlanCost cost = base;
  EstimateMemoryAndFit(model_, cluster_, training_, variant, options_, shape_, explain_, &cost);
  SetTime(variant, TimeVariant(variant), &cost);
  return cost;
}

void PlanEvaluator::SetTime(const ParallelPlan& plan, const StepTimeBreakdown& time,
                            PlanCost* cost) const {
  cost->time = time;
  const double seconds = cost->time.total_s;
  cost->tokens_per_s =
      seconds > 0 ? static_cast<double>(training_.tokens_per_step()) / seconds : 0;
  const double peak = cluster_.gpu.PeakFlops(training_.precision);
  const int64_t gpus = plan.world_size();
  cost->tokens_per_s_per_gpu =
      PerGpuRate(static_cast<double>(training_.tokens_per_step()), gpus, seconds);
  cost->model_flops_per_s_per_gpu = PerGpuRate(cost->model_flops_per_step, gpus, seconds);
  cost->mfu = Utilization(cost->model_flops_per_step, gpus, peak, seconds);
  cost->mfu_no_attention = Utilization(cost->model_flops_no_attention, gpus, peak, seconds);
  cost->hfu = Utilization(cost->hardware_flops_per_step, gpus, peak, seconds);
  if (training_.precision == Precision::kFp8)
    cost->mfu_fp8_peak =
        Utilization(cost->model_flops_per_step, gpus, cluster_.gpu.peak_flops_fp8, seconds);
}

}  // namespace meshplan
