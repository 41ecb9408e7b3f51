// PlanCost as JSON and as a readable table: what `meshplan estimate` prints, and what
// search, compare and the GUI reuse so every command spells a PlanCost the same way.
//
// JSON keys (units in the names, SI): params_total, params_per_rank,
// memory {total_bytes, breakdown {params_bytes, grads_bytes, optimizer_bytes,
// activations_bytes, logits_bytes, comm_buffer_bytes, gathered_params_bytes,
// transient_bytes, cuda_context_bytes, nccl_buffers_bytes, workspace_bytes,
// allocator_overhead_bytes}, peak_phase, worst_stage}, flops_per_step,
// flops_per_step_no_attention, hardware_flops_per_step, comm_bytes_per_step {dp, tp, cp,
// pp}, step_time_s, time {compute_s, recompute_s, exposed_comm_s {dp, tp, cp, pp},
// bubble_s, optimizer_s, total_s}, tokens_per_s, tokens_per_s_per_gpu,
// model_flops_per_s_per_gpu, mfu, mfu_no_attention, hfu, fits, fit_tight
// (over only by the allocator's assumed fragmentation: FitIsTight), reason.
// Pure functions; the table never throws.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/plan_cost.h"
#include "planner/training_setup.h"

namespace meshplan {

// One line of the report: a part of the memory peak or of the step time. The one list of
// these lines that the table, the JSON breakdown and `search --explain-plan` share.
struct CostTerm {
  const char* key = "";  // the JSON key: "activations_bytes", "exposed_tp_s", ...
  std::string name;      // as the table prints it: "activations", "exposed tp communication"
  double value = 0;      // bytes or seconds
  double host = 0;       // memory: the part kept in host memory instead (offload)
  bool shown = true;     // the table prints it (ep: MoE models; offload: plans that offload;
                         // recompute and the overlap slowdown: when not 0)
  bool of_which = false; // a share of the line above (recompute of compute), not a part of
                         // the total of its own
};
// The memory parts of MemoryBreakdown (not the total), in the table's order.
std::vector<CostTerm> MemoryTerms(const MemoryBreakdown& memory);
// The step time parts of StepTimeBreakdown (not the total), in the table's order, for
// `plan` of `model`.
std::vector<CostTerm> TimeTerms(const StepTimeBreakdown& time, const ModelSpec& model,
                                const ParallelPlan& plan);

nlohmann::json PerMeshDimToJson(const PerMeshDim& values);  // {"dp":..,"tp":..,"cp":..,"pp":..,"ep":..}
nlohmann::json MemoryToJson(const MemoryBreakdown& memory);
// {compute_s, recompute_s, exposed_comm_s {dp, tp, cp, pp}, bubble_s, optimizer_s, total_s}:
// the "time" object of estimate, search and simulate (analytic and simulated alike).
nlohmann::json StepTimeToJson(const StepTimeBreakdown& time);
nlohmann::json CostToJson(const PlanCost& cost);

// What was estimated, for the table's header and the JSON's "setup" section.
nlohmann::json SetupToJson(const PlanFile& setup);  // model, cluster, gpus, batch, seq, plan

// The cluster in one line, with what the NxGPU shorthand assumes spelled out: "1 node x 8
// h100-sxm (79.6 GiB each); in a node NVLink4 450 GB/s, between nodes InfiniBand NDR 400G
// 50 GB/s per GPU". Every command's header and the GUI's Setup panel use it.
std::string DescribeCluster(const ClusterSpec& cluster);

// For a plan over the GPU only by the allocator's assumed fragmentation (FitIsTight):
// "; 6.7 GiB of it is the allocator's assumed fragmentation: it fits if the allocator wastes
// less", what the no-fit reason and search's reports append; "" for any other plan.
std::string TightNote(const PlanCost& cost);

// A multi-line breakdown: parameters, memory parts in GiB against the GPU's capacity,
// FLOPs, communication per mesh dimension, the step time split, tokens/s (in all and per
// GPU), model TFLOP/s per GPU, MFU/HFU with the FLOP convention, fit.
std::string FormatCostTable(const PlanFile& setup, const PlanCost& cost);

}  // namespace meshplan
