// Invariants of the step graph and its simulation over a spread of plans: every op runs,
// streams run one op at a time in issue order, no op starts before its inputs end, the
// step splits exactly into compute, exposed communication, bubble and optimizer, and the
// graph carries the StepWork's compute and communication.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "planner/names.h"
#include "sim_test_util.h"
#include "simulator/event_sim.h"
#include "simulator/simulate.h"

namespace meshplan {
namespace {

TEST_CASE("simulated steps respect streams and dependencies and add up",
          "[simulator][graph]") {
  const std::string plan_text = GENERATE(
      "dp=8", "dp=2,tp=4,sp=1", "dp=8,zero=3,mbs=2", "dp=4,zero=2,tp=2,recompute=full",
      "tp=2,cp=2,dp=2,recompute=selective", "pp=4,dp=2,schedule=1f1b",
      "pp=2,tp=2,dp=2,schedule=gpipe,zero=1", "pp=4,dp=2,schedule=interleaved,vpp=2",
      "pp=4,tp=2,schedule=zb_h1,zero=1", "tp=4,dp=2,tp_overlap=1,sp=1",
      "pp=2,cp=2,tp=2,schedule=interleaved,vpp=2,zero=3,recompute=full",
      "pp=4,dp=2,first_stage_layers=1,last_stage_layers=3",
      "pp=2,tp=2,dp=2,schedule=zb_h1,zero=1,first_stage_layers=5,last_stage_layers=3",
      "pp=4,dp=2,schedule=interleaved,vpp=2,first_stage_layers=1,last_stage_layers=3");
  INFO(plan_text);
  const ModelSpec model = test::TinyLlama(8);
  const ClusterSpec cluster = test::TestCluster(2, 4, 3e11, 2.5e10, 3e-6, 2e-6);
  ParallelPlan plan = ParsePlanString(plan_text);
  const TrainingSpec training = test::Training(16, 256);
  REQUIRE(Validate(plan, model, training, cluster.world_size()).empty());

  const StepGraph graph = BuildStepGraph(model, cluster, training, plan);
  const EventTrace trace = RunEvents(graph);
  REQUIRE(graph.ranks == plan.pp);
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    CHECK(trace.end_s[i] >= trace.start_s[i]);
    for (int32_t k = graph.pred_begin[i]; k < graph.pred_begin[i + 1]; ++k)
      CHECK(trace.start_s[i] >= trace.end_s[graph.preds[k]]);
  }
  for (size_t s = 0; s + 1 < graph.stream_begin.size(); ++s)
    for (int32_t k = graph.stream_begin[s] + 1; k < graph.stream_begin[s + 1]; ++k)
      CHECK(trace.start_s[graph.stream_ops[k]] >= trace.end_s[graph.stream_ops[k - 1]]);

  const SimResult sim = SimulateGraph(graph, {.timeline = false});
  const double m = static_cast<double>(plan.num_microbatches(training.global_batch));
  for (const SimStage& st : sim.stages) {
    const StepTimeBreakdown& t = st.time;
    CHECK(t.compute_s + t.exposed_comm_s.sum() + t.bubble_s + t.optimizer_s ==
          Approx(t.total_s).epsilon(1e-9));
    // A mesh dimension of size 1 sends nothing, so exposes nothing (dp syncs over dp x cp);
    // a single stage never waits on another, a pipelined one does.
    if (plan.tp == 1) CHECK(t.exposed_comm_s[MeshDim::kTp] == 0);
    if (plan.cp == 1) CHECK(t.exposed_comm_s[MeshDim::kCp] == 0);
    if (plan.pp == 1) CHECK(t.exposed_comm_s[MeshDim::kPp] == 0);
    if (plan.dp * plan.cp == 1) CHECK(t.exposed_comm_s[MeshDim::kDp] == 0);
    if (plan.pp == 1) CHECK(t.bubble_s == 0);
    else CHECK(t.bubble_s > 0);
    for (const StreamUse& u : st.streams) CHECK(u.utilisation <= 1 + 1e-12);
  }
  CHECK(sim.time.total_s == Approx(sim.stages[sim.slowest_stage].time.total_s));

  // The graph's compute per stage is the StepWork's: m micro-batches of every part's
  // forward, backward and recompute.
  const StepWork work = BuildStepWork(model, training, plan);
  const ComputeRates rates = RatesFor(cluster.gpu, training.precision);
  auto part_s = [&](const PartWork& p) {
    return TimeOf(p.forward, rates).total() + TimeOf(p.backward_input, rates).total() +
           TimeOf(p.backward_weight, rates).total() +
           TimeOf(RecomputeWork(p, plan.recompute), rates).total();
  };
  for (const SimStage& st : sim.stages) {
    const StageParts parts = PartsOfStage(work, st.stage);
    const double expected = m * (static_cast<double>(parts.blocks) * part_s(work.block) +
                                 (parts.embedding ? part_s(work.embedding) : 0) +
                                 (parts.head ? part_s(work.head) : 0));
    CHECK(st.time.compute_s == Approx(expected).epsilon(1e-9));
    CHECK(st.time.optimizer_s ==
          Approx(TimeOf(OptimizerWork(work, parts), rates).total()).epsilon(1e-9));
  }

  // Bytes sent per stage and dimension match the cost model's CommBytesPerStep.
  std::vector<PerMeshDim> sent(graph.ranks);
  for (const SimOp& op : graph.ops)
    if (!op.is_compute()) sent[op.rank][DimOf(op.stream)] += op.transfer.bytes;
  for (int64_t r = 0; r < graph.ranks; ++r) {
    const PerMeshDim expected = CommBytesPerStep(work, r);
    for (MeshDim d : kAllMeshDims) {
      INFO("stage " << r << " dim " << ToString(d));
      CHECK(sent[r][d] == Approx(expected[d]).epsilon(1e-9).margin(1e-6));
    }
  }
}

TEST_CASE("uneven stages: each simulated rank runs its own blocks, numbered along the pipeline",
          "[simulator][graph][uneven]") {
  const ModelSpec model = test::TinyLlama(10);
  const ClusterSpec cluster = test::FreeNetwork(1, 4);
  const ParallelPlan plan = ParsePlanString("pp=4,first_stage_layers=1,last_stage_layers=3");
  const TrainingSpec training = test::Training(4, 128);
  REQUIRE(Validate(plan, model, training, cluster.world_size()).empty());
  const StepGraph graph = BuildStepGraph(model, cluster, training, plan);
  REQUIRE(graph.ranks == 4);
  // Forward passes of blocks: rank -> the layers it ran.
  std::vector<std::set<int32_t>> layers(4);
  for (const SimOp& op : graph.ops)
    if (op.kind == SimOpKind::kForward && op.part == SimPart::kBlock) layers[op.rank].insert(op.layer);
  const std::vector<std::set<int32_t>> want = {{0}, {1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  CHECK(layers == want);
}

TEST_CASE("interleaved uneven stages: each rank's chunks run their blocks, numbered along the "
          "virtual stages",
          "[simulator][graph][uneven]") {
  const ClusterSpec cluster = test::FreeNetwork(1, 4);
  const TrainingSpec training = test::Training(8, 128);
  // Blocks of each rank's forwards, and the ranks that ran an embedding / head forward.
  auto run = [&](const ModelSpec& model, const ParallelPlan& plan) {
    REQUIRE(Validate(plan, model, training, cluster.world_size()).empty());
    const StepGraph graph = BuildStepGraph(model, cluster, training, plan);
    std::vector<std::set<int32_t>> layers(4);
    std::set<int32_t> embedding, head;
    for (const SimOp& op : graph.ops) {
      if (op.kind != SimOpKind::kForward) continue;
      if (op.part == SimPart::kBlock) layers[op.rank].insert(op.layer);
      if (op.part == SimPart::kEmbedding) embedding.insert(op.rank);
      if (op.part == SimPart::kHead) head.insert(op.rank);
    }
    CHECK(embedding == std::set<int32_t>{0});
    CHECK(head == std::set<int32_t>{3});
    return layers;
  };
  // 14 layers, 3 + 4 + 4 + 3, two chunks of 2 a stage: stage 0's first chunk and stage 3's
  // last give up one each. Virtual stages 0..7 hold [0], [1,2], [3,4], [5,6], [7,8], ...
  const std::vector<std::set<int32_t>> want14 = {{0, 7, 8}, {1, 2, 9, 10}, {3, 4, 11, 12}, {5, 6, 13}};
  CHECK(run(test::TinyLlama(14), ParsePlanString("pp=4,schedule=interleaved,vpp=2,"
                                                 "first_stage_layers=3,last_stage_layers=3")) == want14);
  // 6 layers, 1 + 2 + 2 + 1 in chunks of 1: the first virtual stage holds only the embedding
  // and the last only the head (Llama 3's 405B layout).
  const std::vector<std::set<int32_t>> want6 = {{3}, {0, 4}, {1, 5}, {2}};
  CHECK(run(test::TinyLlama(6), ParsePlanString("pp=4,schedule=interleaved,vpp=2,"
                                                "first_stage_layers=1,last_stage_layers=1")) == want6);
}

TEST_CASE("one simulated rank per pipeline stage, placed at the stage's first rank",
          "[simulator][graph]") {
  const ModelSpec model = test::TinyLlama(8);
  const ClusterSpec cluster = test::FreeNetwork(4, 8);
  const ParallelPlan plan = ParsePlanString("dp=2,tp=2,cp=2,pp=4");
  const StepGraph graph = BuildStepGraph(model, cluster, test::Training(8, 256), plan);
  REQUIRE(graph.ranks == 4);
  CHECK(graph.global_rank == std::vector<int64_t>{0, 4, 8, 12});
}

}  // namespace
}  // namespace meshplan
