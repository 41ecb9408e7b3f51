// The table of plan fields (planner/plan_fields.h): one row per field, in plan-string order,
// read and written through its member; every reader and writer of plans walks it.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "planner/input_error.h"
#include "planner/plan_fields.h"
#include "planner/search/candidate_dump.h"
#include "planner/search/plan_space.h"

namespace meshplan {
namespace {

// A plan with every field off its default (not a valid plan: the table does not judge).
ParallelPlan EveryFieldSet() {
  ParallelPlan p;
  for (const PlanFieldSpec& f : PlanFields())
    f.set(p, f.kind == PlanFieldKind::kInt ? f.default_value + 2 : 1 - f.default_value);
  p.recompute = Recompute::kSelective;
  p.schedule = PipelineSchedule::kZeroBubbleH1;
  return p;
}

TEST_CASE("plan fields: one row per field, in order, each key once", "[planner][plan_fields]") {
  REQUIRE(PlanFields().size() == static_cast<size_t>(kNumPlanFields));
  std::set<std::string> keys;
  for (size_t i = 0; i < PlanFields().size(); ++i) {
    const PlanFieldSpec& f = PlanFields()[i];
    INFO(f.key);
    CHECK(static_cast<size_t>(f.id) == i);
    CHECK(keys.insert(f.key).second);
    CHECK(FindPlanField(f.key) == &f);
    CHECK(std::string(f.doc).size() > 0);
    CHECK(f.default_value == f.get(ParallelPlan{}));
  }
  CHECK(FindPlanField("frobnicate") == nullptr);
  CHECK(PlanFieldKeyList() ==
        "dp, tp, pp, cp, ep, zero, sp, mbs, recompute, schedule, vpp, tp_overlap, pp_overlap, "
        "first_stage_layers, last_stage_layers, offload_opt, offload_act, offload_params, "
        "dp_overlap, prefetch");
}

TEST_CASE("plan fields: each member is read and written through its row, a plan string "
          "names them all", "[planner][plan_fields]") {
  const ParallelPlan p = EveryFieldSet();
  for (const PlanFieldSpec& f : PlanFields()) {
    INFO(f.key);
    CHECK_FALSE(f.is_default(p));  // set() reached the member get() reads
    ParallelPlan one;
    f.set(one, f.get(p));
    CHECK(ToShortPlanString(one) == std::string(f.key) + "=" + FormatFieldValue(f, f.get(p)));
  }
  CHECK(ParsePlanString(ToPlanString(p)) == p);
  CHECK(ParsePlanString(ToShortPlanString(p)) == p);
  CHECK(ToPlanString(p) == ToShortPlanString(p));  // every field differs from its default
  // The long form prints the ten fields always present, the others off their default.
  CHECK(ToPlanString(ParallelPlan{}) ==
        "dp=1,tp=1,pp=1,cp=1,zero=0,sp=0,mbs=1,recompute=none,schedule=1f1b,vpp=1");
}

TEST_CASE("plan strings and --only refuse a key given twice", "[planner][plan_fields]") {
  for (const char* text : {"dp=4,dp=8", "dp=4,tp=2,dp=4", "sp=1,sp=on", "prefetch=0,prefetch=1"}) {
    INFO(text);
    CHECK_THROWS_WITH(ParsePlanString(text),
                      Catch::Contains("--plan: ") && Catch::Contains("key given twice"));
    CHECK_THROWS_WITH(ParsePlanPins(text, "--only"),
                      Catch::Contains("--only: ") && Catch::Contains("key given twice"));
  }
  try {
    ParsePlanString("tp=2,dp=4,dp=8");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.field() == "dp");
  }
  try {
    ParsePlanPins("zero=1,zero=1");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.field() == "zero");
  }
  // Empty items are skipped, not repeated keys.
  CHECK(ParsePlanString("dp=2,,tp=2,").dp == 2);
}

TEST_CASE("plan fields: pins read and print through the table", "[planner][plan_fields]") {
  const PlanPins pins = ParsePlanPins("prefetch=0,tp=2,schedule=interleaved,sp=1");
  CHECK(pins.ToString() == "tp=2,sp=1,schedule=interleaved,prefetch=0");
  CHECK(pins.Keys() == std::vector<std::string>{"tp", "sp", "schedule", "prefetch"});
  ParallelPlan plan;
  plan.tp_comm_overlap = true;
  plan.zero3_prefetch = 3;
  pins.SetKnobs(&plan);  // the choices: pinned, else their defaults
  CHECK(plan.zero3_prefetch == 0);
  CHECK_FALSE(plan.tp_comm_overlap);
  CHECK(plan.tp == 1);  // an axis: not a choice
  CHECK_THROWS_WITH(ParsePlanPins("prefetch=-1"), Catch::Contains("expected an integer from 0 to 4; got -1"));
  CHECK_THROWS_WITH(ParsePlanPins("zero=7"), Catch::Contains("expected one of: 0, 1, 2, 3; got 7"));
  CHECK_THROWS_WITH(ParsePlanPins("vpp=0"), Catch::Contains("must be >= 1, got 0"));
}

TEST_CASE("plan fields: the dump's plan columns are the grid axes, in table order",
          "[planner][plan_fields]") {
  std::vector<std::string> axes;
  for (const PlanFieldSpec& f : PlanFields())
    if (f.role == PlanFieldRole::kAxis) axes.push_back(f.key);
  const std::vector<std::string>& columns = CandidateDump::Columns();
  REQUIRE(columns.size() > axes.size() + 2);
  CHECK(std::vector<std::string>(columns.begin() + 2, columns.begin() + 2 + static_cast<long>(axes.size())) == axes);
  CHECK(columns[2 + axes.size()] == "fits");
}

}  // namespace
}  // namespace meshplan
