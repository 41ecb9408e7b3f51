// ExplorerState: everything the explorer knows, in one struct, and the pure
// functions that change it. No ImGui here; tested without a window.
//
// Contract:
//  * Panels never write the inputs directly: they call the Set... / Load...
//    functions below, which bump a revision counter. RecomputeIfChanged(), called
//    once per frame before drawing, recomputes every derived value (cost, memory
//    per stage, seed memory, knob options, trade-off rows) when a revision moved,
//    and does nothing otherwise. So every change is visible in the very next
//    frame, and an idle frame costs nothing. The timeline (a simulation) is
//    computed on demand, when the Timeline panel is drawn (EnsureTimeline).
//  * A new setup (model, cluster, batch, sequence, precision) refits the plan to
//    the nearest valid one (FitPlanToSetup) and says so in ui.status.
//  * Load/Save functions catch InputError and other I/O failures into ui.error
//    (shown in the window) and return false; nothing here throws.
//  * The search runs on a worker thread (StartSearch); PollBackgroundWork() picks
//    up its result. Everything else runs on the UI thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gui/drawn_layout.h"
#include "gui/search_view.h"
#include "gui/timeline_view.h"
#include "gui/tradeoffs.h"
#include "planner/cluster_spec.h"
#include "planner/cost/cost_model.h"
#include "planner/export/export.h"
#include "planner/measure/compare.h"
#include "planner/measure/measurement.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/search/search.h"
#include "planner/training_setup.h"
#include "planner/validate/error_band.h"

namespace meshplan {

// ===== inputs: what the user chose ==========================================
// The plan file the user is exploring (model, cluster, training, plan) and where its
// model and cluster came from.
struct ExplorerInputs : PlanFile {
  std::string model_source;    // what the model was loaded from (configs name or path)
  std::string cluster_source;  // configs name, path or NxGPU shorthand
};

// ===== derived: recomputed from the inputs ==================================
struct ExplorerDerived {
  std::vector<PlanViolation> violations;  // Validate() of the plan (with the placement rule)
  bool valid = false;
  std::string error;                       // an estimate that failed (should not happen)
  PlanCost cost;                           // detailed Estimate() (valid only)
  std::vector<MemoryBreakdown> stage_memory;  // detailed, one per pipeline stage
  MemoryBreakdown seed_memory;             // seed model (docs/cost_model.md 2(a)-(b)), worst stage
  std::array<std::vector<KnobOption>, kNumKnobs> knob_options;  // indexed by Knob
  std::vector<TradeoffRow> zero_rows;      // ZeRO 0-3
  std::vector<TradeoffRow> tp_rows;        // tp = 1, 2, 4, 8
  std::vector<TradeoffRow> ep_rows;        // ep = 1, 2, 4, 8 (MoE models; empty for dense)
  // The simulated step (or why there is none). Simulating can take a while for
  // long pipelines, so it is filled on demand by EnsureTimeline(), not by RecomputeDerived().
  TimelineView timeline;
  bool timeline_ready = false;
};

// ===== the Search panel =====================================================
struct SearchProgress {
  std::atomic<int64_t> done{0};
  std::atomic<int64_t> total{0};
};

struct SearchPanelState {
  int top_k = 200;               // plans kept for the table and the scatter
  float memory_headroom = static_cast<float>(kDefaultMemoryHeadroom);  // SearchOptions::memory_headroom
  bool allow_tp_across_nodes = false;
  bool running = false;
  std::future<SearchResult> pending;
  std::shared_ptr<SearchProgress> progress;
  uint64_t launched_setup_revision = 0;
  std::optional<SearchResult> result;
  uint64_t result_setup_revision = 0;  // the setup the result belongs to
  SearchColumn sort_column = SearchColumn::kTokensPerS;
  bool sort_ascending = false;
  std::vector<size_t> order;           // rows of result->top in display order
  std::string save_path = "plan.yaml";
  ExportTarget export_target = ExportTarget::kMegatron;  // the "Export..." popup's choice
  std::string export_path = "megatron_args.sh";
};

// ===== the Measured panel ===================================================
struct MeasuredPanelState {
  std::string path = "measured.json";
  float tolerance_pct = 10.0f;
  std::optional<Measurement> measured;   // what was loaded (LoadMeasurement)
  // ComparePlan() of the current inputs with it, redone whenever they change; or,
  // when the measurement is of another plan or setup, why not (mismatch).
  std::optional<Comparison> comparison;
  std::string mismatch;
};

// ===== plain UI state =======================================================
enum class ExplorerTab { kSearch, kTimeline, kMeasured };

struct UiState {
  std::string hf_config_path;     // the "load a config.json" field
  std::string cluster_shorthand;  // the "NxGPU" field
  std::string plan_text;          // the editable plan string
  std::string status;             // last notice ("plan refitted: dp=4")
  std::string error;              // last failure (bad file, bad plan string)
  ExplorerTab tab = ExplorerTab::kSearch;
  bool select_tab = true;         // make `tab` the open one in the next frame
};

struct ExplorerState {
  ExplorerInputs inputs;
  uint64_t setup_revision = 1;  // model, cluster or training changed
  uint64_t plan_revision = 1;   // the plan changed
  uint64_t computed_setup_revision = 0;
  uint64_t computed_plan_revision = 0;
  int64_t recompute_count = 0;  // how many times RecomputeDerived ran (tests, debugging)
  ExplorerDerived derived;
  // validate's error band for the framework on the cluster's GPU generation: recomputed by
  // RecomputeDerived only when either changes (it predicts every published run).
  ErrorBand band;

  std::vector<std::string> model_names;    // configs/models/
  std::vector<std::string> cluster_names;  // configs/clusters/
  std::vector<std::string> framework_names;  // configs/frameworks/

  SearchPanelState search;
  MeasuredPanelState measured;
  UiState ui;
  DrawnLayout drawn;  // what the last frame drew where (filled by the panels)
};

// A state for this setup and plan (the plan is kept as given, even if invalid, so
// that a --plan from the command line shows its violations). Lists configs/.
void InitExplorerState(ExplorerState& state, ModelSpec model, std::string model_source,
                       ClusterSpec cluster, std::string cluster_source, TrainingSpec training,
                       ParallelPlan plan);

// ----- changing the inputs (each bumps a revision) ------------------------------
void SetPlan(ExplorerState& state, const ParallelPlan& plan);
bool SetPlanFromString(ExplorerState& state, const std::string& text);  // false: ui.error
void SetTraining(ExplorerState& state, const TrainingSpec& training);
void SetModel(ExplorerState& state, ModelSpec model, std::string source);
void SetCluster(ExplorerState& state, ClusterSpec cluster, std::string source);
// LoadModel / LoadCluster (planner/config/config_loader.h) into the state; false: ui.error.
bool LoadModelInto(ExplorerState& state, const std::string& name_or_path);
bool LoadClusterInto(ExplorerState& state, const std::string& name_or_path_or_shorthand);
// LoadFramework (planner/config/framework_yaml.h) as the training's framework; false: ui.error.
bool LoadFrameworkInto(ExplorerState& state, const std::string& name_or_path);

// ----- recomputation -------------------------------------------------------------
// Recomputes when an input changed since the last call; returns whether it did.
bool RecomputeIfChanged(ExplorerState& state);
void RecomputeDerived(ExplorerState& state);
// Simulates the current plan into derived.timeline unless that is up to date.
void EnsureTimeline(ExplorerState& state);

// ----- search ----------------------------------------------------------------------
SearchOptions ExplorerSearchOptions(const SearchPanelState& search);
void StartSearch(ExplorerState& state);  // on a worker thread; no-op while one runs
void RunSearchNow(ExplorerState& state); // on this thread (screenshots, tests)
void PollBackgroundWork(ExplorerState& state);  // collects a finished search
void SortSearchResults(ExplorerState& state, SearchColumn column, bool ascending);
bool SearchResultIsStale(const ExplorerState& state);  // the setup changed since
bool SaveCurrentPlan(ExplorerState& state, const std::string& path);  // SavePlanFile
// The current plan as `target` takes it (planner/export/export.h), written whole to `path`;
// false, with ui.error naming the knob the target cannot express, and nothing written.
bool ExportCurrentPlan(ExplorerState& state, ExportTarget target, const std::string& path);

// ----- measured --------------------------------------------------------------------
bool LoadMeasuredInto(ExplorerState& state, const std::string& path);  // LoadMeasurement
void SetMeasuredTolerance(ExplorerState& state, float tolerance_pct);
// Sets the plan, batch, sequence and precision (and the model, by name) to what the
// loaded measurement ran, so that it can be compared; false: ui.error.
bool UseMeasuredSetup(ExplorerState& state);

}  // namespace meshplan
