#include "gui/explorer_state.h"

#include <chrono>
#include <exception>
#include <thread>

#include "gui/timeline_source.h"
#include "planner/atomic_file.h"
#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/memory_model.h"
#include "planner/input_error.h"
#include "planner/names.h"

namespace meshplan {
namespace {

// ===== helpers ===============================================================

// Refits the plan to a changed setup and tells the user what moved.
void RefitPlan(ExplorerState& state) {
  const ExplorerInputs& in = state.inputs;
  const ParallelPlan fitted = FitPlanToSetup(in.model, in.cluster, in.training, in.plan);
  if (fitted == in.plan) return;
  state.ui.status = "plan refitted to the new setup: " + DescribePlanChanges(in.plan, fitted);
  SetPlan(state, fitted);
}

void SetupChanged(ExplorerState& state) {
  ++state.setup_revision;
  RefitPlan(state);
}

// Runs `f`; an exception becomes ui.error and a false return.
template <typename F>
bool Guarded(ExplorerState& state, F&& f) {
  try {
    f();
    state.ui.error.clear();
    return true;
  } catch (const std::exception& e) {
    state.ui.error = e.what();
    return false;
  }
}

// ComparePlan() of the inputs with the loaded measurement (InputError: a mismatch).
void UpdateComparison(ExplorerState& state) {
  MeasuredPanelState& m = state.measured;
  m.comparison.reset();
  m.mismatch.clear();
  if (!m.measured) return;
  const ExplorerInputs& in = state.inputs;
  try {
    m.comparison = ComparePlan(PlanFile{in.model, in.cluster, in.training, in.plan}, *m.measured,
                               m.tolerance_pct, m.path);
  } catch (const std::exception& e) {
    m.mismatch = e.what();
  }
}

void SetSearchResult(ExplorerState& state, SearchResult result, uint64_t setup_revision) {
  state.search.result = std::move(result);
  state.search.result_setup_revision = setup_revision;
  state.search.order = SortedOrder(state.search.result->top, state.search.sort_column,
                                   state.search.sort_ascending);
}

}  // namespace

// ===== construction and inputs ================================================

void InitExplorerState(ExplorerState& state, ModelSpec model, std::string model_source,
                       ClusterSpec cluster, std::string cluster_source, TrainingSpec training,
                       ParallelPlan plan) {
  state.inputs = {{{std::move(model), std::move(cluster), training}, plan},
                  std::move(model_source),
                  std::move(cluster_source)};
  ++state.setup_revision;
  ++state.plan_revision;
  state.ui.plan_text = ToShortPlanString(plan);
  Guarded(state, [&] {
    state.model_names = ListModels();
    state.cluster_names = ListClusters();
    state.framework_names = ListFrameworks();
  });
}

void SetPlan(ExplorerState& state, const ParallelPlan& plan) {
  if (plan == state.inputs.plan) return;
  state.inputs.plan = plan;
  state.ui.plan_text = ToShortPlanString(plan);
  ++state.plan_revision;
}

bool SetPlanFromString(ExplorerState& state, const std::string& text) {
  return Guarded(state, [&] { SetPlan(state, ParsePlanString(text, "plan field")); });
}

void SetTraining(ExplorerState& state, const TrainingSpec& training) {
  const TrainingSpec& t = state.inputs.training;
  if (t.global_batch == training.global_batch && t.seq_len == training.seq_len &&
      t.precision == training.precision && t.steps == training.steps &&
      t.learning_rate == training.learning_rate)
    return;
  state.inputs.training = training;
  SetupChanged(state);
}

void SetModel(ExplorerState& state, ModelSpec model, std::string source) {
  state.inputs.model = std::move(model);
  state.inputs.model_source = std::move(source);
  SetupChanged(state);
}

void SetCluster(ExplorerState& state, ClusterSpec cluster, std::string source) {
  state.inputs.cluster = std::move(cluster);
  state.inputs.cluster_source = std::move(source);
  SetupChanged(state);
}

bool LoadFrameworkInto(ExplorerState& state, const std::string& name_or_path) {
  return Guarded(state, [&] {
    FrameworkSpec framework = LoadFramework(name_or_path);
    if (framework == state.inputs.training.framework) return;
    state.inputs.training.framework = std::move(framework);
    SetupChanged(state);
  });
}

bool LoadModelInto(ExplorerState& state, const std::string& name_or_path) {
  return Guarded(state, [&] { SetModel(state, LoadModel(name_or_path), name_or_path); });
}

bool LoadClusterInto(ExplorerState& state, const std::string& name_or_path_or_shorthand) {
  return Guarded(state, [&] {
    ClusterSpec cluster = LoadCluster(name_or_path_or_shorthand);
    // The CLI's refusal (cli/setup_options.cc): fp8 only on GPUs with FP8 tensor cores.
    if (const std::string why = WhyPrecisionUnsupported(cluster.gpu, state.inputs.training.precision);
        !why.empty())
      throw InputError({"cluster " + name_or_path_or_shorthand}, "precision",
                       why + "; choose another precision first");
    SetCluster(state, std::move(cluster), name_or_path_or_shorthand);
  });
}

// ===== recomputation ============================================================

bool RecomputeIfChanged(ExplorerState& state) {
  if (state.computed_setup_revision == state.setup_revision &&
      state.computed_plan_revision == state.plan_revision)
    return false;
  RecomputeDerived(state);
  return true;
}

void RecomputeDerived(ExplorerState& state) {
  const ExplorerInputs& in = state.inputs;
  ExplorerDerived& d = state.derived;
  d = ExplorerDerived{};
  d.violations = Validate(in.plan, in.model, in.training, in.cluster.world_size(),
                          TpGroupLimit(in.cluster, /*allow_tp_across_nodes=*/false));
  d.valid = d.violations.empty();
  for (Knob knob : kAllKnobs)
    d.knob_options[static_cast<int>(knob)] =
        KnobOptions(in.model, in.cluster, in.training, in.plan, knob);
  if (d.valid) {
    try {
      d.cost = Estimate(in.model, in.cluster, in.training, in.plan,
                        {.memory_headroom = kDefaultMemoryHeadroom});
      MemoryOptions memory;
      memory.runtime = in.cluster.gpu.runtime_memory;
      for (int64_t stage = 0; stage < in.plan.pp; ++stage)
        d.stage_memory.push_back(EstimateStageMemory(in.model, in.training, in.plan,
                                                     MemoryModel::kDetailed, stage, memory));
      d.seed_memory = EstimateMemory(in.model, in.training, in.plan, MemoryModel::kSeed);
      d.zero_rows = ZeroTradeoffRows(in.model, in.cluster, in.training, in.plan);
      d.tp_rows = TpTradeoffRows(in.model, in.cluster, in.training, in.plan);
      if (in.model.moe.enabled())
        d.ep_rows = EpTradeoffRows(in.model, in.cluster, in.training, in.plan);
    } catch (const std::exception& e) {
      d.error = e.what();
    }
  }
  if (state.band.framework != in.training.framework.name ||
      state.band.generation != GpuGeneration(in.cluster.gpu.name))
    state.band = ErrorBandFor(in.training.framework, in.cluster.gpu);
  UpdateComparison(state);
  state.computed_setup_revision = state.setup_revision;
  state.computed_plan_revision = state.plan_revision;
  ++state.recompute_count;
}

void EnsureTimeline(ExplorerState& state) {
  RecomputeIfChanged(state);
  ExplorerDerived& d = state.derived;
  if (d.timeline_ready) return;
  const ExplorerInputs& in = state.inputs;
  if (d.valid) {
    d.timeline = SimulatedTimeline(in.model, in.cluster, in.training, in.plan);
  } else {
    d.timeline = TimelineView{};
    d.timeline.note = "The plan is not valid: nothing to simulate.";
  }
  d.timeline_ready = true;
}

// ===== search ===================================================================

SearchOptions ExplorerSearchOptions(const SearchPanelState& search) {
  SearchOptions options;
  options.top_k = search.top_k;
  options.memory_headroom = search.memory_headroom;
  options.space.allow_tp_across_nodes = search.allow_tp_across_nodes;
  return options;
}

void StartSearch(ExplorerState& state) {
  if (state.search.running) return;
  auto progress = std::make_shared<SearchProgress>();
  SearchOptions options = ExplorerSearchOptions(state.search);
  options.progress = [progress](int64_t done, int64_t total) {
    progress->done = done;
    progress->total = total;
  };
  // The worker gets its own copies of the specs: the UI may change them meanwhile.
  const ExplorerInputs in = state.inputs;
  state.search.pending = std::async(std::launch::async, [in, options] {
    return Search(in.model, in.cluster, in.training, options);
  });
  state.search.progress = std::move(progress);
  state.search.running = true;
  state.search.launched_setup_revision = state.setup_revision;
}

void RunSearchNow(ExplorerState& state) {
  const ExplorerInputs& in = state.inputs;
  Guarded(state, [&] {
    SetSearchResult(state, Search(in.model, in.cluster, in.training,
                                  ExplorerSearchOptions(state.search)),
                    state.setup_revision);
  });
}

void PollBackgroundWork(ExplorerState& state) {
  if (!state.search.running) return;
  if (state.search.pending.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return;
  state.search.running = false;
  Guarded(state, [&] {
    SetSearchResult(state, state.search.pending.get(), state.search.launched_setup_revision);
  });
}

void SortSearchResults(ExplorerState& state, SearchColumn column, bool ascending) {
  state.search.sort_column = column;
  state.search.sort_ascending = ascending;
  if (state.search.result)
    state.search.order = SortedOrder(state.search.result->top, column, ascending);
}

bool SearchResultIsStale(const ExplorerState& state) {
  return state.search.result && state.search.result_setup_revision != state.setup_revision;
}

bool SaveCurrentPlan(ExplorerState& state, const std::string& path) {
  const ExplorerInputs& in = state.inputs;
  const bool ok = Guarded(state, [&] {
    SavePlanFile(path, PlanFile{in.model, in.cluster, in.training, in.plan});
  });
  if (ok) state.ui.status = "saved " + path;
  return ok;
}

bool ExportCurrentPlan(ExplorerState& state, ExportTarget target, const std::string& path) {
  const ExplorerInputs& in = state.inputs;
  const bool ok = Guarded(state, [&] {
    WriteFileAtomically(path, ExportPlan(PlanFile{in.model, in.cluster, in.training, in.plan},
                                         target, path));
  });
  if (ok) state.ui.status = std::string("exported for ") + ToString(target) + " to " + path;
  return ok;
}

// ===== measured =================================================================

bool LoadMeasuredInto(ExplorerState& state, const std::string& path) {
  const bool ok = Guarded(state, [&] { state.measured.measured = LoadMeasurement(path); });
  if (ok) {
    state.measured.path = path;
    UpdateComparison(state);
  }
  return ok;
}

void SetMeasuredTolerance(ExplorerState& state, float tolerance_pct) {
  state.measured.tolerance_pct = tolerance_pct;
  UpdateComparison(state);
}

bool UseMeasuredSetup(ExplorerState& state) {
  if (!state.measured.measured) return false;
  const MeasurementEnvironment& env = state.measured.measured->environment;
  return Guarded(state, [&] {
    if (env.model != state.inputs.model.name) SetModel(state, LoadModel(env.model), env.model);
    TrainingSpec training = state.inputs.training;
    training.global_batch = env.global_batch;
    training.seq_len = env.seq_len;
    if (!ParsePrecision(env.precision, &training.precision))
      throw InputError({state.measured.path}, "environment.precision",
                       "expected one of: " + std::string(AllowedPrecisions()));
    SetTraining(state, training);
    SetPlan(state, ParsePlanString(env.plan, state.measured.path));
    UpdateComparison(state);
  });
}

}  // namespace meshplan
