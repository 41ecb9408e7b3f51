// The explorer's expert-parallel knob and trade-off rows, without a window: ep values offered
// for a MoE model (divisors of dp that divide the experts), none above 1 for a dense one,
// and the ep rows trading expert memory per GPU against all-to-all time.
#include <catch2/catch.hpp>

#include <algorithm>

#include "gui/explorer_state.h"
#include "gui/tradeoffs.h"
#include "planner/config/config_loader.h"

namespace meshplan {
namespace {

struct Fixture {
  ModelSpec model = LoadModel("mixtral-8x7b");  // X = 8 experts, top-2
  ClusterSpec cluster = LoadCluster("64xH100");  // 8 nodes of 8
  TrainingSpec training;
  Fixture() {
    training.global_batch = 64;
    training.seq_len = 4096;
  }
};

TEST_CASE("the ep knob offers the divisors of dp that divide the experts", "[gui][tradeoffs][ep]") {
  const Fixture f;
  const ParallelPlan plan = ParsePlanString("dp=16,tp=4,zero=1");
  std::vector<int64_t> valid, invalid;
  for (const KnobOption& o : KnobOptions(f.model, f.cluster, f.training, plan, Knob::kEp)) {
    (o.valid ? valid : invalid).push_back(o.value);
    if (o.valid) CHECK(o.plan.ep == o.value);
    if (o.valid) CHECK(o.plan.dp == 16);  // ep moves no mesh factor
    if (!o.valid) CHECK_THAT(o.note, Catch::Matchers::Contains("moe.experts=8"));
  }
  CHECK(valid == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(invalid == std::vector<int64_t>{16});
  CHECK(std::string(KnobKey(Knob::kEp)) == "ep");

  // A dense model: ep=1 only.
  Fixture d;
  d.model = LoadModel("llama2-7b");
  const auto dense = KnobOptions(d.model, d.cluster, d.training, plan, Knob::kEp);
  REQUIRE(dense.size() == 1);
  CHECK(dense[0].value == 1);
  CHECK(dense[0].valid);
}

TEST_CASE("a mesh change that leaves ep off dp repairs ep", "[gui][tradeoffs][ep]") {
  const Fixture f;
  // tp=4 doubles dp to 16: ep=8 still divides it and stays.
  const auto wider = PlanWithKnob(f.model, f.cluster, f.training,
                                  ParsePlanString("dp=8,tp=8,ep=8"), Knob::kTp, 4);
  REQUIRE(wider);
  CHECK(wider->dp == 16);
  CHECK(wider->ep == 8);
  // cp=2 halves dp to 4: ep=8 no longer divides it, so ep comes down to the closest valid 4.
  const auto cp = PlanWithKnob(f.model, f.cluster, f.training,
                               ParsePlanString("dp=8,tp=8,ep=8"), Knob::kCp, 2);
  REQUIRE(cp);
  CHECK(cp->dp == 4);
  CHECK(cp->ep == 4);
  CHECK(DescribePlanChanges(ParsePlanString("dp=8,tp=8,ep=8"), *cp) == "dp=4, cp=2, ep=4");
}

TEST_CASE("ep trade-off rows: expert memory per GPU falls, all-to-all time appears",
          "[gui][tradeoffs][ep]") {
  const Fixture f;
  const ParallelPlan plan = ParsePlanString("dp=8,tp=8,zero=1");
  const auto rows = EpTradeoffRows(f.model, f.cluster, f.training, plan);
  REQUIRE(rows.size() == kTradeoffEpValues.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO(rows[i].label << " " << rows[i].note);
    REQUIRE(rows[i].valid);
    CHECK(rows[i].plan.ep == kTradeoffEpValues[i]);
    CHECK(rows[i].plan.dp == 8);
    if (i > 0) {
      CHECK(rows[i].cost.memory.params_bytes < rows[i - 1].cost.memory.params_bytes);
      CHECK(rows[i].cost.time.exposed_comm_s[MeshDim::kEp] > 0);
    }
  }
  CHECK(rows[0].is_current);
  CHECK(rows[0].cost.time.exposed_comm_s[MeshDim::kEp] == 0);

  // A dense model: the rows above ep=1 say why not.
  Fixture d;
  d.model = LoadModel("llama2-7b");
  const auto dense = EpTradeoffRows(d.model, d.cluster, d.training, plan);
  CHECK(dense[0].valid);
  for (size_t i = 1; i < dense.size(); ++i) {
    CHECK_FALSE(dense[i].valid);
    CHECK_THAT(dense[i].note, Catch::Matchers::Contains("needs a mixture-of-experts model"));
  }
}

}  // namespace
}  // namespace meshplan
