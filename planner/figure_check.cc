#include "planner/figure_check.h"

#include <cmath>

#include <fmt/format.h>

namespace meshplan {

std::string DescribeInputs(const PlanFile& setup) {
  return fmt::format("model {}, cluster {} (GPU {}), global batch {}, seq {}, plan {}",
                     setup.model.name, setup.cluster.name, setup.cluster.gpu.name,
                     setup.training.global_batch, setup.training.seq_len,
                     ToPlanString(setup.plan));
}

void CheckFigure(double value, std::string_view figure, const std::string& inputs) {
  if (std::isfinite(value) && value >= 0) return;
  throw FigureError(fmt::format(
      "the {} came out as {}, from {}; every input passed its bounds (docs/limits.md), so "
      "this is a bug in meshplan: please report it with these inputs",
      figure, value, inputs));
}

void CheckFigures(const StepTimeBreakdown& t, const std::string& inputs) {
  CheckFigure(t.compute_s, "compute time", inputs);
  CheckFigure(t.recompute_s, "recompute time", inputs);
  for (double s : t.exposed_comm_s.values) CheckFigure(s, "exposed communication time", inputs);
  CheckFigure(t.bubble_s, "pipeline bubble", inputs);
  CheckFigure(t.optimizer_s, "optimizer time", inputs);
  CheckFigure(t.offload_s, "offload time", inputs);
  CheckFigure(t.overlap_slowdown_s, "overlap slowdown", inputs);
  CheckFigure(t.total_s, "step time", inputs);
}

void CheckFigures(const PlanCost& c, const std::string& inputs) {
  for (int64_t n : {c.params_total, c.params_per_rank, c.params_active, c.expert_params_per_rank})
    CheckFigure(static_cast<double>(n), "parameter count", inputs);
  CheckFigure(c.model_flops_per_step, "model FLOPs per step", inputs);
  CheckFigure(c.model_flops_no_attention, "model FLOPs per step (no attention)", inputs);
  CheckFigure(c.hardware_flops_per_step, "hardware FLOPs per step", inputs);
  const MemoryBreakdown& m = c.memory;
  for (double bytes : {m.params_bytes, m.grads_bytes, m.optimizer_bytes, m.activations_bytes,
                       m.logits_bytes, m.comm_buffer_bytes, m.gathered_params_bytes,
                       m.transient_bytes, m.runtime_bytes(), m.total_bytes,
                       m.host_total_bytes(), c.host_bytes_per_node})
    CheckFigure(bytes, "memory per GPU", inputs);
  for (double bytes : c.comm_bytes_per_step.values)
    CheckFigure(bytes, "communication bytes per step", inputs);
  CheckFigures(c.time, inputs);
  CheckFigure(c.tokens_per_s, "tokens/s", inputs);
  for (double u : {c.mfu, c.mfu_no_attention, c.hfu, c.mfu_fp8_peak})
    CheckFigure(u, "MFU", inputs);
}

}  // namespace meshplan
