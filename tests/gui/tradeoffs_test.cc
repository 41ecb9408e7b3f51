// The explorer's plan logic without a window: which knob values are offered, how a
// knob moves the plan, and the ZeRO / tp trade-off rows.
#include <catch2/catch.hpp>

#include <algorithm>

#include "gui/tradeoffs.h"
#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/search/plan_space.h"

namespace meshplan {
namespace {

struct Fixture {
  ModelSpec model = LoadModel("llama2-7b");  // H = K = 32, F = 11008, L = 32
  ClusterSpec cluster = LoadCluster("8xH100");  // one node of 8
  TrainingSpec training;
  Fixture() {
    training.global_batch = 64;
    training.seq_len = 4096;
  }
  bool Valid(const ParallelPlan& p) const {
    return Validate(p, model, training, cluster.world_size(), cluster.gpus_per_node).empty();
  }
};

std::vector<int64_t> Values(const std::vector<KnobOption>& options, bool valid) {
  std::vector<int64_t> out;
  for (const KnobOption& o : options)
    if (o.valid == valid) out.push_back(o.value);
  return out;
}

const KnobOption& Option(const std::vector<KnobOption>& options, int64_t value) {
  const auto it = std::find_if(options.begin(), options.end(),
                               [value](const KnobOption& o) { return o.value == value; });
  REQUIRE(it != options.end());
  return *it;
}

}  // namespace

TEST_CASE("knob options for llama2-7b on 8 GPUs offer exactly the valid divisors",
          "[gui][tradeoffs]") {
  const Fixture f;
  const ParallelPlan plan = ParsePlanString("dp=2,tp=4,sp=1,zero=1");
  REQUIRE(f.Valid(plan));

  const auto tp = KnobOptions(f.model, f.cluster, f.training, plan, Knob::kTp);
  CHECK(Values(tp, true) == std::vector<int64_t>{1, 2, 4, 8});
  // tp=1 rebalances dp to 8 and must turn sequence parallel off (sp needs tp > 1).
  const KnobOption& tp1 = Option(tp, 1);
  CHECK(tp1.plan.dp == 8);
  CHECK(tp1.plan.tp == 1);
  CHECK_FALSE(tp1.plan.sequence_parallel);
  CHECK(tp1.note == "dp=8, sp=off");
  CHECK(Option(tp, 8).plan.dp == 1);

  // pp and cp take their GPUs from dp: 2 fits (dp=1), 4 and 8 would need 16 and 32 GPUs.
  for (Knob knob : {Knob::kPp, Knob::kCp}) {
    const auto options = KnobOptions(f.model, f.cluster, f.training, plan, knob);
    CHECK(Values(options, true) == std::vector<int64_t>{1, 2});
    CHECK(Values(options, false) == std::vector<int64_t>{4, 8});
    CHECK_THAT(Option(options, 4).note, Catch::Matchers::Contains("does not divide the 8 GPUs"));
  }
  // dp trades against tp: dp=8 means tp=1 (and sp off).
  const auto dp = KnobOptions(f.model, f.cluster, f.training, plan, Knob::kDp);
  CHECK(Values(dp, true) == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(Option(dp, 8).plan.tp == 1);

  // mbs: the divisors of the batch per dp rank (64 / 2).
  const auto mbs = KnobOptions(f.model, f.cluster, f.training, plan, Knob::kMicroBatch);
  CHECK(Values(mbs, true) == std::vector<int64_t>{1, 2, 4, 8, 16, 32});
  // vpp > 1 needs an interleaved pipeline, which needs pp >= 2: none with pp = 1.
  const auto vpp = KnobOptions(f.model, f.cluster, f.training, plan, Knob::kVirtualStages);
  CHECK(Values(vpp, true) == std::vector<int64_t>{1});
  CHECK(Values(KnobOptions(f.model, f.cluster, f.training, plan, Knob::kZero), true) ==
        std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("a tp that does not divide the heads is not offered, and says why",
          "[gui][tradeoffs]") {
  Fixture f;
  f.model = LoadModel("gpt2-small");  // H = 12, max_seq = 1024
  f.training.seq_len = 1024;
  const ParallelPlan plan = ParsePlanString("dp=8");
  const auto tp = KnobOptions(f.model, f.cluster, f.training, plan, Knob::kTp);
  CHECK(Values(tp, true) == std::vector<int64_t>{1, 2, 4});
  CHECK(Values(tp, false) == std::vector<int64_t>{8});
  CHECK_THAT(Option(tp, 8).note, Catch::Matchers::Contains("heads=12"));
  std::string why;
  CHECK_FALSE(PlanWithKnob(f.model, f.cluster, f.training, plan, Knob::kTp, 8, &why));
  CHECK(why == Option(tp, 8).note);
}

TEST_CASE("every offered value leads to a valid plan on the cluster, and no refused one does",
          "[gui][tradeoffs]") {
  const Fixture f;
  const auto plan_text = GENERATE(as<std::string>{}, "dp=8", "dp=2,tp=4,sp=1,zero=1",
                                  "dp=1,tp=4,pp=2,mbs=2", "dp=2,pp=2,cp=2,zero=3,recompute=full",
                                  "tp=2,pp=4,schedule=interleaved,vpp=2");
  const ParallelPlan plan = ParsePlanString(plan_text);
  INFO(plan_text);
  REQUIRE(f.Valid(plan));
  const std::vector<int64_t> divisors = Divisors(f.cluster.world_size());
  for (Knob knob : kAllKnobs)
    for (const KnobOption& o : KnobOptions(f.model, f.cluster, f.training, plan, knob)) {
      INFO(KnobKey(knob) << "=" << o.label << " (" << o.note << ")");
      if (knob == Knob::kDp || knob == Knob::kTp || knob == Knob::kPp || knob == Knob::kCp)
        CHECK(std::count(divisors.begin(), divisors.end(), o.value) == 1);
      const auto moved = PlanWithKnob(f.model, f.cluster, f.training, plan, knob, o.value);
      if (o.valid) {
        CHECK(f.Valid(o.plan));
        CHECK(KnobValue(o.plan, knob) == o.value);
        CHECK(o.plan.world_size() == f.cluster.world_size());
        CHECK(moved.has_value());
      } else {
        CHECK_FALSE(moved.has_value());
        CHECK_FALSE(o.note.empty());
      }
    }
}

TEST_CASE("leaving an interleaved pipeline also resets schedule and vpp", "[gui][tradeoffs]") {
  const Fixture f;
  const ParallelPlan plan = ParsePlanString("tp=2,pp=4,schedule=interleaved,vpp=2");
  const auto moved = PlanWithKnob(f.model, f.cluster, f.training, plan, Knob::kPp, 1);
  REQUIRE(moved);
  CHECK(moved->pp == 1);
  CHECK(moved->dp == 4);
  CHECK(moved->virtual_stages == 1);
  CHECK(moved->schedule != PipelineSchedule::kInterleaved);
  CHECK(DescribePlanChanges(plan, *moved) == "dp=4, pp=1, schedule=1f1b, vpp=1");
}

TEST_CASE("FitPlanToSetup keeps a valid plan and finds a close valid one otherwise",
          "[gui][tradeoffs]") {
  Fixture f;
  const ParallelPlan plan = ParsePlanString("dp=2,tp=4,sp=1,mbs=4");
  CHECK(FitPlanToSetup(f.model, f.cluster, f.training, plan) == plan);

  // A batch of 6 is not divisible by dp*mbs = 8: mbs comes down, tp stays.
  f.training.global_batch = 6;
  const ParallelPlan fitted = FitPlanToSetup(f.model, f.cluster, f.training, plan);
  CHECK(f.Valid(fitted));
  CHECK(fitted.tp == 4);
  CHECK(fitted.dp == 2);

  // Twice the GPUs: dp doubles, the rest stays.
  f.training.global_batch = 64;
  f.cluster = LoadCluster("16xH100");
  const ParallelPlan grown = FitPlanToSetup(f.model, f.cluster, f.training, plan);
  CHECK(f.Valid(grown));
  CHECK(grown.dp == 4);
  CHECK(grown.tp == 4);
  CHECK(grown.micro_batch == 4);
}

TEST_CASE("ZeRO trade-off rows: memory per GPU falls with each stage", "[gui][tradeoffs]") {
  const Fixture f;
  const ParallelPlan plan = ParsePlanString("dp=8,zero=1");
  const auto rows = ZeroTradeoffRows(f.model, f.cluster, f.training, plan);
  REQUIRE(rows.size() == 4);
  for (int z = 0; z < 4; ++z) {
    INFO("ZeRO-" << z);
    REQUIRE(rows[z].valid);
    CHECK(rows[z].label == "ZeRO-" + std::to_string(z));
    CHECK(rows[z].plan.zero_stage == z);
    CHECK(rows[z].is_current == (z == 1));
    CHECK(rows[z].note.empty());  // nothing but the stage changes
    CHECK(rows[z].cost.tokens_per_s > 0);
    // The row is the cost model's estimate of its plan.
    CHECK(rows[z].cost.memory.total_bytes ==
          Approx(Estimate(f.model, f.cluster, f.training, rows[z].plan).memory.total_bytes));
    if (z > 0) {
      CHECK(rows[z].cost.memory.total_bytes < rows[z - 1].cost.memory.total_bytes);
      CHECK(rows[z].cost.memory.optimizer_bytes <= rows[z - 1].cost.memory.optimizer_bytes);
    }
  }
  // ZeRO-1 shards the optimizer states over the 8 dp ranks: a big saving on a 7B model.
  CHECK(rows[1].cost.memory.optimizer_bytes < rows[0].cost.memory.optimizer_bytes / 4);
}

TEST_CASE("tp trade-off rows: memory per GPU falls as tp grows (dp rebalanced)",
          "[gui][tradeoffs]") {
  const Fixture f;
  const ParallelPlan plan = ParsePlanString("dp=8");
  const auto rows = TpTradeoffRows(f.model, f.cluster, f.training, plan);
  REQUIRE(rows.size() == kTradeoffTpValues.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO(rows[i].label);
    REQUIRE(rows[i].valid);
    CHECK(rows[i].plan.tp == kTradeoffTpValues[i]);
    CHECK(rows[i].plan.dp * rows[i].plan.tp == 8);
    CHECK(rows[i].cost.tokens_per_s > 0);
    if (i > 0) CHECK(rows[i].cost.memory.total_bytes < rows[i - 1].cost.memory.total_bytes);
  }
  CHECK(rows[0].is_current);

  // gpt2-small has 12 heads: tp=8 is not valid, and the row says why.
  Fixture g;
  g.model = LoadModel("gpt2-small");
  g.training.seq_len = 1024;
  const auto small = TpTradeoffRows(g.model, g.cluster, g.training, plan);
  REQUIRE(small.size() == 4);
  CHECK(small[0].valid);
  CHECK(small[1].valid);
  CHECK(small[2].valid);
  CHECK_FALSE(small[3].valid);
  CHECK_THAT(small[3].note, Catch::Matchers::Contains("heads"));
}

TEST_CASE("the stage-split knob: even or lighter ends, and it makes pp=3 valid for 32 layers",
          "[gui][tradeoffs][uneven]") {
  const Fixture f;  // 32 layers on 8 GPUs
  const ParallelPlan plan = ParsePlanString("dp=2,pp=4");
  REQUIRE(f.Valid(plan));
  const auto split = KnobOptions(f.model, f.cluster, f.training, plan, Knob::kStageSplit);
  // Even (8 each) and 7 + 9 + 9 + 7 (LighterEndsSplit).
  CHECK(Values(split, true) == std::vector<int64_t>{0, 7 * kStageSplitBase + 7});
  CHECK(KnobValueLabel(Knob::kStageSplit, 7 * kStageSplitBase + 7) == "first 7, last 7");
  CHECK(Option(split, 7 * kStageSplitBase + 7).plan.first_stage_layers == 7);
  // On one node of 8 GPUs pp=8 divides 32, and pp=2 too; with 6 GPUs pp=3 does not divide
  // 32 layers: the pp knob repairs it with the lighter ends, 11 + 11 + 10.
  Fixture six;
  six.cluster.nodes = 1;
  six.cluster.gpus_per_node = 6;
  six.training.global_batch = 60;
  const ParallelPlan two = ParsePlanString("dp=6,zero=1");
  REQUIRE(six.Valid(two));
  const auto pp = KnobOptions(six.model, six.cluster, six.training, two, Knob::kPp);
  const KnobOption& pp3 = Option(pp, 3);
  REQUIRE(pp3.valid);
  CHECK(pp3.plan.first_stage_layers + pp3.plan.last_stage_layers + 11 == 32);
  CHECK_THAT(pp3.note, Catch::Matchers::Contains("stages=first"));
}

TEST_CASE("the stage-split and vpp knobs under the interleaved schedule", "[gui][tradeoffs][uneven]") {
  const Fixture f;  // 32 layers on 8 GPUs
  const ParallelPlan interleaved = ParsePlanString("dp=2,pp=4,schedule=interleaved,vpp=2");
  REQUIRE(f.Valid(interleaved));
  // Even, and the lighter ends that split into 2 chunks: 6 + 10 + 10 + 6 (chunks of 5; the
  // end chunks hold 1).
  const auto split = KnobOptions(f.model, f.cluster, f.training, interleaved, Knob::kStageSplit);
  CHECK(Values(split, true) == std::vector<int64_t>{0, 6 * kStageSplitBase + 6});
  // With 7 + 9 + 9 + 7 the vpp knob offers the divisors of the middle stages' 9 layers: vpp=3
  // (chunks of 3, the end chunks of 1) runs interleaved.
  const ParallelPlan uneven = ParsePlanString("dp=2,pp=4,first_stage_layers=7,last_stage_layers=7");
  REQUIRE(f.Valid(uneven));
  const auto vpp = KnobOptions(f.model, f.cluster, f.training, uneven, Knob::kVirtualStages);
  const KnobOption& three = Option(vpp, 3);
  REQUIRE(three.valid);
  CHECK(three.plan.schedule == PipelineSchedule::kInterleaved);
  CHECK(three.plan.first_stage_layers == 7);
}


}  // namespace meshplan
