// pp_overlap (planner/parallel_plan.h) in the simulator: the sends of an interleaved pipeline
// behind the next chunk, played out in time, as the analytic model times them.
#include <catch2/catch.hpp>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "simulator/simulate.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

ParallelPlan Interleaved(bool overlap) {
  ParallelPlan p = ParsePlanString("dp=4,pp=4,zero=1,schedule=interleaved,vpp=5");
  p.pp_comm_overlap = overlap;
  return p;
}

TEST_CASE("pp_overlap: the simulator plays the sends behind the chunks as the analytic model "
          "times them",
          "[simulator][pp_overlap]") {
  const ModelSpec model = LoadModel("llama2-13b");
  const ClusterSpec cluster = LoadCluster("16xH100");
  TrainingSpec training = testing::Training(128, 4096, Precision::kBf16);
  training.framework = LoadFramework("megatron-core");
  for (const bool overlap : {false, true}) {
    INFO("pp_overlap " << overlap);
    const ParallelPlan plan = Interleaved(overlap);
    const PlanCost analytic = Estimate(model, cluster, training, plan);
    const SimResult sim = Simulate(model, cluster, training, plan, {.timeline = false});
    CHECK(sim.time.total_s == Approx(analytic.time.total_s).epsilon(0.03));
  }
  const SimResult off = Simulate(model, cluster, training, Interleaved(false), {.timeline = false});
  const SimResult on = Simulate(model, cluster, training, Interleaved(true), {.timeline = false});
  CHECK(on.time.total_s < off.time.total_s);
}

}  // namespace
}  // namespace meshplan
