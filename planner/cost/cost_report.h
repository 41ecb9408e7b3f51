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
// model_flops_per_s_per_gpu, mfu, mfu_no_attention, hfu, fits, reason.
// Pure functions; the table never throws.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "planner/plan_cost.h"
#include "planner/training_setup.h"

namespace meshplan {

nlohmann::json PerMeshDimToJson(const PerMeshDim& values);  // {"dp":..,"tp":..,"cp":..,"pp":..,"ep":..}
nlohmann::json MemoryToJson(const MemoryBreakdown& memory);
// {compute_s, recompute_s, exposed_comm_s {dp, tp, cp, pp}, bubble_s, optimizer_s, total_s}:
// the "time" object of estimate, search and simulate (analytic and simulated alike).
nlohmann::json StepTimeToJson(const StepTimeBreakdown& time);
nlohmann::json CostToJson(const PlanCost& cost);

// What was estimated, for the table's header and the JSON's "setup" section.
nlohmann::json SetupToJson(const PlanFile& setup);  // model, cluster, gpus, batch, seq, plan

// A multi-line breakdown: parameters, memory parts in GB against the GPU's capacity,
// FLOPs, communication per mesh dimension, the step time split, tokens/s (in all and per
// GPU), model TFLOP/s per GPU, MFU/HFU with the FLOP convention, fit.
std::string FormatCostTable(const PlanFile& setup, const PlanCost& cost);

}  // namespace meshplan
