// Published training runs: the rows `meshplan validate` predicts (docs/validation/).
//
// Each table is one figure of one paper (Narayanan et al. 2021 Table 1, Korthikanti et al.
// 2022 Table 5 and Figure 1). Each row is a complete setup (model, cluster, training, plan)
// and the published figure. The rows are test data for the physics of the cost model,
// never its input: nothing here is read by Estimate(), and nothing in them is fitted.
//
// File schema (configs/validation/published_runs.yaml documents every key):
//   tables: a list of {id, paper, source, page, figure, common, rows}
//     common: the keys every row shares (block, vocab_size, seq_len, tied_embeddings,
//             ffn_multiplier, gpu, precision); a row may repeat one to override it
//     rows:   {name, params_B (optional), heads, hidden, layers, gpus, global_batch,
//              plan (ParsePlanString syntax), published (in the figure's unit)}
// The cluster of a row is the "NxGPU" shorthand of LoadCluster(): gpus of the
// configs/hardware file in nodes of its network block, with that block's two tiers.
// LoadPublishedRuns validates every field and every plan (Validate() against the row's
// GPUs and the placement rule) and throws InputError with file, line and column.
#pragma once

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
};
// The YAML spelling: tflops_per_gpu | step_time_s | activation_GiB.
const char* ToString(PublishedFigure figure);
bool ParsePublishedFigure(const std::string& name, PublishedFigure* out);
// The unit as printed: "TFLOP/s per GPU" | "s" | "GiB".
const char* UnitOf(PublishedFigure figure);

struct PublishedRow {
  std::string name;         // "1.7B", "175B full recompute"
  double params_billion = 0;  // the paper's parameter count (0 when it publishes none)
  PlanFile setup;           // model, cluster, training and plan of the run
  double published = 0;     // the figure, in UnitOf(table.figure)
  InputLocation where;      // the row in the file
};

struct PublishedTable {
  std::string id;      // "narayanan2021-table1"
  std::string paper;   // authors, year and title
  std::string source;  // venue / arXiv id and the table or figure
  std::string page;    // docs/validation/<paper>.md
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
