// Predicting the published runs (planner/validate/validation.h).
#include "planner/validate/validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/cost/cost_model.h"
#include "planner/cost/cost_report.h"
#include "planner/cost/memory_model.h"
#include "planner/figure_check.h"
#include "planner/parallel_plan.h"

namespace meshplan {
namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// Decimals a figure is printed with (the papers publish 3 or 4 significant digits).
int DecimalsOf(PublishedFigure figure) {
  return figure == PublishedFigure::kTflopsPerGpu ? 1 : 2;
}

// What the figure is, for the table's heading.
const char* DescriptionOf(PublishedFigure figure) {
  switch (figure) {
    case PublishedFigure::kTflopsPerGpu: return "achieved throughput per GPU";
    case PublishedFigure::kStepTime: return "time per iteration";
    case PublishedFigure::kActivationMemory:
      return "activation memory per GPU, first pipeline stage";
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
  out.plan = ToShortPlanString(r.plan);
  out.gpus = r.cluster.world_size();
  out.published = row.published;
  out.cost = Estimate(r.model, r.cluster, r.training, r.plan);
  out.first_stage_activations_bytes =
      EstimateStageMemory(r.model, r.training, r.plan, EstimateOptions{}.memory_model, /*stage=*/0)
          .activations_bytes;
  switch (figure) {
    case PublishedFigure::kTflopsPerGpu:
      out.predicted = MegatronFlopsPerIteration(r.model, r.training) /
                      (out.cost.time.total_s * double(out.gpus)) / 1e12;
      break;
    case PublishedFigure::kStepTime: out.predicted = out.cost.time.total_s; break;
    case PublishedFigure::kActivationMemory:
      out.predicted = out.first_stage_activations_bytes / kBytesPerGiB;
      break;
  }
  out.error_pct = (out.predicted - out.published) / out.published * 100.0;
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
  out.figure = table.figure;
  double sum_abs = 0;
  for (const PublishedRow& row : table.rows) {
    out.rows.push_back(PredictPublishedRow(row, table.figure));
    const double abs_error = std::abs(out.rows.back().error_pct);
    sum_abs += abs_error;
    if (out.rows.size() == 1 || abs_error > out.max_abs_error_pct) {
      out.max_abs_error_pct = abs_error;
      out.worst_row = row.name;
    }
  }
  if (!out.rows.empty()) out.mape_pct = sum_abs / double(out.rows.size());
  return out;
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
                      {"gpus", r.gpus},
                      {"plan", r.plan},
                      {"predicted", r.predicted},
                      {"published", r.published},
                      {"error_pct", r.error_pct},
                      {"step_time_s", r.cost.time.total_s},
                      {"time", StepTimeToJson(r.cost.time)},
                      {"first_stage_activations_bytes", r.first_stage_activations_bytes}});
    }
    tables.push_back({{"id", t.id},
                      {"paper", t.paper},
                      {"source", t.source},
                      {"page", t.page},
                      {"figure", ToString(t.figure)},
                      {"unit", UnitOf(t.figure)},
                      {"rows", std::move(rows)},
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
    out += fmt::format("{} [{}]\n  {}: {} ({})\n", t.paper, t.id, t.source,
                       DescriptionOf(t.figure), UnitOf(t.figure));
    size_t name_width = 3, plan_width = 4;
    for (const ValidatedRow& r : t.rows) {
      name_width = std::max(name_width, r.name.size());
      plan_width = std::max(plan_width, r.plan.size());
    }
    out += fmt::format("  {:<{}}  {:>5}  {:<{}}  {:>9}  {:>9}  {:>7}\n", "row", name_width, "GPUs",
                       "plan", plan_width, "predicted", "published", "error");
    const int decimals = DecimalsOf(t.figure);
    for (const ValidatedRow& r : t.rows) {
      out += fmt::format("  {:<{}}  {:>5}  {:<{}}  {:>9.{}f}  {:>9.{}f}  {:>+6.1f}%\n", r.name,
                         name_width, r.gpus, r.plan, plan_width, r.predicted, decimals,
                         r.published, decimals, r.error_pct);
    }
    out += fmt::format("  MAPE {:.1f}% over {} rows; max |error| {:.1f}% ({})\n", t.mape_pct,
                       t.rows.size(), t.max_abs_error_pct, t.worst_row);
  }
  return out;
}

}  // namespace meshplan
