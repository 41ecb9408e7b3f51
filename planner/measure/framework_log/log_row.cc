#include "planner/measure/framework_log/log_row.h"

#include "planner/cost/cost_model.h"
#include "planner/measure/compare.h"
#include "planner/names.h"

namespace meshplan {

SweepRow RowOfLoggedRun(const PlanFile& plan_file, const FrameworkSpec& framework,
                        const Measurement& m, const std::string& name) {
  const Comparison c = CompareLoggedRun(plan_file, framework, m, 0, name);
  SweepRow r;
  r.name = name;
  r.device = m.environment.device;
  r.hardware = c.hardware;
  r.model = m.environment.model;
  r.plan = m.environment.plan;
  r.precision = m.environment.precision;
  r.seq_len = m.environment.seq_len;
  r.global_batch = m.environment.global_batch;
  r.measured_step_s = m.median_step_s;
  r.measured_tokens_per_s = m.tokens_per_s;
  for (const FigureComparison& f : c.figures) {
    if (f.figure == "step time" && f.status != FigureStatus::kNoPrediction) {
      r.predicted_step_s = f.predicted;
      r.step_error_pct = f.error_pct;
    }
    // The first memory figure is the lowest reported rank's, allocated before reserved.
    const bool memory = f.unit == "bytes";
    if (memory && r.measured_peak_bytes == 0 && f.status != FigureStatus::kNoPrediction) {
      r.predicted_peak_bytes = f.predicted;
      r.measured_peak_bytes = f.measured;
      r.memory_error_pct = f.error_pct;
    }
  }
  if (!m.ranks.empty()) r.measured_reserved_bytes = static_cast<double>(m.ranks.front().peak_reserved_bytes);
  if (r.predicted_step_s > 0) {
    PlanFile p = plan_file;
    p.training.framework = framework;
    r.predicted_mfu = Estimate(p.model, p.cluster, p.training, p.plan).mfu;
    r.measured_mfu = r.predicted_mfu * r.predicted_step_s / r.measured_step_s;
  }
  return r;
}

}  // namespace meshplan
