// Where the analytic model is exact (nothing overlaps, nothing is pipelined), the
// analytic step time (Estimate) and the simulated one agree to 1e-9 relative, part by part.
#include <catch2/catch.hpp>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/names.h"
#include "sim_test_util.h"
#include "simulator/simulate.h"

namespace meshplan {
namespace {

constexpr double kRel = 1e-9;

void RequireAgree(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
                  const ParallelPlan& plan) {
  INFO("plan " << ToPlanString(plan));
  // Every policy, whichever framework offers it (the executor's profile lacks op).
  TrainingSpec any = training;
  any.framework.recompute.op = true;
  REQUIRE(Validate(plan, model, any, cluster.world_size()).empty());
  const PlanCost cost = Estimate(model, cluster, any, plan);
  const SimResult sim = Simulate(model, cluster, any, plan, {.timeline = false});
  const StepTimeBreakdown& a = cost.time;
  const StepTimeBreakdown& s = sim.time;
  CHECK(s.total_s == Approx(a.total_s).epsilon(kRel));
  CHECK(s.compute_s == Approx(a.compute_s).epsilon(kRel));
  CHECK(s.recompute_s == Approx(a.recompute_s).epsilon(kRel).margin(1e-15));
  CHECK(s.optimizer_s == Approx(a.optimizer_s).epsilon(kRel));
  for (MeshDim d : kAllMeshDims) {
    INFO("exposed " << ToString(d));
    CHECK(s.exposed_comm_s[d] == Approx(a.exposed_comm_s[d]).epsilon(kRel).margin(1e-15));
  }
  CHECK(s.bubble_s == Approx(0).margin(1e-15 * a.total_s));
}

TEST_CASE("a single GPU: analytic and simulated step times agree", "[simulator][agreement]") {
  const ModelSpec model = LoadModel("llama2-7b");
  const ClusterSpec cluster = LoadCluster("1xH100");
  ParallelPlan plan;
  plan.recompute = GENERATE(as<RecomputePolicy>{}, Recompute::kNone, Recompute::kSelective,
                            Recompute::kFull, Recompute::kOp, RecomputePolicy::Every(2),
                            RecomputePolicy::Every(3));
  plan.micro_batch = GENERATE(1, 2);
  RequireAgree(model, cluster, test::Training(8, 4096), plan);
}

TEST_CASE("tp=2 with exposed TP communication: analytic and simulated agree",
          "[simulator][agreement]") {
  const ModelSpec model = LoadModel("llama2-7b");
  const ClusterSpec cluster = LoadCluster("2xH100");
  ParallelPlan plan;
  plan.tp = 2;
  plan.sequence_parallel = GENERATE(false, true);
  plan.recompute = GENERATE(as<RecomputePolicy>{}, Recompute::kNone, Recompute::kSelective,
                            Recompute::kFull, Recompute::kOp, RecomputePolicy::Every(2),
                            RecomputePolicy::Every(3));
  RequireAgree(model, cluster, test::Training(4, 4096), plan);
}

TEST_CASE("tp=2 under a framework that issues the backward's TP behind the column-parallel "
          "GEMMs: analytic and simulated agree",
          "[simulator][agreement][tp_backward_overlap]") {
  const ModelSpec model = LoadModel("llama2-7b");
  const ClusterSpec cluster = LoadCluster("2xH100");
  TrainingSpec training = test::Training(4, 4096);
  training.framework = LoadFramework("megatron-core");
  ParallelPlan plan;
  plan.tp = 2;
  plan.sequence_parallel = GENERATE(false, true);
  plan.recompute = GENERATE(as<RecomputePolicy>{}, Recompute::kNone, Recompute::kSelective,
                            Recompute::kFull);
  INFO("plan " << ToPlanString(plan));
  REQUIRE(Validate(plan, model, training, cluster.world_size()).empty());
  const StepTimeBreakdown a = Estimate(model, cluster, training, plan).time;
  const StepTimeBreakdown s = Simulate(model, cluster, training, plan, {.timeline = false}).time;
  // The collectives hide behind the GEMMs in both; the simulator's compute carries the
  // slowdown they cause (as tp_overlap's, below), the analytic model reports it apart.
  CHECK(a.overlap_slowdown_s > 0);
  CHECK(s.total_s == Approx(a.total_s).epsilon(kRel));
  CHECK(s.compute_s == Approx(a.compute_s + a.overlap_slowdown_s).epsilon(kRel));
  for (MeshDim d : kAllMeshDims) {
    INFO("exposed " << ToString(d));
    CHECK(s.exposed_comm_s[d] == Approx(a.exposed_comm_s[d]).epsilon(kRel).margin(1e-15));
  }
}

TEST_CASE("tp=2 on a slow network with latency: analytic and simulated agree",
          "[simulator][agreement]") {
  const ModelSpec model = test::TinyLlama();
  const ClusterSpec cluster = test::TestCluster(1, 2, 2e9, 1e9, 5e-6, 3e-6);
  ParallelPlan plan;
  plan.tp = 2;
  plan.sequence_parallel = GENERATE(false, true);
  plan.micro_batch = 2;
  RequireAgree(model, cluster, test::Training(8, 256), plan);
}

TEST_CASE("plain DDP without pipelining: the bucketed all-reduce agrees with the analytic drain",
          "[simulator][agreement]") {
  // One communication stream draining buckets behind the backward is what both model.
  const ModelSpec model = test::TinyLlama();
  const double bandwidth = GENERATE(1e8, 1e9, 1e11);
  const ClusterSpec cluster = test::TestCluster(1, 2, bandwidth, bandwidth, 2e-6, 1e-6);
  ParallelPlan plan;
  plan.dp = 2;
  RequireAgree(model, cluster, test::Training(8, 256), plan);
}

TEST_CASE("dp_overlap=0 and prefetch=0: every DP sync after the backward, every gather on the "
          "data path, in both models",
          "[simulator][agreement][overlap]") {
  // Nothing of DP overlaps the compute, so the closed form is exact. (ZeRO-1/2 are left
  // out: the simulator hides their parameter all-gathers behind the remaining optimizer
  // updates, which the closed form charges whole.)
  const ModelSpec model = test::TinyLlama();
  const double bandwidth = GENERATE(1e8, 1e10);
  const ClusterSpec cluster = test::TestCluster(1, 2, bandwidth, bandwidth, 2e-6, 1e-6);
  const std::string plan = GENERATE("dp=2,dp_overlap=0", "dp=2,zero=3,dp_overlap=0,prefetch=0",
                                    "dp=2,zero=3,mbs=2,dp_overlap=0,prefetch=0");
  RequireAgree(model, cluster, test::Training(8, 256), ParsePlanString(plan));
}

TEST_CASE("communication on the compute cores (comm_overlaps_compute false): every plan runs as "
          "with its overlaps off, in both models",
          "[simulator][agreement][overlap]") {
  // A CPU profile: Gloo's threads run on the ranks' own cores, so nothing hides. The plan's
  // knobs ask for overlap; the step is the one of the same plan with every overlap off.
  const ModelSpec model = test::TinyLlama();
  const TrainingSpec training = test::Training(8, 256);
  ClusterSpec serial = test::TestCluster(1, 2, 1e9, 1e9, 2e-4);
  serial.gpu.comm_overlaps_compute = false;
  ClusterSpec overlapping = serial;
  overlapping.gpu.comm_overlaps_compute = true;
  const std::pair<std::string, std::string> cases[] = {
      {"dp=2", "dp=2,dp_overlap=0"},
      {"dp=2,zero=3,mbs=2", "dp=2,zero=3,mbs=2,dp_overlap=0,prefetch=0"},
      {"tp=2,sp=1,tp_overlap=1", "tp=2,sp=1,tp_overlap=0"},
  };
  for (const auto& [asked, off] : cases) {
    INFO(asked);
    const PlanCost a = Estimate(model, serial, training, ParsePlanString(asked));
    const PlanCost b = Estimate(model, overlapping, training, ParsePlanString(off));
    CHECK(a.time.total_s == Approx(b.time.total_s).epsilon(kRel));
    const SimResult sa = Simulate(model, serial, training, ParsePlanString(asked), {.timeline = false});
    const SimResult sb = Simulate(model, overlapping, training, ParsePlanString(off), {.timeline = false});
    CHECK(sa.time.total_s == Approx(sb.time.total_s).epsilon(kRel));
  }
  // DP without overlap is exact in the closed form: the two models agree.
  RequireAgree(model, serial, training, ParsePlanString("dp=2,zero=3,mbs=2"));
}

TEST_CASE("dp_overlap and prefetch change the simulated step as they say",
          "[simulator][overlap][dp]") {
  const ModelSpec model = test::TinyLlama(8);
  const ClusterSpec cluster = test::TestCluster(1, 2, 2e9, 2e9, 0);
  const TrainingSpec training = test::Training(8, 256);
  auto step = [&](const std::string& plan) {
    return Simulate(model, cluster, training, ParsePlanString(plan), {.timeline = false}).time;
  };
  // Held syncs cannot hide: the exposed DP time is all of it.
  for (const std::string plan : {"dp=2", "dp=2,zero=2,mbs=2", "dp=2,zero=3"}) {
    INFO(plan);
    CHECK(step(plan + ",dp_overlap=0").exposed_comm_s[MeshDim::kDp] >
          step(plan).exposed_comm_s[MeshDim::kDp]);
  }
  // ZeRO-3: no prefetch exposes every gather; two ahead is never slower than one.
  const double none = step("dp=2,zero=3,prefetch=0").total_s;
  const double one = step("dp=2,zero=3,prefetch=1").total_s;
  const double two = step("dp=2,zero=3,prefetch=2").total_s;
  CHECK(none > one);
  CHECK(two <= one * (1 + 1e-12));
}

TEST_CASE("tp_overlap slows the overlapped passes alike in both models",
          "[simulator][agreement][overlap]") {
  // TP over an instant network, overlapped: nothing of it shows, but every pass that carries
  // it computes (1 + slowdown) times longer (planner/cost/step_time.h OverlapStretch).
  const ModelSpec model = test::TinyLlama(4);
  ClusterSpec cluster = test::TestCluster(1, 2, 1e30, 1e30, 0);
  cluster.gpu.comm_overlap_slowdown = 0.5;
  cluster.gpu.dp_overlap_slowdown = 0;  // the DP figure: TP overlap does not read it
  const TrainingSpec training = test::Training(4, 256);
  const ParallelPlan plan = ParsePlanString("tp=2,tp_overlap=1");
  const StepTimeBreakdown a = Estimate(model, cluster, training, plan).time;
  const SimResult sim = Simulate(model, cluster, training, plan, {.timeline = false});
  CHECK(a.overlap_slowdown_s > 0.4 * a.compute_s);  // all but the embedding backward
  CHECK(a.exposed_comm_s[MeshDim::kTp] == 0);
  CHECK(sim.time.total_s == Approx(a.total_s).epsilon(kRel));
  CHECK(sim.time.compute_s == Approx(a.compute_s + a.overlap_slowdown_s).epsilon(kRel));
}

}  // namespace
}  // namespace meshplan
