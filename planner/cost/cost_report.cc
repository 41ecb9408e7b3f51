#include "planner/cost/cost_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "planner/config/framework_yaml.h"
#include "planner/cost/flops.h"
#include "planner/names.h"
#include "planner/units_format.h"

namespace meshplan {

nlohmann::json PerMeshDimToJson(const PerMeshDim& values) {
  nlohmann::json out = nlohmann::json::object();
  for (MeshDim d : {MeshDim::kDp, MeshDim::kTp, MeshDim::kCp, MeshDim::kPp, MeshDim::kEp})
    out[ToString(d)] = values[d];
  return out;
}

std::vector<CostTerm> MemoryTerms(const MemoryBreakdown& m) {
  return {{"params_bytes", "parameters", m.params_bytes, m.host_params_bytes},
          {"grads_bytes", "gradients", m.grads_bytes},
          {"optimizer_bytes", "optimizer states", m.optimizer_bytes, m.host_optimizer_bytes},
          {"activations_bytes", "activations", m.activations_bytes, m.host_activations_bytes},
          {"logits_bytes", "logits / loss", m.logits_bytes},
          {"comm_buffer_bytes", "communication buffers", m.comm_buffer_bytes},
          {"gathered_params_bytes", "gathered parameters (ZeRO-3)", m.gathered_params_bytes},
          {"transient_bytes", "transient peak", m.transient_bytes},
          {"cuda_context_bytes", "CUDA context", m.cuda_context_bytes},
          {"nccl_buffers_bytes", "NCCL buffers", m.nccl_buffers_bytes},
          {"workspace_bytes", "workspaces (cuBLAS, attention)", m.workspace_bytes},
          {"allocator_overhead_bytes", "allocator overhead", m.allocator_overhead_bytes}};
}

std::vector<CostTerm> TimeTerms(const StepTimeBreakdown& t, const ModelSpec& model,
                                const ParallelPlan& plan) {
  const bool moe = model.moe.enabled();
  const PerMeshDim& comm = t.exposed_comm_s;
  return {
      {"compute_s", "compute", t.compute_s},
      {"recompute_s", "  of which recompute", t.recompute_s, 0, t.recompute_s > 0, true},
      {"exposed_dp_s", "exposed dp communication", comm[MeshDim::kDp]},
      {"exposed_tp_s", "exposed tp communication", comm[MeshDim::kTp]},
      {"exposed_cp_s", "exposed cp communication", comm[MeshDim::kCp]},
      {"exposed_pp_s", "exposed pp communication", comm[MeshDim::kPp]},
      {"exposed_ep_s", "exposed ep communication", comm[MeshDim::kEp], 0, moe},
      {"bubble_s", "pipeline bubble", t.bubble_s},
      {"optimizer_s", plan.offload_optimizer ? "optimizer (CPU)" : "optimizer", t.optimizer_s},
      {"offload_s", "exposed host copies (offload)", t.offload_s, 0, plan.offloads()},
      {"overlap_slowdown_s", "compute slowed by overlapped comm.", t.overlap_slowdown_s, 0,
       t.overlap_slowdown_s > 0}};
}

nlohmann::json MemoryToJson(const MemoryBreakdown& m) {
  nlohmann::json breakdown = nlohmann::json::object();
  for (const CostTerm& term : MemoryTerms(m)) breakdown[term.key] = term.value;
  return {{"total_bytes", m.total_bytes},
          {"breakdown", std::move(breakdown)},
          {"peak_phase", m.peak_phase},
          {"worst_stage", m.worst_stage},
          {"host",
           {{"total_bytes", m.host_total_bytes()},
            {"optimizer_bytes", m.host_optimizer_bytes},
            {"activations_bytes", m.host_activations_bytes},
            {"params_bytes", m.host_params_bytes}}}};
}

nlohmann::json StepTimeToJson(const StepTimeBreakdown& t) {
  return {{"compute_s", t.compute_s},
          {"recompute_s", t.recompute_s},
          {"exposed_comm_s", PerMeshDimToJson(t.exposed_comm_s)},
          {"bubble_s", t.bubble_s},
          {"optimizer_s", t.optimizer_s},
          {"offload_s", t.offload_s},
          {"overlap_slowdown_s", t.overlap_slowdown_s},
          {"total_s", t.total_s}};
}

nlohmann::json CostToJson(const PlanCost& c) {
  return {{"params_total", c.params_total},
          {"params_active", c.params_active},
          {"params_per_rank", c.params_per_rank},
          {"expert_params_per_rank", c.expert_params_per_rank},
          {"memory", MemoryToJson(c.memory)},
          {"flops_per_step", c.model_flops_per_step},
          {"flops_per_step_no_attention", c.model_flops_no_attention},
          {"hardware_flops_per_step", c.hardware_flops_per_step},
          {"comm_bytes_per_step", PerMeshDimToJson(c.comm_bytes_per_step)},
          {"step_time_s", c.time.total_s},
          {"time", StepTimeToJson(c.time)},
          {"tokens_per_s", c.tokens_per_s},
          {"tokens_per_s_per_gpu", c.tokens_per_s_per_gpu},
          {"model_flops_per_s_per_gpu", c.model_flops_per_s_per_gpu},
          {"mfu", c.mfu},
          {"mfu_no_attention", c.mfu_no_attention},
          {"hfu", c.hfu},
          {"mfu_fp8_peak", c.mfu_fp8_peak},
          {"host_bytes_per_node", c.host_bytes_per_node},
          {"fits", c.fits},
          {"fit_tight", FitIsTight(c)},
          {"usable_bytes", c.usable_bytes},
          {"fits_host", c.fits_host},
          {"reason", c.reason}};
}

nlohmann::json SetupToJson(const PlanFile& s) {
  return {{"model", s.model.name},
          {"cluster", s.cluster.name},
          {"gpu", s.cluster.gpu.name},
          {"gpus", s.cluster.world_size()},
          {"global_batch", s.training.global_batch},
          {"seq_len", s.training.seq_len},
          {"precision", ToString(s.training.precision)},
          {"framework", s.training.framework.name},
          {"framework_version", s.training.framework.version},
          {"plan", ToPlanString(s.plan)}};
}

namespace {

template <typename... Args>
void Line(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
  out += '\n';
}

}  // namespace

std::string DescribeCluster(const ClusterSpec& c) {
  return fmt::format("{} node{} x {} {} ({} each); in a node {} {:.0f} GB/s, between nodes {} "
                     "{:.0f} GB/s per GPU",
                     c.nodes, c.nodes == 1 ? "" : "s", c.gpus_per_node, c.gpu.name,
                     FormatGiB(static_cast<double>(c.gpu.memory_bytes), 1),
                     c.intra_node.name.empty() ? "link" : c.intra_node.name,
                     c.intra_node.bandwidth_Bps / 1e9,
                     c.inter_node.name.empty() ? "network" : c.inter_node.name,
                     c.inter_node.bandwidth_Bps / 1e9);
}

std::string TightNote(const PlanCost& cost) {
  if (!FitIsTight(cost)) return "";
  return fmt::format("; {} of it is the allocator's assumed fragmentation: it fits if the "
                     "allocator wastes less",
                     FormatGiB(cost.memory.allocator_overhead_bytes, 1));
}

std::string FormatCostTable(const PlanFile& s, const PlanCost& c) {
  std::string out;
  const MemoryBreakdown& m = c.memory;
  const StepTimeBreakdown& t = c.time;
  const double capacity = static_cast<double>(s.cluster.gpu.memory_bytes);

  Line(out, "{} on {}, global batch {} x {} tokens, {}, {}", s.model.name, s.cluster.name,
       s.training.global_batch, s.training.seq_len, ToString(s.training.precision),
       FrameworkLabel(s.training.framework));
  Line(out, "cluster: {}", DescribeCluster(s.cluster));
  Line(out, "plan: {}", ToPlanString(s.plan));
  out += '\n';
  Line(out, "Parameters");
  Line(out, "  {:<34}{:>18}", "total", GroupDigits(c.params_total));
  if (s.model.moe.enabled())
    Line(out, "  {:<34}{:>18}", "active per token", GroupDigits(c.params_active));
  Line(out, "  {:<34}{:>18}", "per rank (worst stage, before ZeRO)", GroupDigits(c.params_per_rank));
  if (s.model.moe.enabled()) {
    Line(out, "  {:<34}{:>18}", "  of which experts", GroupDigits(c.expert_params_per_rank));
    Line(out, "  {:<34}{:>18}", "routed experts per rank and layer",
         fmt::format("{} of {} (ep={})", s.model.moe.experts / std::max<int64_t>(s.plan.ep, 1),
                     s.model.moe.experts, s.plan.ep));
  }
  out += '\n';
  Line(out, "Memory per GPU (stage {}, peak: {}){:>8}", m.worst_stage, m.peak_phase, "GiB");
  Line(out, "  {:<34}{:>10}{:>10}", "", "device", "host");
  for (const CostTerm& part : MemoryTerms(m))
    Line(out, "  {:<34}{:>10.2f}{:>10.2f}", part.name, ToGiB(part.value), ToGiB(part.host));
  Line(out, "  {:<34}{:>10.2f}{:>10.2f}   of {:.2f} GiB ({:.0f}%)", "total", ToGiB(m.total_bytes),
       ToGiB(m.host_total_bytes()), ToGiB(capacity), PercentOf(m.total_bytes, capacity));
  if (c.host_bytes_per_node > 0)
    Line(out, "  {:<34}{:>20.2f}   of {:.2f} GiB per node", "host, all GPUs of a node",
         ToGiB(c.host_bytes_per_node), ToGiB(double(s.cluster.host.memory_bytes_per_node)));
  out += '\n';
  Line(out, "FLOPs per step");
  Line(out, "  {:<34}{:>10.3e}", "model (6*P_dense*tokens + attention)", c.model_flops_per_step);
  Line(out, "  {:<34}{:>10.3e}", "model without attention", c.model_flops_no_attention);
  Line(out, "  {:<34}{:>10.3e}", "hardware (with recompute)", c.hardware_flops_per_step);
  out += '\n';
  Line(out, "Communication per GPU per step{:>15}", "GiB");
  for (MeshDim d : {MeshDim::kDp, MeshDim::kTp, MeshDim::kCp, MeshDim::kPp})
    Line(out, "  {:<34}{:>10.3f}", ToString(d), ToGiB(c.comm_bytes_per_step[d]));
  if (s.model.moe.enabled())  // the expert all-to-alls (0 with ep = 1)
    Line(out, "  {:<34}{:>10.3f}", "ep (all-to-all)", ToGiB(c.comm_bytes_per_step[MeshDim::kEp]));
  out += '\n';
  Line(out, "Step time{:>35}{:>8}", "s", "share");
  auto time_line = [&](const std::string& name, double seconds) {
    Line(out, "  {:<34}{:>10.4f}{:>7.1f}%", name, seconds, PercentOf(seconds, t.total_s));
  };
  for (const CostTerm& part : TimeTerms(t, s.model, s.plan))
    if (part.shown) time_line(part.name, part.value);
  time_line("total", t.total_s);
  out += '\n';
  Line(out, "Throughput");
  Line(out, "  {:<34}{:>14.0f}", "tokens/s", c.tokens_per_s);
  Line(out, "  {:<34}{:>14.0f}", "tokens/s per GPU", c.tokens_per_s_per_gpu);
  Line(out, "  {:<34}{:>14}", "model TFLOP/s per GPU", FormatTflops(c.model_flops_per_s_per_gpu));
  // fp8 runs name the peak: the bf16 one (as every other precision) and the FP8 one.
  const bool fp8 = c.mfu_fp8_peak > 0;
  Line(out, "  {:<34}{:>13.1f}%", fp8 ? "MFU (with attention, bf16 peak)" : "MFU (with attention)",
       100 * c.mfu);
  if (fp8) Line(out, "  {:<34}{:>13.1f}%", "MFU (with attention, fp8 peak)", 100 * c.mfu_fp8_peak);
  Line(out, "  {:<34}{:>13.1f}%", fp8 ? "MFU (6*P_dense only, bf16 peak)" : "MFU (6*P_dense only)",
       100 * c.mfu_no_attention);
  Line(out, "  {:<34}{:>13.1f}%", fp8 ? "HFU (with recompute, bf16 peak)" : "HFU (with recompute)",
       100 * c.hfu);
  Line(out, "  ({})", kModelFlopsConvention);
  out += '\n';
  if (c.fits)
    Line(out, "fits: yes, {} of {} usable ({:.0f}% headroom kept free)",
         FormatGiB(m.total_bytes), FormatGiB(c.usable_bytes, 1),
         100 * (1 - c.usable_bytes / capacity));
  else Line(out, "fits: {}: {}", FitIsTight(c) ? "tight" : "no", c.reason);
  return out;
}

}  // namespace meshplan
