// FrameworkSpec::tp_backward_overlap: a column-parallel linear's backward TP collectives (the
// input's re-gather, the input gradient's reduce-scatter or all-reduce) issued behind its own
// GEMMs without the plan's tp_overlap, as Megatron-LM from 2022 and Transformer Engine run
// them. The analytic step time hides them behind those GEMMs only and charges their slowdown;
// the simulator's side: tests/simulator/agreement_test.cc.
#include <catch2/catch.hpp>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/collective_time.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/step_time.h"
#include "planner/cost/step_work.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

// Llama 2 13B on one node of 8 H100 under Megatron-Core, whose TP runs `overlap`.
struct Setup {
  explicit Setup(TpBackwardOverlap overlap = TpBackwardOverlap::kColumnGemms) {
    training.framework = LoadFramework("megatron-core");
    training.framework.tp_backward_overlap = overlap;
  }
  ModelSpec model = LoadModel("llama2-13b");
  ClusterSpec cluster = LoadCluster("8xH100");
  TrainingSpec training = testing::Training(16, 4096, Precision::kBf16);
};

// The seconds of `part`'s collectives behind the column-parallel GEMMs, per micro-batch.
double BehindGemmsSeconds(const PartWork& part, const ClusterSpec& cluster) {
  double s = 0;
  for (const Collective& c : part.collectives)
    if (c.behind_gemms) s += c.count * CollectiveTime(c.kind, c.bytes, c.group, cluster);
  return s;
}

TEST_CASE("TpBehindGemms: hidden behind the GEMMs, which run slower beside it, and the "
          "excess shows",
          "[planner][cost][tp_backward_overlap]") {
  const double s = 0.15;
  const BehindGemms short_comm = TpBehindGemms(1.0, 2.0, s);
  CHECK(short_comm.exposed == 0);
  CHECK(short_comm.slowed == Approx(1.0 * s / (1 + s)));
  // 3 s beside 2 s of GEMMs slowed to 2.3 s: 0.7 s show, the GEMMs ran 0.3 s longer.
  const BehindGemms long_comm = TpBehindGemms(3.0, 2.0, s);
  CHECK(long_comm.exposed == Approx(0.7));
  CHECK(long_comm.slowed == Approx(0.3));
  CHECK(long_comm.exposed + long_comm.slowed + 2.0 == Approx(3.0));  // never past the comm
  const BehindGemms no_gemms = TpBehindGemms(1.0, 0.0, s);
  CHECK(no_gemms.exposed == 1.0);
  CHECK(no_gemms.slowed == 0);
}

TEST_CASE("a framework's asynchronous backward TP collectives: which ones, and what they hide",
          "[planner][cost][tp_backward_overlap]") {
  const Setup s, blocking(TpBackwardOverlap::kNone);
  const bool sp = GENERATE(true, false);
  ParallelPlan plan = ParsePlanString("dp=2,tp=4,zero=1");
  plan.sequence_parallel = sp;
  INFO("sp " << sp);
  const StepWork work = BuildStepWork(s.model, s.training, plan);
  // Each half's input: with sp the re-gather (all-gather) and the gradient's reduce-scatter,
  // else the gradient's all-reduce; backward only, none of the output's collectives.
  int behind = 0;
  for (const Collective& c : work.block.collectives) {
    if (!c.behind_gemms) continue;
    behind += c.count;
    CHECK(c.dim == MeshDim::kTp);
    CHECK(c.phase == StepPhase::kBackward);
    CHECK(c.overlappable);
    if (sp)
      CHECK((c.kind == CollectiveKind::kAllGather || c.kind == CollectiveKind::kReduceScatter));
    else
      CHECK(c.kind == CollectiveKind::kAllReduce);
  }
  CHECK(behind == (sp ? 4 : 2));
  for (const Collective& c : BuildStepWork(s.model, blocking.training, plan).block.collectives)
    CHECK_FALSE(c.behind_gemms);
  // The lm_head reads its input through the same column-parallel collectives.
  CHECK(BehindGemmsSeconds(work.head, s.cluster) > 0);

  // 13B's GEMMs take milliseconds, a (T, E) collective over NVLink less: all hidden, each
  // slowing its GEMMs by comm * s / (1 + s).
  const PlanCost blocked = Estimate(s.model, s.cluster, blocking.training, plan);
  const PlanCost async = Estimate(s.model, s.cluster, s.training, plan);
  const double m = static_cast<double>(work.micro_batches);
  const double per_mb = static_cast<double>(s.model.layers) * BehindGemmsSeconds(work.block, s.cluster) +
                        BehindGemmsSeconds(work.head, s.cluster);
  const double slowdown = s.cluster.gpu.comm_overlap_slowdown;
  CHECK(blocked.time.exposed_comm_s[MeshDim::kTp] - async.time.exposed_comm_s[MeshDim::kTp] ==
        Approx(m * per_mb));
  CHECK(async.time.overlap_slowdown_s - blocked.time.overlap_slowdown_s ==
        Approx(m * per_mb * slowdown / (1 + slowdown)));
  CHECK(async.time.total_s < blocked.time.total_s);
  CHECK(async.memory.total_bytes == blocked.memory.total_bytes);  // a timeline matter
}

TEST_CASE("with the plan's tp_overlap every TP collective hides behind its pass, as before",
          "[planner][cost][tp_backward_overlap]") {
  const Setup s, blocking(TpBackwardOverlap::kNone);
  const ParallelPlan plan = ParsePlanString("dp=2,tp=4,sp=1,zero=1,tp_overlap=1");
  const PlanCost blocked = Estimate(s.model, s.cluster, blocking.training, plan);
  const PlanCost async = Estimate(s.model, s.cluster, s.training, plan);
  CHECK(async.time.total_s == blocked.time.total_s);
  CHECK(async.time.exposed_comm_s[MeshDim::kTp] == blocked.time.exposed_comm_s[MeshDim::kTp]);
  CHECK(async.time.overlap_slowdown_s == blocked.time.overlap_slowdown_s);
}

TEST_CASE("on communication that shares the compute cores, the collectives behind the GEMMs "
          "block too",
          "[planner][cost][tp_backward_overlap]") {
  const Setup s;
  StepWork work = BuildStepWork(s.model, s.training, ParsePlanString("dp=2,tp=4,sp=1,zero=1"));
  SerializeCommunication(&work);
  for (const Collective& c : work.block.collectives) CHECK_FALSE(c.overlappable);
  CHECK_FALSE(work.tp_comm_overlap);
  // SetPlanKnobs gives them back: the flag is the framework's, not the plan's.
  SetPlanKnobs(ParsePlanString("dp=2,tp=4,sp=1,zero=1"), &work);
  int overlappable = 0;
  for (const Collective& c : work.block.collectives) overlappable += c.overlappable ? c.count : 0;
  CHECK(overlappable == 4);
}

}  // namespace
}  // namespace meshplan
