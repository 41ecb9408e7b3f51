// Published training runs: the rows `meshplan validate` predicts (docs/validation/).
//
// Each table is one figure of one publication (Narayanan et al. 2021 Table 1, Korthikanti
// et al. 2022 Table 5 and Figure 1, NeMo 24.07's DGX-H100 table, torchtitan's A100 FSDP2
// rows). Each row is a complete setup (model, cluster, training, plan), the framework that
// ran it, the published figure and whether the run fitted in memory. The rows are test data
// for the physics of the cost model, never its input: nothing here is read by Estimate(),
// and nothing in them is fitted.
//
// File schema (configs/validation/published_runs.yaml documents every key):
//   tables: a list of {id, paper, source, page, figure, framework, common, rows}
//     common: the keys every row shares (model or block, vocab_size, ..., gpu, precision);
//             a row may repeat one to override it
//     rows:   {name, params_B (optional), the model (`model: <configs/models name>`, or
//              its shape inline), gpus, global_batch, plan (ParsePlanString syntax),
//              published (in the figure's unit), fits (default true), skip (a reason)}
// The cluster of a row is the "NxGPU" shorthand of LoadCluster(): gpus of the
// configs/hardware file in nodes of its network block, with that block's two tiers.
// LoadPublishedRuns validates every field and every plan (Validate() against the row's
// GPUs and the placement rule) and throws InputError with file, line and column. A row
// with `skip: <reason>` (what meshplan cannot model yet) is kept with its name, figure,
// fits, plan text and reason, and nothing else of it is read: it is listed, not predicted.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/input_error.h"
#include "planner/training_setup.h"

namespace meshplan {

// What a table publishes, and so what is predicted for each row.
enum class PublishedFigure {
  kTflopsPerGpu,      // achieved TFLOP/s per GPU, counted with Narayanan et al.'s formula
  kStepTime,          // seconds per iteration
  kActivationMemory,  // activation memory per GPU of the first pipeline stage, GiB (2^30 bytes)
  kTokensPerGpu,      // training throughput, tokens per second per GPU (global tokens per
                      // step / step time / GPUs)
};
// The YAML spelling: tflops_per_gpu | step_time_s | activation_GiB | tokens_per_s_per_gpu.
const char* ToString(PublishedFigure figure);
bool ParsePublishedFigure(const std::string& name, PublishedFigure* out);
// The unit as printed: "TFLOP/s per GPU" | "s" | "GiB" | "tokens/s per GPU".
const char* UnitOf(PublishedFigure figure);

// A run's own settings that its file gives beside the framework profile (the row's or its
// table's `grad_accumulation` and `norm`): they stay under any profile the row is predicted
// under (PredictUnder), as they are the run's configuration, not the software's.
struct RunSettings {
  std::optional<GradAccumulation> grad_accumulation;
  std::optional<bool> fused_norm;
  std::optional<Fp8StateDtype> fp8_states;  // the optimizer's dtype in fp8 runs (NeMo's optim.dtype)
  std::optional<LossKernel> loss;  // how the run's loss runs (NeMo's cross_entropy_loss_fusion)
  void ApplyTo(FrameworkSpec* framework) const;
};

struct PublishedRow {
  std::string name;         // "1.7B", "175B full recompute"
  double params_billion = 0;  // the paper's parameter count (0 when it publishes none)
  // The configs/frameworks profile the row is predicted under: its own `framework`, else its
  // table's, else the default for its GPU (DefaultFrameworkName; "" for a skipped row).
  std::string framework;
  PlanFile setup;           // model, cluster, training and plan of the run (empty when skipped)
  RunSettings run;          // its settings beside the profile, applied to setup.training.framework
  std::string plan_text;    // the plan as written in the file
  // The figure, in UnitOf(table.figure); absent only for a run that did not fit.
  std::optional<double> published;
  bool fits = true;         // false: the source says (or its figures show) it did not fit
  std::string skip_reason;  // non-empty: not predicted (what meshplan cannot model yet)
  InputLocation where;      // the row in the file

  bool skipped() const { return !skip_reason.empty(); }
};

struct PublishedTable {
  std::string id;      // "narayanan2021-table1"
  std::string paper;   // authors, year and title
  std::string source;  // venue / arXiv id and the table or figure
  std::string page;    // docs/validation/<paper>.md
  std::string framework;  // the table's `framework` ("" when not given; a row may override it)
  PublishedFigure figure = PublishedFigure::kStepTime;
  std::vector<PublishedRow> rows;
};

struct PublishedRuns {
  std::string file;
  std::vector<PublishedTable> tables;
};

// The default file: configs/validation/published_runs.yaml under ConfigsDir().
std::string DefaultPublishedRunsPath();

// Loads and validates the file (see the schema above); InputError on any bad field.
PublishedRuns LoadPublishedRuns(const std::string& path);

}  // namespace meshplan
