// Expert parallelism as a plan field: the ep= key (plan strings, YAML plan files), its
// validity rules (ep_needs_moe, ep_divides_dp, ep_divides_experts) with messages naming the
// values, and the expert-parallel / expert-data-parallel groups of planner/mesh_layout.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "planner/config/config_loader.h"
#include "planner/input_error.h"
#include "planner/mesh_layout.h"
#include "planner/parallel_plan.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

// A small MoE: 8 routed experts, top-2 (Mixtral's shape, scaled down).
ModelSpec SmallMoe() {
  ModelSpec m = testing::SpecLlama(256, 8, 4, 512);
  m.name = "small-moe";
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 512;
  return m;
}

const PlanViolation* Find(const std::vector<PlanViolation>& v, const std::string& id) {
  for (const auto& x : v)
    if (x.constraint == id) return &x;
  return nullptr;
}

TEST_CASE("ep= parses, prints only when set, and reads back", "[planner][plan][ep]") {
  const ParallelPlan p = ParsePlanString("dp=8,ep=4,tp=2");
  CHECK(p.ep == 4);
  CHECK(p.expert_dp() == 2);
  CHECK(ParsePlanString(ToPlanString(p)) == p);
  CHECK(ParsePlanString(ToShortPlanString(p)) == p);
  CHECK_THAT(ToPlanString(p), Catch::Contains(",cp=1,ep=4,zero="));
  CHECK(ToShortPlanString(p) == "dp=8,tp=2,ep=4");
  // ep=1 (the default) is left out, so dense plan strings are unchanged.
  CHECK_THAT(ToPlanString(ParsePlanString("dp=8")), !Catch::Contains("ep="));
  CHECK(ParsePlanString("dp=8").ep == 1);
  CHECK_THROWS_WITH(ParsePlanString("ep=two"), Catch::Contains("ep") && Catch::Contains("integer"));
  CHECK_THROWS_WITH(ParsePlanString("ep=999999999999"), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(ParsePlanString("foo=1"), Catch::Contains("ep,"));
}

TEST_CASE("ep rules: >= 1, divides dp, divides the experts, MoE only", "[planner][plan][ep]") {
  const ModelSpec moe = SmallMoe();
  const TrainingSpec t = testing::Training(16, 128);
  CHECK(Validate(ParsePlanString("dp=8,ep=8"), moe, t, 8).empty());
  CHECK(Validate(ParsePlanString("dp=8,ep=2"), moe, t, 8).empty());

  const auto zero = Validate(ParsePlanString("dp=8,ep=0"), moe, t, 8);
  REQUIRE(Find(zero, "factors_positive"));
  CHECK_THAT(Find(zero, "factors_positive")->message, Catch::Contains("ep=0"));

  // ep=3 divides neither dp=6 nor the 8 experts: both rules, each naming its values.
  const auto three = Validate(ParsePlanString("dp=6,ep=3"), moe, testing::Training(12, 128), 6);
  CHECK_FALSE(Find(three, "ep_divides_dp"));  // 3 divides 6
  REQUIRE(Find(three, "ep_divides_experts"));
  CHECK_THAT(Find(three, "ep_divides_experts")->message,
             Catch::Contains("ep=3") && Catch::Contains("moe.experts=8") &&
                 Catch::Contains("allowed with dp=6: 1, 2"));
  const auto four = Validate(ParsePlanString("dp=6,ep=4"), moe, testing::Training(12, 128), 6);
  REQUIRE(Find(four, "ep_divides_dp"));
  CHECK_THAT(Find(four, "ep_divides_dp")->message,
             Catch::Contains("ep=4 does not divide dp=6") && Catch::Contains("allowed: 1, 2, 3, 6"));
  CHECK_FALSE(Find(four, "ep_divides_experts"));
  // dp = 5040 has 60 divisors: the message lists the first 12, then "...".
  const auto many = Validate(ParsePlanString("dp=5040,ep=11"), moe, testing::Training(5040, 128), 5040);
  REQUIRE(Find(many, "ep_divides_dp"));
  CHECK_THAT(Find(many, "ep_divides_dp")->message,
             Catch::EndsWith("allowed: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, ..."));

  const ModelSpec dense = testing::SpecLlama(256, 8, 4, 512);
  const auto on_dense = Validate(ParsePlanString("dp=8,ep=2"), dense, t, 8);
  REQUIRE(on_dense.size() == 1);
  CHECK(on_dense[0].constraint == "ep_needs_moe");
  CHECK_THAT(on_dense[0].message, Catch::Contains("ep=2") && Catch::Contains("dense") &&
                                      Catch::Contains("allowed: ep=1"));
  CHECK(Validate(ParsePlanString("dp=8"), dense, t, 8).empty());
  // ep does not change the world size: it is carved out of dp.
  CHECK(ParsePlanString("dp=8,ep=8").world_size() == 8);
}

TEST_CASE("CheckPlan's ep bits and Validate's violations are the same rules", "[planner][plan][ep]") {
  const TrainingSpec t = testing::Training(24, 128);
  for (const ModelSpec& m : {SmallMoe(), testing::SpecLlama(256, 8, 4, 512)}) {
    ParallelPlan p;
    for (p.dp = 1; p.dp <= 8; ++p.dp)
      for (p.ep = 0; p.ep <= 9; ++p.ep) {
        const PlanConstraintMask mask = CheckPlan(p, m, t, p.dp);
        const auto violations = Validate(p, m, t, p.dp);
        PlanConstraintMask from_messages = 0;
        for (const PlanViolation& v : violations)
          for (int c = 0; c < kNumPlanConstraints; ++c)
            if (v.constraint == ConstraintId(static_cast<PlanConstraint>(c)))
              from_messages |= MaskOf(static_cast<PlanConstraint>(c));
        CHECK(from_messages == mask);
        const bool ep_ok = p.ep >= 1 && p.dp % p.ep == 0 &&
                           (m.moe.enabled() ? m.moe.experts % p.ep == 0 : p.ep == 1);
        const PlanConstraintMask ep_bits =
            MaskOf(PlanConstraint::kFactorsPositive) | MaskOf(PlanConstraint::kEpNeedsMoe) |
            MaskOf(PlanConstraint::kEpDividesDp) | MaskOf(PlanConstraint::kEpDividesExperts);
        CHECK(((mask & ep_bits) == 0) == ep_ok);
      }
  }
}

TEST_CASE("plan files take ep and refuse a bad one naming the field", "[planner][plan][ep]") {
  PlanFile file;
  file.model = SmallMoe();
  file.cluster = testing::H100Cluster(1);
  file.training = testing::Training(16, 128);
  file.plan = ParsePlanString("dp=8,ep=4,zero=1");
  CHECK(PlanFileFromText(PlanFileToYaml(file), "p.yaml").plan == file.plan);
  file.plan.ep = 3;
  try {
    PlanFileFromText(PlanFileToYaml(file), "p.yaml");
    FAIL("a plan with ep=3 on dp=8 loaded");
  } catch (const InputError& e) {
    CHECK_THAT(e.message(), Catch::Contains("ep=3 does not divide dp=8") &&
                                Catch::Contains("[ep_divides_dp]"));
  }
}

ParallelPlan Mesh(int64_t dp, int64_t pp, int64_t cp, int64_t tp, int64_t ep) {
  ParallelPlan p;
  p.dp = dp;
  p.pp = pp;
  p.cp = cp;
  p.tp = tp;
  p.ep = ep;
  return p;
}

TEST_CASE("expert groups: ep consecutive dp coordinates, edp the rest of dp x cp",
          "[planner][mesh][ep]") {
  using V = std::vector<int64_t>;
  // dp=4, tp=2, ep=2: dp coordinates {0,1} and {2,3} are the ep groups; dp strides by tp=2.
  const ParallelPlan plan = Mesh(4, 1, 1, 2, 2);
  CHECK(ExpertParallelMembers(plan, 0) == V{0, 2});
  CHECK(ExpertParallelMembers(plan, 5) == V{5, 7});
  CHECK(ExpertParallelIndex(plan, 7) == 1);
  CHECK(ExpertWeightReplicaMembers(plan, 0) == V{0, 4});
  CHECK(ExpertWeightReplicaMembers(plan, 3) == V{3, 7});
  CHECK(ExpertWeightReplicaIndex(plan, 7) == 1);
  // ep=1: each rank is its own ep group; the edp group is the dp x cp weight replicas.
  const ParallelPlan no_ep = Mesh(4, 1, 2, 2, 1);
  CHECK(ExpertParallelMembers(no_ep, 3) == V{3});
  CHECK(ExpertWeightReplicaMembers(no_ep, 3) == WeightReplicaMembers(no_ep, 3));
  CHECK_THROWS_AS(ExpertParallelMembers(Mesh(4, 1, 1, 1, 3), 0), std::out_of_range);
}

TEST_CASE("expert groups partition the world and cross the dp x cp replicas once",
          "[planner][mesh][ep]") {
  const ParallelPlan plan = Mesh(GENERATE(4, 8), GENERATE(1, 2), GENERATE(1, 2), GENERATE(1, 2),
                                 GENERATE(1, 2, 4));
  std::set<int64_t> ep_seen, edp_seen;
  for (int64_t r = 0; r < plan.world_size(); ++r) {
    const auto ep = ExpertParallelMembers(plan, r);
    const auto edp = ExpertWeightReplicaMembers(plan, r);
    REQUIRE(static_cast<int64_t>(ep.size()) == plan.ep);
    REQUIRE(static_cast<int64_t>(edp.size()) == plan.dp / plan.ep * plan.cp);
    CHECK(ep[ExpertParallelIndex(plan, r)] == r);
    CHECK(edp[ExpertWeightReplicaIndex(plan, r)] == r);
    for (int64_t m : ep) {
      CHECK(ExpertParallelMembers(plan, m) == ep);
      // Same pp, cp, tp: an ep group lies inside the rank's dp group.
      const auto dp_group = MeshGroupMembers(plan, r, MeshDim::kDp);
      CHECK(std::find(dp_group.begin(), dp_group.end(), m) != dp_group.end());
    }
    // The ep group and the edp group meet in the rank only; ep x edp = the dp x cp replicas.
    std::set<int64_t> both;
    for (int64_t e : ep)
      for (int64_t d : ExpertWeightReplicaMembers(plan, e)) both.insert(d);
    const auto replicas = WeightReplicaMembers(plan, r);
    CHECK(both == std::set<int64_t>(replicas.begin(), replicas.end()));
    if (ExpertParallelIndex(plan, r) == 0) ep_seen.insert(ep.begin(), ep.end());
    edp_seen.insert(edp.begin(), edp.end());
  }
  CHECK(static_cast<int64_t>(ep_seen.size()) == plan.world_size());
  CHECK(static_cast<int64_t>(edp_seen.size()) == plan.world_size());
}

}  // namespace
}  // namespace meshplan
