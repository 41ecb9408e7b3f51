// PlanShape (planner/cost/plan_shape.h) and the search's evaluator that reuses it
// (planner/cost/plan_evaluator.h): a base evaluated after another of the same shape costs
// exactly what Estimate() says, whatever came before it.
#include <catch2/catch.hpp>

#include <vector>

#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/param_count.h"
#include "planner/cost/plan_evaluator.h"
#include "planner/cost/plan_shape.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::H100Cluster;
using testing::SpecLlama;
using testing::Training;

ParallelPlan Plan(int64_t dp, int64_t tp, int64_t pp, int64_t micro_batch) {
  ParallelPlan p;
  p.dp = dp;
  p.tp = tp;
  p.pp = pp;
  p.micro_batch = micro_batch;
  p.sequence_parallel = tp > 1;
  return p;
}

TEST_CASE("plans of one shape differ only in ZeRO, recompute and the overlap / offload knobs",
          "[planner][cost][shape]") {
  const ParallelPlan base = Plan(4, 2, 2, 1);
  ParallelPlan other = base;
  other.zero_stage = 3;
  other.recompute = RecomputePolicy(Recompute::kFull);
  other.tp_comm_overlap = true;
  other.zero3_prefetch = 0;
  other.offload_activations = true;
  CHECK(SameShape(base, other));
  ParallelPlan mbs = base;
  mbs.micro_batch = 2;
  CHECK_FALSE(SameShape(base, mbs));
  ParallelPlan sp = base;
  sp.sequence_parallel = false;
  CHECK_FALSE(SameShape(base, sp));
  ParallelPlan split = base;
  split.first_stage_layers = 3;
  CHECK_FALSE(SameShape(base, split));
}

TEST_CASE("the evaluator's bases, walked as the search walks them, cost what Estimate says",
          "[planner][cost][shape][search]") {
  const ModelSpec model = SpecLlama(2048, 16, 8, 5632);
  ClusterSpec cluster = H100Cluster(2);  // 16 GPUs
  const TrainingSpec training = Training(32, 2048);
  EstimateOptions options;
  options.memory_headroom = 0.05;
  // Two shapes, each with every ZeRO and recompute choice, then the first shape again.
  std::vector<ParallelPlan> plans;
  for (const ParallelPlan& shape : {Plan(4, 2, 2, 1), Plan(2, 4, 2, 2), Plan(4, 2, 2, 1)})
    for (int zero = 0; zero <= 3; ++zero)
      for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
        ParallelPlan p = shape;
        p.zero_stage = zero;
        p.recompute = RecomputePolicy(r);
        plans.push_back(p);
      }
  // GPUs sized between the largest plan (the first: ZeRO 0, no recompute) and the smallest
  // (ZeRO 3, full recompute), so that some do not fit and say why.
  const double largest = Estimate(model, cluster, training, plans[0], options).memory.total_bytes;
  const double smallest = Estimate(model, cluster, training, plans[11], options).memory.total_bytes;
  cluster.gpu.memory_bytes = static_cast<int64_t>((largest + smallest) / 2);
  int fitting = 0;
  for (bool explain : {true, false}) {
    PlanEvaluator evaluator(model, cluster, training, options, explain);
    for (const ParallelPlan& p : plans) {
      INFO(ToPlanString(p) << (explain ? "" : " (reasons left out)"));
      PlanCost cost = evaluator.EstimateBase(p);
      const PlanCost expected = Estimate(model, cluster, training, p, options);
      CHECK(cost.time.total_s == expected.time.total_s);
      CHECK(cost.time.compute_s == expected.time.compute_s);
      CHECK(cost.memory.total_bytes == expected.memory.total_bytes);
      CHECK(cost.params_per_rank == expected.params_per_rank);
      CHECK(cost.hardware_flops_per_step == expected.hardware_flops_per_step);
      CHECK(cost.fits == expected.fits);
      fitting += cost.fits ? 1 : 0;
      if (!explain) {
        CHECK(cost.reason.empty());
        ExplainNoFit(cluster, options, &cost);
      }
      CHECK(cost.reason == expected.reason);
    }
  }
  CHECK(fitting > 0);
  CHECK(fitting < static_cast<int>(2 * plans.size()));
}

// The shape counts a block's parameters from the matrices its op list holds; the count per
// rank is the block's tp shard with X/ep of its routed experts, as param_count.h's own walks
// of the block give it (a dense model, and a MoE one with and without expert parallelism).
TEST_CASE("a shape's block parameters are param_count's, from its op list's matrices",
          "[planner][cost][shape][moe]") {
  const TrainingSpec training = Training(64, 4096);
  const ModelSpec dense = SpecLlama(2048, 16, 8, 5632);
  for (const char* text : {"dp=8", "dp=4,tp=2", "dp=2,tp=4,pp=2"}) {
    const ParallelPlan plan = ParsePlanString(text);
    INFO(text);
    const PlanShape shape = MakePlanShape(dense, training, plan);
    CHECK(shape.block_params == BlockParamsPerTpRank(dense, plan.tp));
    CHECK(shape.dense_block_params == shape.block_params);
    CHECK(shape.routed_expert_params == 0);
  }
  const ModelSpec moe = LoadModel("mixtral-8x7b");
  for (const char* text : {"dp=8,tp=2", "dp=8,tp=2,ep=4", "dp=8,ep=8"}) {
    const ParallelPlan plan = ParsePlanString(text);
    INFO(text);
    const PlanShape shape = MakePlanShape(moe, training, plan);
    const int64_t routed_all = RoutedExpertParamsPerRank(moe, plan.tp, 1);
    const int64_t routed_here = RoutedExpertParamsPerRank(moe, plan.tp, plan.ep);
    CHECK(routed_here * plan.ep == routed_all);  // Mixtral: 8 experts split evenly
    CHECK(shape.block_params ==
          BlockParamsPerTpRank(moe, plan.tp, /*moe_layer=*/true) - routed_all + routed_here);
    CHECK(shape.dense_block_params == BlockParamsPerTpRank(moe, plan.tp, /*moe_layer=*/false));
    CHECK(shape.routed_expert_params == (plan.ep > 1 ? routed_here : 0));
  }
}

}  // namespace
}  // namespace meshplan
