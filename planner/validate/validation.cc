// Predicting the published runs (planner/validate/validation.h).
#include "planner/validate/validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/cost/cost_model.h"
#include "planner/cost/cost_report.h"
#include "planner/cost/flops.h"
#include "planner/cost/memory_model.h"
#include "planner/figure_check.h"
#include "planner/names.h"
#include "planner/parallel_plan.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

// Decimals a figure is printed with (the papers publish 3 or 4 significant digits).
int DecimalsOf(PublishedFigure figure) {
  switch (figure) {
    case PublishedFigure::kTflopsPerGpu: return 1;
    case PublishedFigure::kTokensPerGpu: return 0;
    case PublishedFigure::kStepTime:
    case PublishedFigure::kActivationMemory: break;
  }
  return 2;
}

// What the figure is, for the table's heading.
const char* DescriptionOf(PublishedFigure figure) {
  switch (figure) {
    case PublishedFigure::kTflopsPerGpu: return "achieved throughput per GPU";
    case PublishedFigure::kStepTime: return "time per iteration";
    case PublishedFigure::kActivationMemory:
      return "activation memory per GPU, first pipeline stage";
    case PublishedFigure::kTokensPerGpu: return "training throughput per GPU";
  }
  return "?";
}

}  // namespace

double MegatronFlopsPerIteration(const ModelSpec& model, const TrainingSpec& training) {
  const double B = double(training.global_batch), s = double(training.seq_len);
  const double l = double(model.layers), h = double(model.hidden);
  const double V = double(model.vocab_size);
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

ValidatedRow PredictPublishedRow(const PublishedRow& row, PublishedFigure figure) {
  const PlanFile& r = row.setup;
  ValidatedRow out;
  out.name = row.name;
  out.framework = row.framework;
  out.gpu = r.cluster.gpu.name;
  out.plan = ToShortPlanString(r.plan);
  out.gpus = r.cluster.world_size();
  out.has_published = row.published.has_value();
  out.published = row.published.value_or(0.0);
  out.published_fits = row.fits;
  out.cost = Estimate(r.model, r.cluster, r.training, r.plan);
  out.first_stage_activations_bytes =
      EstimateStageMemory(r.model, r.training, r.plan, EstimateOptions{}.memory_model, /*stage=*/0)
          .activations_bytes;
  switch (figure) {
    case PublishedFigure::kTflopsPerGpu:
      out.predicted =
          PerGpuRate(MegatronFlopsPerIteration(r.model, r.training), out.gpus, out.cost.time.total_s) /
          1e12;
      break;
    case PublishedFigure::kStepTime: out.predicted = out.cost.time.total_s; break;
    case PublishedFigure::kActivationMemory:
      out.predicted = out.first_stage_activations_bytes / kBytesPerGiB;
      break;
    case PublishedFigure::kTokensPerGpu:
      out.predicted = out.cost.tokens_per_s_per_gpu;
      break;
  }
  if (out.has_published) out.error_pct = (out.predicted - out.published) / out.published * 100.0;
  const std::string inputs = DescribeInputs(r);
  CheckFigures(out.cost, inputs);
  CheckFigure(out.predicted, "predicted figure", inputs);
  return out;
}

ValidatedTable PredictPublishedTable(const PublishedTable& table) {
  ValidatedTable out;
  out.id = table.id;
  out.paper = table.paper;
  out.source = table.source;
  out.page = table.page;
  out.framework = table.framework;
  out.figure = table.figure;
  double sum_abs = 0;
  for (const PublishedRow& row : table.rows) {
    if (row.skipped()) {
      out.skipped.push_back({row.name, row.plan_text, row.published, row.fits, row.skip_reason});
      continue;
    }
    const ValidatedRow& v = out.rows.emplace_back(PredictPublishedRow(row, table.figure));
    if (v.fit_disagrees()) ++out.fit_disagreements;
    if (v.fit_tight()) ++out.tight_fits;
    if (!v.has_published) continue;
    const double abs_error = std::abs(v.error_pct);
    sum_abs += abs_error;
    if (++out.figure_rows == 1 || abs_error > out.max_abs_error_pct) {
      out.max_abs_error_pct = abs_error;
      out.worst_row = row.name;
    }
  }
  if (out.figure_rows > 0) out.mape_pct = sum_abs / double(out.figure_rows);
  return out;
}

void PredictUnder(const FrameworkSpec& framework, PublishedRuns* runs) {
  for (PublishedTable& table : runs->tables) {
    table.framework = framework.name;
    for (PublishedRow& row : table.rows) {
      if (row.skipped()) continue;
      row.framework = framework.name;
      row.setup.training.framework = framework;
      row.run.ApplyTo(&row.setup.training.framework);
      // A plan the profile does not run (its recompute, ZeRO stage, parallelism, ...) is
      // listed with the rule, not predicted.
      const PlanFile& f = row.setup;
      for (const PlanViolation& v : Validate(f.plan, f.model, f.training, f.cluster.world_size()))
        if (IsFrameworkRule(v.constraint))
          row.skip_reason += (row.skip_reason.empty() ? "" : "; ") + v.message + " [" +
                             v.constraint + "]";
    }
  }
}

ValidationReport PredictPublishedRuns(const PublishedRuns& runs) {
  ValidationReport out;
  out.file = runs.file;
  for (const PublishedTable& table : runs.tables)
    out.tables.push_back(PredictPublishedTable(table));
  return out;
}

nlohmann::json ValidationToJson(const ValidationReport& report) {
  nlohmann::json tables = nlohmann::json::array();
  for (const ValidatedTable& t : report.tables) {
    nlohmann::json rows = nlohmann::json::array();
    for (const ValidatedRow& r : t.rows) {
      rows.push_back({{"name", r.name},
                      {"framework", r.framework},
                      {"gpus", r.gpus},
                      {"plan", r.plan},
                      {"predicted", r.predicted},
                      {"published", r.has_published ? nlohmann::json(r.published) : nullptr},
                      {"error_pct", r.has_published ? nlohmann::json(r.error_pct) : nullptr},
                      {"fits", r.cost.fits},
                      {"fit_tight", r.fit_tight()},
                      {"published_fits", r.published_fits},
                      {"fit_reason", r.cost.reason},
                      {"step_time_s", r.cost.time.total_s},
                      {"time", StepTimeToJson(r.cost.time)},
                      {"first_stage_activations_bytes", r.first_stage_activations_bytes}});
    }
    nlohmann::json skipped = nlohmann::json::array();
    for (const SkippedRow& r : t.skipped)
      skipped.push_back({{"name", r.name},
                         {"plan", r.plan},
                         {"published", r.published ? nlohmann::json(*r.published) : nullptr},
                         {"published_fits", r.published_fits},
                         {"reason", r.reason}});
    tables.push_back({{"id", t.id},
                      {"paper", t.paper},
                      {"source", t.source},
                      {"page", t.page},
                      {"framework", t.framework},
                      {"figure", ToString(t.figure)},
                      {"unit", UnitOf(t.figure)},
                      {"rows", std::move(rows)},
                      {"skipped", std::move(skipped)},
                      {"fit_disagreements", t.fit_disagreements},
                      {"tight_fits", t.tight_fits},
                      {"mape_pct", t.mape_pct},
                      {"max_abs_error_pct", t.max_abs_error_pct},
                      {"worst_row", t.worst_row}});
  }
  return {{"file", report.file}, {"tables", std::move(tables)}};
}

std::string FormatValidationTable(const ValidationReport& report) {
  std::string out;
  for (const ValidatedTable& t : report.tables) {
    if (!out.empty()) out += "\n";
    out += fmt::format("{} [{}]\n  {}: {} ({})\n  framework: {} (configs/frameworks)\n",
                       t.paper, t.id, t.source, DescriptionOf(t.figure), UnitOf(t.figure),
                       t.framework.empty() ? "not given: each GPU's default" : t.framework);
    size_t name_width = 3, plan_width = 4;
    for (const ValidatedRow& r : t.rows) {
      name_width = std::max(name_width, r.name.size());
      plan_width = std::max(plan_width, r.plan.size());
    }
    out += fmt::format("  {:<{}}  {:>5}  {:<{}}  {:>9}  {:>9}  {:>7}  {}\n", "row", name_width,
                       "GPUs", "plan", plan_width, "predicted", "published", "error", "fits");
    const int decimals = DecimalsOf(t.figure);
    for (const ValidatedRow& r : t.rows) {
      const std::string published =
          r.has_published ? fmt::format("{:>9.{}f}", r.published, decimals) : fmt::format("{:>9}", "-");
      const std::string error =
          r.has_published ? fmt::format("{:>+6.1f}%", r.error_pct) : fmt::format("{:>7}", "-");
      std::string fits = r.cost.fits ? "yes" : r.fit_tight() ? "tight" : "no";
      if (r.fit_disagrees() || r.fit_tight()) {
        // How far off, and how much of the prediction is the allocator's assumed waste (a
        // planning margin, docs/memory_model.md "Runtime memory on GPUs").
        const MemoryBreakdown& m = r.cost.memory;
        fits += fmt::format("  <- {} (predicted {:.2f} of {:.2f} GiB, {:.2f} of them the "
                            "allocator's assumed fragmentation)",
                            r.fit_tight()         ? "fits if the allocator wastes less"
                            : r.published_fits ? "the run fitted"
                                               : "the run ran out of memory",
                            ToGiB(m.total_bytes), ToGiB(r.cost.usable_bytes),
                            ToGiB(m.allocator_overhead_bytes));
      }
      out += fmt::format("  {:<{}}  {:>5}  {:<{}}  {:>9.{}f}  {}  {}  {}\n", r.name, name_width,
                         r.gpus, r.plan, plan_width, r.predicted, decimals, published, error,
                         fits);
    }
    if (t.figure_rows > 0)
      out += fmt::format("  MAPE {:.1f}% over {} rows; max |error| {:.1f}% ({})\n", t.mape_pct,
                         t.figure_rows, t.max_abs_error_pct, t.worst_row);
    std::string disagree, tight;
    for (const ValidatedRow& r : t.rows) {
      if (r.fit_disagrees()) disagree += (disagree.empty() ? "" : ", ") + r.name;
      if (r.fit_tight()) tight += (tight.empty() ? "" : ", ") + r.name;
    }
    const size_t agree = t.rows.size() - size_t(t.fit_disagreements + t.tight_fits);
    out += agree == t.rows.size() ? fmt::format("  fit: as published in all {} rows", agree)
                                  : fmt::format("  fit: as published in {} of {} rows", agree,
                                                t.rows.size());
    if (t.fit_disagreements > 0)
      out += fmt::format("; predicted otherwise in {} ({})", t.fit_disagreements, disagree);
    if (t.tight_fits > 0)
      out += fmt::format("; tight in {} ({}): over only by the allocator's assumed fragmentation",
                         t.tight_fits, tight);
    out += "\n";
    for (const SkippedRow& r : t.skipped) {
      std::string published;
      if (r.published) published = fmt::format("; published {:.{}f}", *r.published, decimals);
      if (!r.published_fits) published += "; ran out of memory";
      out += fmt::format("  skipped: {} ({}{}): {}\n", r.name, r.plan, published, r.reason);
    }
  }
  return out;
}

}  // namespace meshplan
