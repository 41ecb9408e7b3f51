#include "planner/cost/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "planner/cost/flops.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"
#include "planner/cost/step_time.h"
#include "planner/cost/step_work.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

// The distinct pipeline stages: first, last and (pp > 2) a middle one.
int DistinctStages(const ParallelPlan& plan, int64_t out[3]) {
  out[0] = 0;
  out[1] = plan.pp - 1;
  out[2] = 1;
  return plan.pp > 2 ? 3 : plan.pp == 2 ? 2 : 1;
}

// "needs 61.2 GB, GPU has 48.3 GB (headroom 0%)": formatted only for plans that do not fit.
std::string NoFitReason(double needed_bytes, double capacity_bytes, double headroom,
                        double usable) {
  char buffer[160];
  const auto end =
      headroom > 0
          ? fmt::format_to_n(buffer, sizeof(buffer) - 1,
                             "needs {:.1f} GB, GPU has {:.1f} GB (headroom {:.0f}%: {:.1f} GB usable)",
                             ToGB(needed_bytes), ToGB(capacity_bytes), headroom * 100, ToGB(usable))
          : fmt::format_to_n(buffer, sizeof(buffer) - 1, "needs {:.1f} GB, GPU has {:.1f} GB (headroom 0%)",
                             ToGB(needed_bytes), ToGB(capacity_bytes));
  return std::string(buffer, end.out);
}

}  // namespace

double UsableBytes(const GpuSpec& gpu, double memory_headroom) {
  return static_cast<double>(gpu.memory_bytes) * (1 - memory_headroom);
}

void JudgeFit(const ClusterSpec& cluster, const EstimateOptions& options, PlanCost* cost) {
  const double capacity = static_cast<double>(cluster.gpu.memory_bytes);
  const double usable = UsableBytes(cluster.gpu, options.memory_headroom);
  cost->fits = cost->memory.total_bytes <= usable;
  cost->fits_host = true;
  cost->reason.clear();
  if (!cost->fits)
    cost->reason = NoFitReason(cost->memory.total_bytes, capacity, options.memory_headroom, usable);
  // Host memory (offload): the node's GPUs share its DRAM, less the same headroom.
  cost->host_bytes_per_node =
      cost->memory.host_total_bytes() * static_cast<double>(cluster.gpus_per_node);
  if (cost->host_bytes_per_node <= 0) return;
  const double host_usable =
      static_cast<double>(cluster.host.memory_bytes_per_node) * (1 - options.memory_headroom);
  cost->fits_host = cost->host_bytes_per_node <= host_usable;
  if (cost->fits_host) return;
  if (cost->fits)
    cost->reason = fmt::format(
        "{}: needs {:.1f} GB of host memory per node ({} GPUs x {:.1f} GB), node has {:.1f} GB "
        "({:.1f} GB usable)",
        kHostMemoryExceeded, ToGB(cost->host_bytes_per_node), cluster.gpus_per_node,
        ToGB(cost->memory.host_total_bytes()), ToGB(double(cluster.host.memory_bytes_per_node)),
        ToGB(host_usable));
  cost->fits = false;
}

PlanCost EstimateUntimed(const ModelSpec& model, const ClusterSpec& cluster,
                         const TrainingSpec& training, const ParallelPlan& plan,
                         const EstimateOptions& options, StepWork* work) {
  PlanCost cost;
  cost.params_total = CountParams(model);
  cost.params_active = CountActiveParams(model);

  BuildStepWork(model, training, plan, AttentionImpl::kAuto, work);
  int64_t stages[3];
  const int num_stages = DistinctStages(plan, stages);
  for (int i = 0; i < num_stages; ++i) {
    const StageParams stage = CountStageParams(model, plan, stages[i]);
    if (stage.total() > cost.params_per_rank) {
      cost.params_per_rank = stage.total();
      cost.expert_params_per_rank = stage.experts;
    }
    const PerMeshDim bytes = CommBytesPerStep(*work, stages[i]);
    for (MeshDim d : kAllCommDims)
      cost.comm_bytes_per_step[d] = std::max(cost.comm_bytes_per_step[d], bytes[d]);
  }

  const StepFlops flops = StepFlopsOf(model, training, plan.recompute);
  cost.model_flops_per_step = flops.model;
  cost.model_flops_no_attention = flops.model_no_attention;
  cost.hardware_flops_per_step = flops.hardware;

  EstimateVariantMemory(model, cluster, training, plan, options, &cost);
  return cost;
}

void EstimateVariantMemory(const ModelSpec& model, const ClusterSpec& cluster,
                           const TrainingSpec& training, const ParallelPlan& plan,
                           const EstimateOptions& options, PlanCost* cost) {
  MemoryOptions memory;
  memory.runtime = cluster.gpu.runtime_memory;  // the seed model ignores it
  cost->memory = EstimateMemory(model, training, plan, options.memory_model, memory);
  JudgeFit(cluster, options, cost);

}

void AddStepTime(const ClusterSpec& cluster, const TrainingSpec& training,
                 const ParallelPlan& plan, const StepWork& work, PlanCost* cost) {
  SetStepTime(cluster, training, plan, AnalyticStepTime(work, cluster, training.precision), cost);
}

void SetStepTime(const ClusterSpec& cluster, const TrainingSpec& training,
                 const ParallelPlan& plan, const StepTimeBreakdown& time, PlanCost* cost) {
  cost->time = time;
  const double seconds = cost->time.total_s;
  cost->tokens_per_s =
      seconds > 0 ? static_cast<double>(training.tokens_per_step()) / seconds : 0;
  const double peak = cluster.gpu.PeakFlops(training.precision);
  const int64_t gpus = plan.world_size();
  cost->mfu = Utilization(cost->model_flops_per_step, gpus, peak, seconds);
  cost->mfu_no_attention = Utilization(cost->model_flops_no_attention, gpus, peak, seconds);
  cost->hfu = Utilization(cost->hardware_flops_per_step, gpus, peak, seconds);
  if (training.precision == Precision::kFp8)
    cost->mfu_fp8_peak =
        Utilization(cost->model_flops_per_step, gpus, cluster.gpu.peak_flops_fp8, seconds);
}

PlanCost Estimate(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
                  const ParallelPlan& plan, const EstimateOptions& options) {
  StepWork work;
  PlanCost cost = EstimateUntimed(model, cluster, training, plan, options, &work);
  AddStepTime(cluster, training, plan, work, &cost);
  return cost;
}

}  // namespace meshplan
