// Uneven pipeline stages (first_stage_layers, last_stage_layers): the split
// (planner/stage_layers.h), the plan string and plan file, the rules and their messages,
// and the cost model's use of each stage's own block count, by hand on a small model.
#include <catch2/catch.hpp>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"
#include "planner/cost/step_time.h"
#include "planner/cost/step_work.h"
#include "planner/input_error.h"
#include "planner/parallel_plan.h"
#include "planner/search/plan_space.h"
#include "planner/search/search.h"
#include "planner/stage_layers.h"
#include "tests/cli_run.h"
#include "tests/planner/cost_test_specs.h"

#include <nlohmann/json.hpp>

namespace meshplan {
namespace {

using testing::H100Cluster;
using testing::SpecLlama;
using testing::Training;

// 10 layers, small enough to count by hand; a small vocabulary, so the head weighs less
// than a block.
ModelSpec TenLayers() {
  ModelSpec m = SpecLlama(256, 8, 10, 768);
  m.vocab_size = 1000;
  return m;
}

const PlanViolation* Find(const std::vector<PlanViolation>& v, const std::string& id) {
  for (const PlanViolation& x : v)
    if (x.constraint == id) return &x;
  return nullptr;
}

TEST_CASE("the split: first and last stage as set, the middle stages share the rest",
          "[planner][plan][uneven]") {
  const ParallelPlan plan = ParsePlanString("pp=4,first_stage_layers=1,last_stage_layers=3");
  const StageLayers split = SplitLayers(10, plan);
  CHECK(split.Of(0) == 1);
  CHECK(split.Of(1) == 3);
  CHECK(split.Of(2) == 3);
  CHECK(split.Of(3) == 3);
  CHECK(split.Of(4) == 0);
  CHECK(split.FirstBlockOf(2) == 4);
  CHECK(split.FirstBlockOf(3) == 7);
  CHECK(split.Total() == 10);
  CHECK_FALSE(split.even());
  CHECK(LayersOfStage(TenLayers(), plan, 0) == 1);

  // Llama 3.1 405B: 126 layers on pp=16 as 7 + 14 x 8 + 7.
  const StageLayers llama = SplitLayers(
      126, ParsePlanString("pp=16,first_stage_layers=7,last_stage_layers=7"));
  CHECK((llama.first == 7 && llama.middle == 8 && llama.last == 7 && llama.Total() == 126));
  // One end set: the other stages, the unset end included, share the rest.
  const StageLayers one_end = SplitLayers(8, ParsePlanString("pp=3,first_stage_layers=2"));
  CHECK((one_end.first == 2 && one_end.middle == 3 && one_end.last == 3));
  // The default is the even split.
  CHECK(SplitLayers(12, ParsePlanString("pp=4")).even());
  CHECK(SplitLayers(12, ParsePlanString("pp=4")).Of(3) == 3);
  CHECK(SplitLayers(12, ParsePlanString("pp=1")).Of(0) == 12);
}

TEST_CASE("LighterEndsSplit gives the embedding and head stages fewer layers",
          "[planner][plan][uneven]") {
  CHECK(LighterEndsSplit(126, 16) == StageSplit{7, 7});   // 14 x 8 in the middle
  CHECK(LighterEndsSplit(128, 16) == StageSplit{1, 1});   // 14 x 9 in the middle
  CHECK(LighterEndsSplit(105, 8) == StageSplit{11, 10});  // 6 x 14 in the middle
  CHECK(LighterEndsSplit(9, 2) == StageSplit{5, 4});
  CHECK(LighterEndsSplit(8, 2) == StageSplit{5, 3});
  CHECK_FALSE(LighterEndsSplit(8, 1));
  CHECK(LighterEndsSplit(14, 8) == StageSplit{1, 1});    // 6 x 2 in the middle
  CHECK_FALSE(LighterEndsSplit(9, 8));                     // 6 x 2 in the middle leave -3
}

TEST_CASE("plan strings and plan files carry first_stage_layers and last_stage_layers",
          "[planner][plan][uneven]") {
  const ParallelPlan p = ParsePlanString("dp=2,pp=4,first_stage_layers=1,last_stage_layers=3");
  CHECK(p.first_stage_layers == 1);
  CHECK(p.last_stage_layers == 3);
  CHECK(ToShortPlanString(p) == "dp=2,pp=4,first_stage_layers=1,last_stage_layers=3");
  CHECK(ParsePlanString(ToPlanString(p)) == p);
  CHECK(ToPlanString(ParsePlanString("pp=4")).find("stage_layers") == std::string::npos);
  CHECK_THROWS_WITH(ParsePlanString("first_stage_layers=x"),
                    Catch::Contains("first_stage_layers") && Catch::Contains("integer"));
  CHECK_THROWS_WITH(ParsePlanString("last_stage_layers=2000000"),
                    Catch::Contains("last_stage_layers") && Catch::Contains("kMaxStageLayers"));

  PlanFile file;
  file.model = TenLayers();
  file.cluster = H100Cluster(1);
  file.training = Training(8, 128);
  file.plan = ParsePlanString("dp=2,pp=4,first_stage_layers=1,last_stage_layers=3");
  const std::string yaml = PlanFileToYaml(file);
  CHECK(yaml.find("first_stage_layers: 1") != std::string::npos);
  CHECK(PlanFileFromText(yaml, "plan.yaml") == file);
}

TEST_CASE("uneven splits that do not work are refused with the rule, the fields and the "
          "allowed values",
          "[planner][plan][uneven]") {
  const ModelSpec m = TenLayers();
  const TrainingSpec t = Training(8, 128);
  CHECK(Validate(ParsePlanString("pp=4,first_stage_layers=1,last_stage_layers=3"), m, t, 4).empty());
  CHECK(Validate(ParsePlanString("pp=2,first_stage_layers=4,last_stage_layers=6"), m, t, 2).empty());
  // pp_divides_layers is the even split's rule: 10 layers on pp=4 fail it, uneven they pass.
  CHECK(Find(Validate(ParsePlanString("pp=4"), m, t, 4), "pp_divides_layers"));

  const auto middle = Validate(ParsePlanString("pp=4,first_stage_layers=1,last_stage_layers=2"), m, t, 4);
  REQUIRE(middle.size() == 1);
  CHECK(middle[0].constraint == "stage_layers_split");
  CHECK(middle[0].message ==
        "first_stage_layers=1, last_stage_layers=2 leave 7 of layers=10 to the other 2 stage(s) "
        "of pp=4, which must each get the same whole number >= 1; allowed: first_stage_layers + "
        "last_stage_layers = 10 - 2*k for a whole k >= 1 (each stage >= 1 layer)");

  const auto pp2 = Validate(ParsePlanString("pp=2,first_stage_layers=4,last_stage_layers=5"), m, t, 2);
  REQUIRE(pp2.size() == 1);
  CHECK(pp2[0].constraint == "stage_layers_split");
  CHECK(pp2[0].message == "first_stage_layers=4, last_stage_layers=5 on pp=2 must add up to "
                          "layers=10 (each >= 1)");

  const auto none_left = Validate(ParsePlanString("pp=3,first_stage_layers=5,last_stage_layers=5"), m, t, 3);
  CHECK(Find(none_left, "stage_layers_split"));

  const auto negative = Validate(ParsePlanString("pp=4,first_stage_layers=-1"), m, t, 4);
  REQUIRE(Find(negative, "stage_layers_split"));
  CHECK(Find(negative, "stage_layers_split")->message ==
        "first_stage_layers=-1: a stage's layers must be >= 1 (0 = the even share, the default)");

  const auto single = Validate(ParsePlanString("first_stage_layers=4"), m, t, 1);
  REQUIRE(single.size() == 1);
  CHECK(single[0].constraint == "stage_layers_need_pp");
  CHECK(single[0].message == "first_stage_layers=4 need pp >= 2 (pp=1 has one stage, holding all "
                             "layers=10); allowed with pp=1: 0 (the default)");

  const auto vpp = Validate(ParsePlanString("pp=2,schedule=interleaved,vpp=2,first_stage_layers=4,"
                                            "last_stage_layers=6"),
                            m, t, 2);
  REQUIRE(vpp.size() == 1);
  CHECK(vpp[0].constraint == "stage_layers_with_vpp");
  CHECK(vpp[0].message == "first_stage_layers=4, last_stage_layers=6 with vpp=2: the chunk size "
                          "comes from a stage with the even share, and pp=2 has none when both "
                          "ends are set; allowed: set one of first_stage_layers and "
                          "last_stage_layers, or vpp=1");
}

TEST_CASE("cost model by hand: 10 layers on pp=4 as 1 + 3 + 3 + 3", "[planner][cost][uneven]") {
  const ModelSpec m = TenLayers();
  const TrainingSpec t = Training(8, 128);
  const ParallelPlan plan = ParsePlanString("pp=4,first_stage_layers=1,last_stage_layers=3");
  const int64_t block = BlockParams(m);

  // Parameters: each stage its own blocks; the stages add up to the model.
  CHECK(CountStageParams(m, plan, 0).blocks == 1 * block);
  CHECK(CountStageParams(m, plan, 1).blocks == 3 * block);
  CHECK(CountStageParams(m, plan, 3).blocks == 3 * block);
  int64_t sum = 0;
  for (int64_t s = 0; s < plan.pp; ++s) sum += CountStageParams(m, plan, s).total();
  CHECK(sum == CountParams(m));

  // StepWork: the parts of each stage.
  const StepWork work = BuildStepWork(m, t, plan);
  CHECK(PartsOfStage(work, 0).blocks == 1);
  CHECK(PartsOfStage(work, 0).embedding);
  CHECK(PartsOfStage(work, 2).blocks == 3);
  CHECK(PartsOfStage(work, 3).blocks == 3);
  CHECK(PartsOfStage(work, 3).head);

  // Memory: a stage's activations scale with its own blocks. Stage 1 holds 3 blocks here and
  // 2 in 3 + 2 + 2 + 3 (same pp, same micro-batches in flight): the seed model's block term
  // is linear in them.
  const ParallelPlan two = ParsePlanString("pp=4,first_stage_layers=3,last_stage_layers=3");
  const double three_blocks = SeedStageMemory(m, t, plan, 1).activations_bytes;
  const double two_blocks = SeedStageMemory(m, t, two, 1).activations_bytes;
  CHECK(three_blocks / two_blocks == Approx(1.5));
  // The detailed model: the stage's parameters (padded groups) differ by one block.
  const MemoryBreakdown d3 = DetailedStageMemory(m, t, plan, 1);
  const MemoryBreakdown d2 = DetailedStageMemory(m, t, two, 1);
  CHECK(d3.params_bytes - d2.params_bytes == Approx(2.0 * double(block)));  // mixed: bf16 copy
  CHECK(d3.activations_bytes > d2.activations_bytes);

  // Step time: with stage 0 given most of the layers (4 + 2 + 2 + 2), its compute sets the
  // step: m micro-batches of 4 blocks and the embedding.
  const ParallelPlan heavy = ParsePlanString("pp=4,first_stage_layers=4,mbs=1");
  const StepWork hw = BuildStepWork(m, t, heavy);
  REQUIRE(PartsOfStage(hw, 0).blocks == 4);
  REQUIRE(PartsOfStage(hw, 3).blocks == 2);
  const ClusterSpec cluster = H100Cluster(1, 4);
  const StepTimeBreakdown time = AnalyticStepTime(hw, cluster, t.precision);
  const ComputeRates rates = RatesFor(cluster.gpu, t.precision);
  auto compute = [&](const PartWork& p) {
    return TimeOf(p.forward, rates).total() + TimeOf(p.backward_input, rates).total() +
           TimeOf(p.backward_weight, rates).total();
  };
  const double stage0 = 4 * compute(hw.block) + compute(hw.embedding);
  CHECK(time.compute_s == Approx(double(hw.micro_batches) * stage0).epsilon(1e-9));
}

TEST_CASE("search: 126 layers on pp=16 are split 7 + 14 x 8 + 7, and only uneven",
          "[planner][search][uneven]") {
  ModelSpec m = SpecLlama(256, 8, 126, 768);
  m.vocab_size = 1000;
  SearchOptions options;
  options.threads = 1;
  options.space.pins = ParsePlanPins("pp=16,recompute=none,zero=0");
  const SearchResult r = Search(m, H100Cluster(2), Training(32, 128), options);
  REQUIRE_FALSE(r.top.empty());
  for (const RankedPlan& p : r.top) {
    CHECK(p.plan.first_stage_layers == 7);
    CHECK(p.plan.last_stage_layers == 7);
  }
  CHECK(r.constraints[static_cast<int>(PlanConstraint::kPpDividesLayers)].violated > 0);
  // Even stages only: nothing is valid.
  options.space.uneven_stages = false;
  CHECK(Search(m, H100Cluster(2), Training(32, 128), options).valid == 0);
}

TEST_CASE("search also tries lighter ends where pp divides the layers and the vocabulary "
          "outweighs a block",
          "[planner][search][uneven]") {
  ModelSpec m = SpecLlama(256, 8, 12, 768);
  m.vocab_size = 1000;  // V*E = 0.26 M < a block's 0.85 M: even stages only
  CHECK_FALSE(UnevenSplitWorthTrying(m, 4));
  m.vocab_size = 8000;  // V*E = 2.05 M: 3 + 3 + 3 + 3 has 4.6 M on the ends, 2 + 4 + 4 + 2 3.7 M
  CHECK(UnevenSplitWorthTrying(m, 4) == StageSplit{2, 2});
  CHECK(UnevenSplitWorthTrying(m, 5) == StageSplit{2, 1});  // 12 on pp=5 must be uneven: 2+3x3+1
  SearchOptions options;
  options.threads = 1;
  options.top_k = 1'000'000;
  options.space.pins = ParsePlanPins("pp=4,recompute=none,zero=0,mbs=1");
  const SearchResult r = Search(m, H100Cluster(1, 4), Training(8, 128), options);
  bool even = false, lighter = false;
  for (const RankedPlan& p : r.top) {
    even |= p.plan.first_stage_layers == 0 && p.plan.last_stage_layers == 0;
    lighter |= p.plan.first_stage_layers == 2 && p.plan.last_stage_layers == 2;  // 2+4+4+2
  }
  CHECK(even);
  CHECK(lighter);
}

// ---- the CLI ----

nlohmann::json EstimateJson(const std::string& args) {
  const test::CliResult r = test::RunMeshplan("estimate --format json " + args, false);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

TEST_CASE("meshplan estimate: Llama 3.1 405B on 16384 H100 with 7 + 14 x 8 + 7 stages",
          "[planner][cli][uneven]") {
  const std::string setup = "--model llama3.1-405b --cluster 16384xH100 --global-batch 2048 "
                            "--seq 8192 ";
  const std::string plan =
      "dp=128,tp=8,pp=16,sp=1,zero=1,recompute=full,first_stage_layers=7,last_stage_layers=7";
  const nlohmann::json j = EstimateJson(setup + "--plan " + plan);
  CHECK(j["setup"]["plan"].get<std::string>().find("first_stage_layers=7,last_stage_layers=7") !=
        std::string::npos);
  CHECK(j["memory"]["total_bytes"].get<double>() > 0);
  CHECK(j["step_time_s"].get<double>() > 0);

  // The parameters of the stages add up to the model; each stage's memory is its own.
  const ModelSpec model = LoadModel("llama3.1-405b");
  REQUIRE(model.layers == 126);
  ParallelPlan p = ParsePlanString(plan);
  p.tp = 1;  // whole stages (tp shards round the vocabulary)
  int64_t sum = 0;
  for (int64_t s = 0; s < p.pp; ++s) sum += CountStageParams(model, p, s).total();
  CHECK(sum == CountParams(model));
  p.tp = 8;
  TrainingSpec t = Training(2048, 8192);
  t.framework = LoadFramework("megatron-core");  // estimate's default on a GPU
  const MemoryBreakdown first = DetailedStageMemory(model, t, p, 0);
  const MemoryBreakdown middle = DetailedStageMemory(model, t, p, 1);
  CHECK(middle.activations_bytes > 0);
  CHECK(first.total_bytes != middle.total_bytes);
  MemoryOptions gpu;  // estimate counts the H100's runtime memory (CUDA context, NCCL, ...)
  gpu.runtime = LoadCluster("16384xH100").gpu.runtime_memory;
  CHECK(j["memory"]["total_bytes"].get<double>() ==
        Approx(EstimateMemory(model, t, p, MemoryModel::kDetailed, gpu).total_bytes));

  // Bad splits exit with code 2, naming the rule, the fields and the allowed values.
  const test::CliResult bad = test::RunMeshplan(
      "estimate " + setup + "--plan dp=128,tp=8,pp=16,first_stage_layers=7,last_stage_layers=6");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("stage_layers_split") &&
                             Catch::Contains("first_stage_layers=7, last_stage_layers=6") &&
                             Catch::Contains("allowed"));
  const test::CliResult even = test::RunMeshplan("estimate " + setup + "--plan dp=128,tp=8,pp=16");
  CHECK(even.exit_code == 2);
  CHECK_THAT(even.output, Catch::Contains("pp_divides_layers"));
}

TEST_CASE("meshplan simulate and search take and produce uneven plans", "[planner][cli][uneven]") {
  const test::CliResult sim = test::RunMeshplan(
      "simulate --model llama3.1-405b --cluster 16384xH100 --global-batch 2048 --seq 8192 "
      "--plan dp=128,tp=8,pp=16,sp=1,zero=1,recompute=full,first_stage_layers=7,"
      "last_stage_layers=7");
  INFO(sim.output);
  CHECK(sim.exit_code == 0);
  CHECK_THAT(sim.output, Catch::Contains("first_stage_layers=7,last_stage_layers=7"));

  const test::CliResult search = test::RunMeshplan(
      "search --format json --top 3 --model llama3.1-405b --cluster 16384xH100 --global-batch "
      "2048 --seq 8192 --only pp=16,tp=8",
      false);
  REQUIRE(search.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(search.output);
  REQUIRE_FALSE(j["top"].empty());
  CHECK(j["top"][0]["fields"]["first_stage_layers"].get<int64_t>() == 7);
  CHECK(j["top"][0]["fields"]["last_stage_layers"].get<int64_t>() == 7);
}

}  // namespace
}  // namespace meshplan
