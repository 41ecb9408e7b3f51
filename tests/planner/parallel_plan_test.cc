// ParallelPlan: parsing the plan string and validating divisibility rules.
#include <catch2/catch.hpp>

#include <bit>

#include "planner/input_error.h"
#include "planner/parallel_plan.h"

namespace meshplan {
namespace {

ModelSpec SmallLlama() {
  ModelSpec m;
  m.name = "small";
  m.vocab_size = 1000;
  m.hidden = 256;
  m.layers = 4;
  m.heads = 8;
  m.kv_heads = 4;
  m.ffn_hidden = 768;
  return m;
}

TrainingSpec Batch(int64_t global_batch, int64_t seq) {
  TrainingSpec t;
  t.global_batch = global_batch;
  t.seq_len = seq;
  return t;
}

bool Has(const std::vector<PlanViolation>& v, const std::string& constraint) {
  for (const auto& x : v)
    if (x.constraint == constraint) return true;
  return false;
}

TEST_CASE("plan string round-trips and defaults omitted keys", "[planner][plan]") {
  const ParallelPlan p = ParsePlanString("dp=2,tp=4,zero=1,sp=1,mbs=2,recompute=full");
  CHECK(p.dp == 2);
  CHECK(p.tp == 4);
  CHECK(p.pp == 1);
  CHECK(p.cp == 1);
  CHECK(p.zero_stage == 1);
  CHECK(p.sequence_parallel);
  CHECK(p.micro_batch == 2);
  CHECK(p.recompute == Recompute::kFull);
  CHECK(p.schedule == PipelineSchedule::k1F1B);
  CHECK(ParsePlanString(ToPlanString(p)) == p);
}

TEST_CASE("plan string errors name the key and the allowed values", "[planner][plan]") {
  CHECK_THROWS_WITH(ParsePlanString("tp=four"), Catch::Contains("tp") && Catch::Contains("integer"));
  CHECK_THROWS_WITH(ParsePlanString("recompute=some"),
                    Catch::Contains("none, selective, full"));
  CHECK_THROWS_WITH(ParsePlanString("foo=1"), Catch::Contains("unknown key"));
  CHECK_THROWS_AS(ParsePlanString("tp"), InputError);
}

TEST_CASE("validate names each factor that is off", "[planner][plan]") {
  const ModelSpec m = SmallLlama();
  CHECK(Validate(ParsePlanString("dp=2,tp=4"), m, Batch(8, 128), 8).empty());
  CHECK(Has(Validate(ParsePlanString("tp=8"), m, Batch(8, 128), 8), "tp_divides_kv_heads"));
  CHECK(Has(Validate(ParsePlanString("tp=16"), m, Batch(8, 128), 16), "tp_divides_heads"));
  CHECK(Has(Validate(ParsePlanString("pp=3"), m, Batch(8, 128), 3), "pp_divides_layers"));
  CHECK(Has(Validate(ParsePlanString("dp=3"), m, Batch(8, 128), 3), "batch_divides"));
  CHECK(Has(Validate(ParsePlanString("dp=2"), m, Batch(8, 128), 4), "world_size"));
  CHECK(Has(Validate(ParsePlanString("cp=3"), m, Batch(8, 128), 3), "cp_divides_seq"));
  CHECK(Has(Validate(ParsePlanString("sp=1"), m, Batch(8, 128), 1), "sp_needs_tp"));
  CHECK(Has(Validate(ParsePlanString("vpp=2,pp=2"), m, Batch(8, 128), 2), "vpp_needs_interleaved"));
  CHECK(Has(Validate(ParsePlanString("zero=4"), m, Batch(8, 128), 1), "zero_stage_range"));
  CHECK(Has(Validate(ParsePlanString("dp=0"), m, Batch(8, 128), 0), "factors_positive"));
  CHECK(Validate(ParsePlanString("pp=2,vpp=2,schedule=interleaved"), m, Batch(8, 128), 2).empty());
  CHECK(Has(Validate(ParsePlanString("pp=2,vpp=2,schedule=interleaved,mbs=1"), m, Batch(3, 128), 2),
            "interleaved_microbatches"));
}


TEST_CASE("CheckPlan's bits and Validate's violations are the same rules", "[planner][plan]") {
  const ModelSpec m = SmallLlama();
  const TrainingSpec t = Batch(12, 96);
  const PipelineSchedule schedules[] = {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B,
                                        PipelineSchedule::kInterleaved,
                                        PipelineSchedule::kZeroBubbleH1};
  int64_t checked = 0, invalid = 0;
  ParallelPlan p;
  for (p.dp = 0; p.dp <= 4; ++p.dp)
    for (p.tp = 1; p.tp <= 8; p.tp *= 2)
      for (p.pp = 1; p.pp <= 3; ++p.pp)
        for (p.cp = 1; p.cp <= 3; ++p.cp)
          for (p.micro_batch = 1; p.micro_batch <= 3; ++p.micro_batch)
            for (p.virtual_stages = 1; p.virtual_stages <= 2; ++p.virtual_stages)
              for (PipelineSchedule s : schedules)
                for (int sp = 0; sp <= 1; ++sp)
                  for (int64_t gpus_per_node : {0, 4}) {
                    p.schedule = s;
                    p.sequence_parallel = sp == 1;
                    const PlanConstraintMask mask = CheckPlan(p, m, t, 8, gpus_per_node);
                    const auto violations = Validate(p, m, t, 8, gpus_per_node);
                    PlanConstraintMask from_messages = 0;
                    for (const PlanViolation& v : violations) {
                      CHECK_FALSE(v.message.empty());
                      for (int c = 0; c < kNumPlanConstraints; ++c)
                        if (v.constraint == ConstraintId(static_cast<PlanConstraint>(c)))
                          from_messages |= MaskOf(static_cast<PlanConstraint>(c));
                    }
                    CHECK(from_messages == mask);
                    CHECK(violations.size() == static_cast<size_t>(std::popcount(mask)));
                    ++checked;
                    invalid += mask != 0;
                  }
  CHECK(invalid > 0);
  CHECK(invalid < checked);
  // The placement rule: a tp group stays inside a node unless gpus_per_node is 0.
  CHECK(Has(Validate(ParsePlanString("tp=8"), SmallLlama(), Batch(8, 128), 8, 4), "tp_within_node"));
  CHECK_FALSE(Has(Validate(ParsePlanString("tp=8,dp=1"), m, Batch(8, 128), 8, 0), "tp_within_node"));
}

TEST_CASE("the short plan string keeps only what differs and reads back", "[planner][plan]") {
  CHECK(ToShortPlanString(ParallelPlan{}) == "dp=1");
  const ParallelPlan p = ParsePlanString("dp=8,tp=2,zero=3,sp=1,mbs=2,schedule=interleaved,vpp=4,pp=2");
  CHECK(ToShortPlanString(p) == "dp=8,tp=2,pp=2,zero=3,sp=1,mbs=2,schedule=interleaved,vpp=4");
  CHECK(ParsePlanString(ToShortPlanString(p)) == p);
}

}  // namespace
}  // namespace meshplan
