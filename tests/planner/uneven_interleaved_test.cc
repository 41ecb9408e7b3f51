// Uneven first / last stages under the interleaved schedule (planner/stage_layers.h): the
// chunks of each stage by hand, the rules and their messages, the search's choices, and
// Llama 3's 405B layout (126 layers on pp=16, chunks of one layer) through the CLI.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <set>

#include "planner/config/config_loader.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"
#include "planner/cost/pipeline_in_flight.h"
#include "planner/parallel_plan.h"
#include "planner/pipeline_schedule.h"
#include "planner/search/plan_space.h"
#include "planner/search/search.h"
#include "planner/stage_layers.h"
#include "tests/cli_run.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::H100Cluster;
using testing::SpecLlama;
using testing::Training;

ParallelPlan Interleaved(int64_t pp, int64_t vpp, int64_t first, int64_t last) {
  ParallelPlan plan;
  plan.pp = pp;
  plan.schedule = PipelineSchedule::kInterleaved;
  plan.virtual_stages = vpp;
  plan.first_stage_layers = first;
  plan.last_stage_layers = last;
  return plan;
}

// Walks the virtual stages in order: each chunk starts where the one before ended.
void CheckChunksTile(const StageLayers& split, int64_t layers) {
  int64_t next = 0;
  for (int64_t c = 0; c < split.vpp; ++c)
    for (int64_t r = 0; r < split.pp; ++r) {
      INFO("stage " << r << " chunk " << c);
      CHECK(split.FirstBlockOfChunk(r, c) == next);
      CHECK(split.ChunkOf(r, c) >= 0);
      next += split.ChunkOf(r, c);
    }
  CHECK(next == layers);
  for (int64_t r = 0; r < split.pp; ++r) {
    int64_t stage = 0;
    for (int64_t c = 0; c < split.vpp; ++c) stage += split.ChunkOf(r, c);
    CHECK(stage == split.Of(r));
  }
}

TEST_CASE("interleaved chunks: the ends give up layers at the ends of the model",
          "[planner][plan][uneven]") {
  // 126 layers on pp=16 as 7 + 14 x 8 + 7.
  const StageLayers v2 = SplitLayers(126, Interleaved(16, 2, 7, 7));
  CHECK(v2.vpp == 2);
  CHECK(v2.ChunkOf(0, 0) == 3);   // 7 - 4
  CHECK(v2.ChunkOf(0, 1) == 4);
  CHECK(v2.ChunkOf(5, 0) == 4);
  CHECK(v2.ChunkOf(15, 0) == 4);
  CHECK(v2.ChunkOf(15, 1) == 3);
  CHECK(v2.FirstBlockOfChunk(1, 0) == 3);
  CHECK(v2.FirstBlockOfChunk(0, 1) == 3 + 15 * 4);  // after virtual stages 0..15
  CHECK(v2.LargestChunkOf(0) == 4);
  CheckChunksTile(v2, 126);
  CheckChunksTile(SplitLayers(126, Interleaved(16, 4, 7, 7)), 126);

  // Chunks of one layer (Llama 3): stage 0's first chunk and stage 15's last hold none.
  const StageLayers v8 = SplitLayers(126, Interleaved(16, 8, 7, 7));
  CHECK(v8.ChunkOf(0, 0) == 0);
  CHECK(v8.ChunkOf(0, 1) == 1);
  CHECK(v8.ChunkOf(15, 7) == 0);
  CHECK(v8.FirstBlockOfChunk(1, 0) == 0);
  CheckChunksTile(v8, 126);

  // Even stages: virtual stage k holds [k*c, (k+1)*c), c = L / (pp * vpp), as before.
  ParallelPlan even = Interleaved(4, 3, 0, 0);
  const StageLayers e = SplitLayers(24, even);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t r = 0; r < 4; ++r) {
      CHECK(e.ChunkOf(r, c) == 2);
      CHECK(e.FirstBlockOfChunk(r, c) == (c * 4 + r) * 2);
    }
  // Not interleaved: one chunk, the stage.
  even.schedule = PipelineSchedule::k1F1B;
  even.virtual_stages = 1;
  const StageLayers one = SplitLayers(24, even);
  CHECK(one.vpp == 1);
  CHECK(one.ChunkOf(2, 0) == 6);
  CHECK(one.FirstBlockOfChunk(2, 0) == 12);
  CHECK(one.ChunkOf(2, 1) == 0);
}

TEST_CASE("interleaved uneven splits that do not chunk are refused with the rule and the "
          "allowed values",
          "[planner][plan][uneven]") {
  ModelSpec m = SpecLlama(256, 8, 14, 768);
  m.vocab_size = 1000;
  const TrainingSpec t = Training(8, 128);
  CHECK(Validate(Interleaved(4, 2, 3, 3), m, t, 4).empty());  // 3 + 4 + 4 + 3
  CHECK(Validate(Interleaved(4, 2, 2, 4), m, t, 4).empty());  // end chunks 0 and 2

  // 1 + 4 + 4 + 5 (whole): stage 0's other chunk alone holds 2 > 1.
  const auto end = Validate(Interleaved(4, 2, 1, 5), m, t, 4);
  REQUIRE(end.size() == 1);
  CHECK(end[0].constraint == "stage_layers_with_vpp");
  CHECK(end[0].message ==
        "first_stage_layers=1, last_stage_layers=5 with vpp=2: each end stage's other 1 chunk(s) "
        "hold 2 layers each, 2 in all, more than its count (first 1, last 5); allowed: "
        "first_stage_layers and last_stage_layers >= 2 (the chunk at the model's end then holds "
        "the rest, 0 or more)");

  // 2 + 3 + 3 + 6 ... 14 = 2 + 2*3 + 6: the middle stages' 3 layers do not make 2 chunks.
  const auto odd = Validate(Interleaved(4, 2, 2, 6), m, t, 4);
  REQUIRE(odd.size() == 1);
  CHECK(odd[0].constraint == "stage_layers_with_vpp");
  CHECK_THAT(odd[0].message, Catch::Contains("3 layers each do not split into 2 equal chunks") &&
                                 Catch::Contains("allowed: vpp dividing 3"));

  // A split that is not whole is refused by stage_layers_split alone.
  const auto split = Validate(Interleaved(4, 2, 1, 2), m, t, 4);
  REQUIRE(split.size() == 1);
  CHECK(split[0].constraint == "stage_layers_split");
}

TEST_CASE("LighterEndsSplit for interleaved chunks", "[planner][plan][uneven]") {
  for (int64_t vpp : {2, 4, 8}) {
    INFO("vpp " << vpp);
    CHECK(LighterEndsSplit(126, 16, vpp) == StageSplit{7, 7});
  }
  CHECK_FALSE(LighterEndsSplit(126, 16, 3));   // middle 9: the ends would get 0 + 0
  CHECK(LighterEndsSplit(14, 4, 2) == StageSplit{3, 3});
  CHECK_FALSE(LighterEndsSplit(10, 4, 2));      // 1 + 4 + 4 + 1: an end chunk of -1
  CHECK_FALSE(LighterEndsSplit(126, 2, 2));     // pp = 2 has no middle stage
  CHECK_FALSE(LighterEndsSplit(126, 16, 1));
  // Every split it gives chunks (StageSplitFitsChunks) and is whole.
  for (int64_t layers : {14, 30, 61, 126})
    for (int64_t pp : {3, 4, 8, 16})
      for (int64_t vpp : {2, 3, 4}) {
        const std::optional<StageSplit> s = LighterEndsSplit(layers, pp, vpp);
        if (!s) continue;
        INFO(layers << " layers, pp " << pp << ", vpp " << vpp);
        const ParallelPlan plan = Interleaved(pp, vpp, s->first, s->last);
        CHECK(StageSplitIsWhole(layers, plan));
        CHECK(StageSplitFitsChunks(layers, plan));
        CheckChunksTile(SplitLayers(layers, plan), layers);
      }
}

TEST_CASE("search: 126 layers on pp=16 also run interleaved, vpp 2 and 8 on 7 + 14 x 8 + 7",
          "[planner][search][uneven]") {
  ModelSpec m = SpecLlama(256, 8, 126, 768);
  m.vocab_size = 1000;
  const std::vector<ScheduleChoice> choices =
      UnevenInterleavedChoices(m, 16, *UnevenSplitWorthTrying(m, 16));
  std::vector<int64_t> vpps;
  for (const ScheduleChoice& c : choices) {
    CHECK(c.schedule == PipelineSchedule::kInterleaved);
    CHECK(c.split == StageSplit{7, 7});
    vpps.push_back(c.virtual_stages);
  }
  CHECK(vpps == std::vector<int64_t>{2, 8});  // of 2, 4, 8: the fewest sends, the least bubble
  const std::vector<ScheduleChoice> pinned =
      UnevenInterleavedChoices(m, 16, *UnevenSplitWorthTrying(m, 16), 4);
  REQUIRE(pinned.size() == 1);
  CHECK(pinned[0].virtual_stages == 4);
  CHECK(UnevenInterleavedChoices(m, 16, *UnevenSplitWorthTrying(m, 16), 3).empty());

  SearchOptions options;
  options.threads = 1;
  options.top_k = 1'000'000;
  options.space.pins = ParsePlanPins("pp=16,recompute=none,zero=0,schedule=interleaved");
  const SearchResult r = Search(m, H100Cluster(2), Training(32, 128), options);
  std::set<int64_t> found;
  for (const RankedPlan& p : r.top) {
    CHECK(p.plan.first_stage_layers == 7);
    found.insert(p.plan.virtual_stages);
  }
  CHECK(found == std::set<int64_t>{2, 8});
  // A vpp pin runs its own.
  options.space.pins = ParsePlanPins("pp=16,recompute=none,zero=0,vpp=4");
  const SearchResult four = Search(m, H100Cluster(2), Training(32, 128), options);
  REQUIRE_FALSE(four.top.empty());
  for (const RankedPlan& p : four.top) {
    CHECK(p.plan.virtual_stages == 4);
    CHECK(p.plan.first_stage_layers == 7);
  }
}

TEST_CASE("interleaved uneven stages: the layers in flight, from the whole order of any m",
          "[planner][memory][uneven]") {
  // The whole order of m micro-batches, walked here; the model walks at most 3*pp of them.
  for (const ParallelPlan& plan : {Interleaved(4, 2, 3, 3), Interleaved(4, 2, 2, 4),
                                   Interleaved(3, 3, 4, 5)}) {
    const int64_t layers = plan.pp == 4 ? 14 : 15;
    const StageLayers split = SplitLayers(layers, plan);
    for (int64_t m : {plan.pp, 2 * plan.pp, 3 * plan.pp, 7 * plan.pp, 20 * plan.pp})
      for (int64_t stage = 0; stage < plan.pp; ++stage) {
        INFO(ToShortPlanString(plan) << " m " << m << " stage " << stage);
        int64_t alive = 0, peak = 0, at_last = 0, at_first = 0;
        for (const ScheduleItem& item :
             StageOrder(PipelineSchedule::kInterleaved, plan.pp, plan.virtual_stages, m, stage)) {
          const int64_t blocks = split.ChunkOf(stage, item.chunk);
          if (item.pass == PipelinePass::kForward) {
            alive += blocks;
            continue;
          }
          peak = std::max(peak, alive);
          if (item.chunk == plan.virtual_stages - 1) at_last = std::max(at_last, alive);
          if (item.chunk == 0) at_first = std::max(at_first, alive);
          alive -= blocks;
        }
        const MicrobatchesInFlight got = CountMicrobatchesInFlight(plan, layers, m, stage);
        const double stage_layers = static_cast<double>(split.Of(stage));
        CHECK(got.blocks == Approx(static_cast<double>(peak) / stage_layers));
        // Per chunk where the chunks differ (equal chunks keep the closed form's `blocks`).
        if (split.LargestChunkOf(stage) * plan.virtual_stages == split.Of(stage)) continue;
        CHECK(got.head_blocks == Approx(static_cast<double>(at_last) / stage_layers));
        CHECK(got.embedding_blocks == Approx(static_cast<double>(at_first) / stage_layers));
      }
  }
}

TEST_CASE("interleaved uneven stages: parameters add up, memory per stage", "[planner][memory][uneven]") {
  const ModelSpec model = LoadModel("llama3.1-405b");
  REQUIRE(model.layers == 126);
  ParallelPlan plan = Interleaved(16, 8, 7, 7);
  int64_t sum = 0;
  for (int64_t s = 0; s < plan.pp; ++s) sum += CountStageParams(model, plan, s).total();
  CHECK(sum == CountParams(model));
  plan.dp = 128;
  plan.tp = 8;
  plan.sequence_parallel = true;
  const TrainingSpec t = Training(2048, 8192);
  REQUIRE(Validate(plan, model, t, 16384).empty());
  // Stage 0 holds 7 of the middle stages' 8 layers; its first chunk none.
  const MemoryBreakdown first = DetailedStageMemory(model, t, plan, 0);
  const MemoryBreakdown middle = DetailedStageMemory(model, t, plan, 1);
  CHECK(first.activations_bytes > 0);
  CHECK(first.activations_bytes < middle.activations_bytes);
}

TEST_CASE("meshplan estimate and simulate: Llama 3's 405B layout, interleaved in chunks of one "
          "layer",
          "[planner][cli][uneven]") {
  const std::string setup = "--model llama3.1-405b --cluster 16384xH100 --global-batch 2048 "
                            "--seq 8192 --plan dp=128,tp=8,pp=16,sp=1,zero=1,recompute=full,"
                            "schedule=interleaved,vpp=8,first_stage_layers=7,last_stage_layers=7";
  const test::CliResult est = test::RunMeshplan("estimate --format json " + setup, false);
  INFO(est.output);
  REQUIRE(est.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(est.output);
  CHECK(j["setup"]["plan"].get<std::string>().find("vpp=8,first_stage_layers=7") != std::string::npos);
  CHECK(j["step_time_s"].get<double>() > 0);

  const test::CliResult sim = test::RunMeshplan("simulate " + setup);
  INFO(sim.output);
  CHECK(sim.exit_code == 0);

  const test::CliResult bad = test::RunMeshplan(
      "estimate --model llama3.1-405b --cluster 16384xH100 --global-batch 2048 --seq 8192 --plan "
      "dp=128,tp=8,pp=16,schedule=interleaved,vpp=3,first_stage_layers=7,last_stage_layers=7");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("stage_layers_with_vpp") && Catch::Contains("allowed"));
}

}  // namespace
}  // namespace meshplan
