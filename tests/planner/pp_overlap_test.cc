// pp_overlap (planner/parallel_plan.h): an interleaved pipeline's sends behind the next chunk's
// compute, as Megatron-Core's overlap_p2p_comm runs them. The analytic step time keeps only the
// fill's sends exposed and charges the hidden ones' slowdown; the search sets it where the
// framework runs it. The simulator's side: tests/simulator/pp_overlap_sim_test.cc.
#include <catch2/catch.hpp>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/step_time.h"
#include "planner/cost/step_work.h"
#include "planner/search/search.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

struct Setup {
  ModelSpec model = LoadModel("llama2-13b");
  ClusterSpec cluster = LoadCluster("16xH100");
  TrainingSpec training = [] {
    TrainingSpec t = testing::Training(128, 4096, Precision::kBf16);
    t.framework = LoadFramework("megatron-core");
    return t;
  }();
};

ParallelPlan Interleaved(bool overlap) {
  ParallelPlan p = ParsePlanString("dp=4,pp=4,zero=1,schedule=interleaved,vpp=5");
  p.pp_comm_overlap = overlap;
  return p;
}

TEST_CASE("pp_overlap hides the chunks' sends, not the fill's, and slows what it hides",
          "[planner][cost][pp_overlap]") {
  const Setup s;
  const ParallelPlan off = Interleaved(false), on = Interleaved(true);
  const StepWork work = BuildStepWork(s.model, s.training, on);
  CHECK(work.pp_activation.overlappable);
  CHECK(work.pp_gradient.overlappable);
  CHECK_FALSE(BuildStepWork(s.model, s.training, off).pp_activation.overlappable);
  const double slot = TimeStepWork(work, s.cluster, s.training.precision).pp_slot_s;
  REQUIRE(slot > 0);

  const PlanCost a = Estimate(s.model, s.cluster, s.training, off);
  const PlanCost b = Estimate(s.model, s.cluster, s.training, on);
  const double m = static_cast<double>(work.micro_batches), v = 5, pp = 4;
  // 13B's chunk of two blocks computes for milliseconds, a send takes less: all hidden.
  CHECK(a.time.exposed_comm_s[MeshDim::kPp] - b.time.exposed_comm_s[MeshDim::kPp] ==
        Approx(v * m * slot));
  CHECK(b.time.exposed_comm_s[MeshDim::kPp] >= (pp - 1) * slot);
  const double s_ = s.cluster.gpu.comm_overlap_slowdown;
  CHECK(b.time.overlap_slowdown_s - a.time.overlap_slowdown_s ==
        Approx(v * m * slot * s_ / (1 + s_)));
  CHECK(b.time.total_s < a.time.total_s);
  CHECK(b.memory.total_bytes == a.memory.total_bytes);  // a timeline choice, no buffers

  // Without interleaving the knob is refused, so nothing times it.
  ParallelPlan plain = ParsePlanString("dp=4,pp=4,zero=1,pp_overlap=1");
  CHECK_FALSE(Validate(plain, s.model, s.training, 16).empty());
}

TEST_CASE("the search sets pp_overlap on the interleaved plans of a framework that runs it",
          "[planner][search][pp_overlap]") {
  Setup s;
  SearchOptions options;
  options.threads = 1;
  options.top_k = 100000;
  options.space.pins = ParsePlanPins("pp=4,schedule=interleaved,vpp=5");
  const SearchResult mcore = Search(s.model, s.cluster, s.training, options);
  REQUIRE_FALSE(mcore.top.empty());
  for (const RankedPlan& r : mcore.top) CHECK(r.plan.pp_comm_overlap);
  CHECK(mcore.knobs.pp_overlap_on > 0);

  // Pinned to 0, it stays 0 and the plan is slower.
  options.space.pins = ParsePlanPins("pp=4,schedule=interleaved,vpp=5,pp_overlap=0");
  const SearchResult pinned = Search(s.model, s.cluster, s.training, options);
  REQUIRE_FALSE(pinned.top.empty());
  for (const RankedPlan& r : pinned.top) CHECK_FALSE(r.plan.pp_comm_overlap);
  CHECK(pinned.knobs.pp_overlap_on == 0);
  CHECK(pinned.top.front().cost.time.total_s > mcore.top.front().cost.time.total_s);

  // A framework whose pipeline sends between chunks: never set.
  s.training.framework = LoadFramework("pytorch");
  options.space.pins = ParsePlanPins("pp=4,schedule=interleaved,vpp=5");
  const SearchResult pytorch = Search(s.model, s.cluster, s.training, options);
  for (const RankedPlan& r : pytorch.top) CHECK_FALSE(r.plan.pp_comm_overlap);
  CHECK(pytorch.knobs.pp_overlap_on == 0);
}

}  // namespace
}  // namespace meshplan
