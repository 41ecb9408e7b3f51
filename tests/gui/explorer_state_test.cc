// ExplorerState without a window: changes trigger exactly one recomputation, the
// derived values follow the inputs, bad input lands in ui.error, the search and
// the plan file work from the state.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gui/explorer_state.h"
#include "gui/timeline_source.h"
#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/memory_model.h"
#include "planner/measure/measurement.h"
#include "planner/names.h"

namespace meshplan {
namespace {

// llama2-7b on one node of 8 H100, batch 64 x 4096, plan dp=2,tp=4,sp=1,zero=1.
void InitDefault(ExplorerState& state, const std::string& plan = "dp=2,tp=4,sp=1,zero=1") {
  TrainingSpec training;
  training.global_batch = 64;
  training.seq_len = 4096;
  InitExplorerState(state, LoadModel("llama2-7b"), "llama2-7b", LoadCluster("8xH100"), "8xH100",
                    training, ParsePlanString(plan));
}

}  // namespace

TEST_CASE("a state recomputes once per change and not on idle frames", "[gui][state]") {
  ExplorerState state;
  InitDefault(state);
  CHECK_FALSE(state.model_names.empty());  // configs/models listed for the setup combo
  CHECK(RecomputeIfChanged(state));
  CHECK(state.recompute_count == 1);
  CHECK_FALSE(RecomputeIfChanged(state));  // idle frame
  CHECK(state.recompute_count == 1);

  const ExplorerInputs& in = state.inputs;
  REQUIRE(state.derived.valid);
  CHECK(state.derived.cost.memory.total_bytes ==
        Approx(Estimate(in.model, in.cluster, in.training, in.plan).memory.total_bytes));
  CHECK(state.derived.stage_memory.size() == 1);
  CHECK(state.derived.seed_memory.total_bytes ==
        Approx(EstimateMemory(in.model, in.training, in.plan, MemoryModel::kSeed).total_bytes));
  CHECK(state.derived.zero_rows.size() == 4);
  CHECK(state.derived.tp_rows.size() == 4);
  // The step time's band: validate's rows of this framework on this GPU generation.
  CHECK(state.band.framework == in.training.framework.name);
  CHECK(state.band.generation == GpuGeneration(in.cluster.gpu.name));
  CHECK(state.band.runs ==
        ErrorBandFor(in.training.framework, in.cluster.gpu).runs);

  // Setting the same plan again changes nothing.
  SetPlan(state, in.plan);
  CHECK_FALSE(RecomputeIfChanged(state));

  // Clicking tp=8 in the knobs: the plan that option carries, recomputed in the next frame.
  const auto& tp_options = state.derived.knob_options[static_cast<int>(Knob::kTp)];
  const auto tp8 = std::find_if(tp_options.begin(), tp_options.end(),
                                [](const KnobOption& o) { return o.value == 8; });
  REQUIRE(tp8 != tp_options.end());
  REQUIRE(tp8->valid);
  const double before = state.derived.cost.memory.total_bytes;
  SetPlan(state, tp8->plan);
  CHECK(state.ui.plan_text == "tp=8,zero=1,sp=1");
  CHECK(RecomputeIfChanged(state));
  CHECK(state.recompute_count == 2);
  CHECK(state.inputs.plan.tp == 8);
  CHECK(state.inputs.plan.dp == 1);
  CHECK(state.derived.cost.memory.total_bytes < before);
  CHECK(state.derived.cost.memory.total_bytes ==
        Approx(Estimate(in.model, in.cluster, in.training, in.plan).memory.total_bytes));
  // The knob options follow the new plan: pp=2 no longer fits (tp*pp = 16 > 8 GPUs).
  const auto& pp_options = state.derived.knob_options[static_cast<int>(Knob::kPp)];
  REQUIRE(pp_options.size() >= 2);
  CHECK_FALSE(pp_options[1].valid);
  CHECK(state.derived.tp_rows[3].is_current);
}

TEST_CASE("a new setup refits the plan and recomputes", "[gui][state]") {
  ExplorerState state;
  InitDefault(state, "dp=2,tp=4,mbs=4");
  RecomputeIfChanged(state);
  TrainingSpec training = state.inputs.training;
  training.global_batch = 6;  // not divisible by dp*mbs = 8
  SetTraining(state, training);
  CHECK(RecomputeIfChanged(state));
  CHECK(state.derived.valid);
  CHECK(state.inputs.plan.micro_batch == 3);
  CHECK_THAT(state.ui.status, Catch::Matchers::Contains("refitted"));

  CHECK(LoadClusterInto(state, "16xH100"));
  CHECK(RecomputeIfChanged(state));
  CHECK(state.derived.valid);
  CHECK(state.inputs.plan.world_size() == 16);
  CHECK(state.inputs.cluster_source == "16xH100");

  // gpt2-small only takes 1024 tokens: the plan cannot fix that, the violation shows.
  CHECK(LoadModelInto(state, "gpt2-small"));
  CHECK(RecomputeIfChanged(state));
  CHECK(state.inputs.model.heads == 12);
  CHECK_FALSE(state.derived.valid);
  REQUIRE(state.derived.violations.size() == 1);
  CHECK(state.derived.violations[0].constraint == "seq_within_max");
  training.seq_len = 1024;
  SetTraining(state, training);
  CHECK(RecomputeIfChanged(state));
  CHECK(state.derived.valid);
}

TEST_CASE("the framework combo: another profile re-predicts the plan and its band", "[gui][state]") {
  ExplorerState state;
  InitDefault(state);
  REQUIRE(LoadFrameworkInto(state, "megatron-core"));  // what `meshplan gui` picks on a GPU
  RecomputeIfChanged(state);
  CHECK(state.inputs.training.framework.name == "megatron-core");
  CHECK(std::find(state.framework_names.begin(), state.framework_names.end(), "nemo") !=
        state.framework_names.end());
  const double megatron_step = state.derived.cost.time.total_s;
  const double megatron_memory = state.derived.cost.memory.total_bytes;
  REQUIRE(LoadFrameworkInto(state, "nemo"));
  CHECK(RecomputeIfChanged(state));
  CHECK(state.inputs.training.framework.name == "nemo");
  CHECK(state.derived.cost.time.total_s != megatron_step);  // FlashAttention-2, bf16 grads
  CHECK(state.derived.cost.memory.total_bytes < megatron_memory);
  CHECK(state.band.framework == "nemo");
  CHECK(LoadFrameworkInto(state, "nemo"));  // the same profile again: nothing to recompute
  CHECK_FALSE(RecomputeIfChanged(state));

  CHECK_FALSE(LoadFrameworkInto(state, "jax"));
  CHECK_THAT(state.ui.error, Catch::Matchers::Contains("megatron-core"));
  CHECK(state.inputs.training.framework.name == "nemo");
}

TEST_CASE("a Hugging Face config.json loads as the model", "[gui][state]") {
  ExplorerState state;
  InitDefault(state);
  RecomputeIfChanged(state);
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("meshplan_gui_hf_" + std::to_string(getpid()) + ".json");
  {
    std::ofstream out(path);
    out << R"({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
               "num_attention_heads": 32, "num_key_value_heads": 4, "num_hidden_layers": 22,
               "vocab_size": 32000, "tie_word_embeddings": false,
               "max_position_embeddings": 4096})";
  }
  const bool loaded = LoadModelInto(state, path.string());
  INFO(state.ui.error);
  std::filesystem::remove(path);
  REQUIRE(loaded);
  CHECK(state.inputs.model.hidden == 2048);
  CHECK(state.inputs.model.kv_heads == 4);
  CHECK(state.inputs.model_source == path.string());
  CHECK(RecomputeIfChanged(state));
  CHECK(state.derived.valid);  // tp=4 still divides 32 heads and 4 KV heads
  CHECK(state.inputs.plan.tp == 4);
}

TEST_CASE("fp8: a cluster without FP8 tensor cores is refused into ui.error", "[gui][state][fp8]") {
  ExplorerState state;
  InitDefault(state);
  TrainingSpec training = state.inputs.training;
  training.precision = Precision::kFp8;
  SetTraining(state, training);  // H100: FP8 allowed
  RecomputeIfChanged(state);
  CHECK(state.derived.cost.mfu_fp8_peak > 0);
  CHECK_FALSE(LoadClusterInto(state, "8xA100"));
  CHECK_THAT(state.ui.error, Catch::Matchers::Contains("FP8 tensor cores"));
  CHECK(state.inputs.cluster.gpu.name == "h100-sxm");
  training.precision = Precision::kBf16;
  SetTraining(state, training);
  CHECK(LoadClusterInto(state, "8xA100"));
}

TEST_CASE("bad input goes to ui.error and leaves the inputs alone", "[gui][state]") {
  ExplorerState state;
  InitDefault(state);
  RecomputeIfChanged(state);
  const ParallelPlan plan = state.inputs.plan;

  CHECK_FALSE(SetPlanFromString(state, "tp=four"));
  CHECK_THAT(state.ui.error, Catch::Matchers::Contains("tp"));
  CHECK(state.inputs.plan == plan);
  CHECK_FALSE(RecomputeIfChanged(state));

  CHECK_FALSE(LoadModelInto(state, "no-such-model"));
  CHECK_FALSE(state.ui.error.empty());
  CHECK(state.inputs.model.name == "llama2-7b");
  CHECK_FALSE(LoadMeasuredInto(state, "/nonexistent/measured.json"));
  CHECK_FALSE(state.measured.measured.has_value());

  // A plan that breaks rules is kept and shown with its violations (a typed --plan).
  CHECK(SetPlanFromString(state, "dp=3"));
  CHECK(state.ui.error.empty());
  RecomputeIfChanged(state);
  CHECK_FALSE(state.derived.valid);
  CHECK_FALSE(state.derived.violations.empty());
}

TEST_CASE("the search runs from the state, sorts, goes stale, and saves a plan file",
          "[gui][state][search]") {
  ExplorerState state;
  TrainingSpec training;
  training.global_batch = 16;
  training.seq_len = 1024;
  InitExplorerState(state, LoadModel("tiny-llama"), "tiny-llama", LoadCluster("8xH100"), "8xH100",
                    training, ParsePlanString("dp=8"));
  RecomputeIfChanged(state);
  state.search.top_k = 50;
  RunSearchNow(state);
  REQUIRE(state.search.result);
  const auto& top = state.search.result->top;
  REQUIRE(top.size() > 1);
  CHECK(top.size() <= 50);
  CHECK(state.search.order.size() == top.size());

  SortSearchResults(state, SearchColumn::kMemory, true);
  for (size_t k = 1; k < state.search.order.size(); ++k)
    CHECK(top[state.search.order[k - 1]].cost.memory.total_bytes <=
          top[state.search.order[k]].cost.memory.total_bytes);
  CHECK_FALSE(SearchResultIsStale(state));

  // The same search on the worker thread gives the same ranking.
  state.search.result.reset();
  StartSearch(state);
  CHECK(state.search.running);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (state.search.running && std::chrono::steady_clock::now() < deadline) {
    PollBackgroundWork(state);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(state.search.result);
  REQUIRE(state.search.result->top.size() == top.size());

  // Loading the best plan, then saving it, writes a plan file that reads back equal.
  SetPlan(state, state.search.result->top.front().plan);
  RecomputeIfChanged(state);
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("meshplan_gui_plan_" + std::to_string(getpid()) + ".yaml");
  REQUIRE(SaveCurrentPlan(state, path.string()));
  const PlanFile back = LoadPlanFile(path.string());
  std::filesystem::remove(path);
  CHECK(back.plan == state.inputs.plan);
  CHECK(back.training.global_batch == 16);
  CHECK(back.cluster.world_size() == 8);

  training.seq_len = 2048;
  SetTraining(state, training);
  CHECK(SearchResultIsStale(state));
}

TEST_CASE("Export... writes the current plan for a framework, or says why it cannot",
          "[gui][state][export]") {
  ExplorerState state;
  InitDefault(state, "dp=2,tp=4,sp=1,zero=1");
  RecomputeIfChanged(state);
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("meshplan_gui_export_" + std::to_string(getpid()) + ".sh");
  REQUIRE(ExportCurrentPlan(state, ExportTarget::kMegatron, path.string()));
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("--tensor-model-parallel-size 4\n"));
  CHECK_THAT(state.ui.status, Catch::Contains("megatron"));
  std::filesystem::remove(path);
  // torchtitan has no ZeRO-1: the error names the knob, and nothing is written.
  CHECK_FALSE(ExportCurrentPlan(state, ExportTarget::kTorchtitan, path.string()));
  CHECK_THAT(state.ui.error, Catch::Contains("zero: 1 cannot be expressed in torchtitan"));
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("a measured.json is compared with the current plan, and can set it",
          "[gui][state][measured]") {
  ExplorerState state;
  InitDefault(state, "dp=2,tp=4,sp=1,zero=1");
  RecomputeIfChanged(state);
  // What `meshplan run` would write for this plan on 8 ranks (3 steps, 1 warm-up).
  MeasurementEnvironment env;
  env.device = "cpu";
  env.libtorch_version = "1.13.1";
  env.hostname = "test";
  env.world_size = 8;
  env.model = "llama2-7b";
  env.plan = ToPlanString(state.inputs.plan);
  env.precision = ToString(state.inputs.training.precision);
  env.global_batch = 64;
  env.seq_len = 4096;
  std::vector<RankMeasurement> ranks(8);
  for (int r = 0; r < 8; ++r) {
    ranks[r].rank = r;
    ranks[r].step_times_s = {5.0, 4.0, 4.2};
    ranks[r].losses = {10.4, 10.1, 9.9};
    ranks[r].resident_bytes = 10'000'000'000;
    ranks[r].peak_memory_bytes = 20'000'000'000 + r;
  }
  const Measurement measured = CombineRanks(env, 1, 64 * 4096, ranks);
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("meshplan_gui_measured_" + std::to_string(getpid()) + ".json");
  {
    std::ofstream out(path);
    out << MeasurementToJson(measured).dump(2);
  }
  REQUIRE(LoadMeasuredInto(state, path.string()));
  REQUIRE(state.measured.comparison);
  CHECK(state.measured.mismatch.empty());
  // Peak memory of every rank is compared with the detailed model's prediction: its tensors,
  // what the probe measures (the panel's bars also hold the GPU's runtime lines).
  const MemoryBreakdown& stage0 = state.derived.stage_memory[0];
  int memory_figures = 0;
  for (const FigureComparison& f : state.measured.comparison->figures)
    if (f.unit == "bytes") {
      ++memory_figures;
      CHECK(f.measured == Approx(20e9).epsilon(1e-6));
      CHECK(f.predicted == Approx(stage0.total_bytes - stage0.runtime_bytes()));
    }
  CHECK(memory_figures == 8);

  // Another plan in the knobs: the measurement does not belong to it, and says so.
  SetPlan(state, ParsePlanString("dp=8"));
  RecomputeIfChanged(state);
  CHECK_FALSE(state.measured.comparison);
  CHECK_THAT(state.measured.mismatch, Catch::Matchers::Contains("not a measurement of that plan"));
  // One click puts the measured plan back.
  CHECK(UseMeasuredSetup(state));
  RecomputeIfChanged(state);
  CHECK(state.inputs.plan == ParsePlanString("dp=2,tp=4,sp=1,zero=1"));
  CHECK(state.measured.comparison);
  std::filesystem::remove(path);
}

TEST_CASE("the timeline is the simulated step, computed on demand", "[gui][state][timeline]") {
  ExplorerState state;
  InitDefault(state, "dp=1,tp=4,pp=2,sp=1");
  RecomputeIfChanged(state);
  CHECK_FALSE(state.derived.timeline_ready);  // not simulated until the panel asks
  EnsureTimeline(state);
  CHECK(state.derived.timeline_ready);
  const TimelineView& view = state.derived.timeline;
  REQUIRE_FALSE(view.streams.empty());
  CHECK(view.end_s > 0);
  bool stage1_compute = false;
  for (const TimelineStream& s : view.streams) {
    stage1_compute |= s.name == "stage 1 compute";
    for (size_t i = 0; i < s.spans.size(); ++i) {
      CHECK(s.spans[i].start_s >= 0);
      CHECK(s.spans[i].end_s <= view.end_s);
      CHECK(s.spans[i].start_s <= s.spans[i].end_s);
      if (i > 0) CHECK(s.spans[i - 1].start_s <= s.spans[i].start_s);
    }
  }
  CHECK(stage1_compute);
  // A plan change invalidates it.
  ParallelPlan plan = state.inputs.plan;
  plan.micro_batch = 2;
  SetPlan(state, plan);
  RecomputeIfChanged(state);
  CHECK_FALSE(state.derived.timeline_ready);
}

}  // namespace meshplan
