// Validation against published runs: every row of every table of PublishedRuns
// (planner/validate/published_runs.h) predicted by the cost model, beside the published
// figure, with the error per row and per table. What `meshplan validate` prints.
//
// The prediction is the one every other command makes: Estimate() with its defaults
// (detailed memory model, no headroom, the hardware file's efficiencies). Nothing is tuned
// per row. Per figure:
//   tflops_per_gpu   PerGpuRate(MegatronFlopsPerIteration(row), GPUs, Estimate().time.total_s)
//                    (planner/cost/flops.h: the rate estimate and search print per GPU)
//   step_time_s      Estimate().time.total_s
//   activation_GiB   the detailed model's activations of pipeline stage 0 (EstimateStageMemory,
//                    stage 0: what that stage holds at its peak phase), / 2^30
//   tokens_per_s_per_gpu  Estimate().tokens_per_s_per_gpu
// error_pct = (predicted - published) / published * 100 (positive: the model predicts more).
// Every predicted row also has a fit judgement: Estimate().fits against the publication's
// (`fits`, true unless the publication says the run ran out of memory); a row over the GPU
// only by the allocator's assumed fragmentation (FitIsTight, planner/plan_cost.h) is "tight"
// and agrees with either. Skipped rows are
// listed with their reason, never predicted; MAPE is over the rows with a published figure.
// The command reports; it never judges (no tolerance, exit 0 whenever it ran).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "planner/plan_cost.h"
#include "planner/validate/published_runs.h"

namespace meshplan {

// Narayanan et al. 2021's count of the FLOPs of one training iteration of a GPT model with
// full activation recompute (the recomputed forward counted), the count behind Table 1:
//   96 * B * s * l * h^2 * (1 + s/(6h) + V/(16*l*h))
// B global batch, s sequence, l layers, h hidden, V vocabulary. The paper's TFLOP/s are
// this over the iteration time and the GPU count, for every row of Table 1.
double MegatronFlopsPerIteration(const ModelSpec& model, const TrainingSpec& training);

struct ValidatedRow {
  std::string name;
  std::string framework;
  std::string gpu;   // the hardware's name (h100-sxm)
  std::string plan;  // ToShortPlanString
  int64_t gpus = 0;
  double predicted = 0;  // in the table's unit
  bool has_published = true;  // false: a run that ran out of memory, with no figure
  double published = 0;
  double error_pct = 0;  // (predicted - published) / published * 100; 0 without a figure
  bool published_fits = true;  // what the publication says
  bool fit_tight() const { return FitIsTight(cost); }
  bool fit_disagrees() const { return !fit_tight() && cost.fits != published_fits; }
  PlanCost cost;         // Estimate() of the row: the step-time breakdown behind `predicted`
  double first_stage_activations_bytes = 0;  // the detailed model, stage 0
};

// A row the file keeps but meshplan cannot model yet.
struct SkippedRow {
  std::string name;
  std::string plan;    // as written in the file
  std::optional<double> published;  // the figure, when the run published one
  bool published_fits = true;
  std::string reason;  // the row's `skip`
};

struct ValidatedTable {
  std::string id;
  std::string paper;
  std::string source;
  std::string page;
  std::string framework;
  PublishedFigure figure = PublishedFigure::kStepTime;
  std::vector<ValidatedRow> rows;      // the predicted rows, in file order
  std::vector<SkippedRow> skipped;     // the others, in file order
  int64_t figure_rows = 0;       // rows with a published figure (the MAPE's)
  int64_t fit_disagreements = 0;  // rows whose predicted fit is not the publication's
  int64_t tight_fits = 0;         // rows over the GPU only by the assumed fragmentation
  double mape_pct = 0;           // mean of |error_pct| over the rows with a figure
  double max_abs_error_pct = 0;  // the largest |error_pct|
  std::string worst_row;         // the row with that error
};

struct ValidationReport {
  std::string file;  // the published runs file
  std::vector<ValidatedTable> tables;
};

// Every row predicted under `framework` instead of the software that ran it (validate
// --framework; the error band of a profile others are built on); a row whose recompute policy
// the framework does not offer becomes skipped, with that reason.
void PredictUnder(const FrameworkSpec& framework, PublishedRuns* runs);

// Each row's prediction; a table's rows with its MAPE; every table of the file.
ValidatedRow PredictPublishedRow(const PublishedRow& row, PublishedFigure figure);
ValidatedTable PredictPublishedTable(const PublishedTable& table);
ValidationReport PredictPublishedRuns(const PublishedRuns& runs);

nlohmann::json ValidationToJson(const ValidationReport& report);
// Per table: a heading (paper, source, unit, framework), one line per row (GPUs, plan,
// predicted, published, error, predicted fit, marked where the publication disagrees), the
// table's MAPE and max |error| with its row, the fit disagreements, and the skipped rows
// with their reasons.
std::string FormatValidationTable(const ValidationReport& report);

}  // namespace meshplan
