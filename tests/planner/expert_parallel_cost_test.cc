// Expert parallelism in the cost model: routed-expert states per rank split by ep, ZeRO
// sharding of expert states over dp/ep, the all-to-all bytes and their network tier, the
// load imbalance, and a dense model's search grid left unchanged.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "planner/config/config_loader.h"
#include "planner/cost/collective_time.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/expert_parallel.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"
#include "planner/cost/step_work.h"
#include "planner/input_error.h"
#include "planner/search/plan_space.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::H100Cluster;
using testing::Training;

ParallelPlan Plan(const std::string& text) { return ParsePlanString(text); }

// Mixtral 8x7B: X = 8 experts of Fe = 14336, E = 4096, 32 MoE layers, top-2.
const ModelSpec& Mixtral() {
  static const ModelSpec m = LoadModel("mixtral-8x7b");
  return m;
}

TEST_CASE("routed expert parameters per rank halve when ep doubles", "[planner][moe][ep]") {
  const ModelSpec& m = Mixtral();
  const int64_t one_expert = 3LL * 4096 * 14336;  // gate, up, down
  int64_t previous = 0, rest = -1;
  for (int64_t ep : {1, 2, 4, 8}) {
    ParallelPlan p = Plan("dp=8,tp=8");
    p.ep = ep;
    const StageParams s = CountStageParams(m, p, 0);
    CAPTURE(ep);
    // 32 layers x X/ep experts, each tp-sharded by 8.
    CHECK(s.routed_experts == 32 * (8 / ep) * one_expert / 8);
    if (previous > 0) CHECK(2 * s.routed_experts == previous);
    previous = s.routed_experts;
    // Everything else on the rank stays.
    if (rest < 0) rest = s.total() - s.routed_experts;
    CHECK(s.total() - s.routed_experts == rest);
  }
}

TEST_CASE("expert parameters and gradients halve with ep, ZeRO shards expert states over dp/ep",
          "[planner][moe][ep][memory]") {
  const ModelSpec& m = Mixtral();
  const TrainingSpec t = Training(64, 4096);
  auto seed = [&](const std::string& text) {
    return EstimateMemory(m, t, Plan(text), MemoryModel::kSeed);
  };
  // ZeRO-1 (optimizer states sharded): a rank holds X/ep experts' states, sharded over the
  // dp/ep ranks that hold the same experts, so its expert optimizer bytes are X/dp experts'
  // whatever ep is; its weights and gradients (not sharded) shrink with ep.
  const ParallelPlan p1 = Plan("dp=8,tp=8,zero=1");
  const double routed1 = double(CountStageParams(m, p1, 0).routed_experts);
  const double dense = double(CountStageParams(m, p1, 0).total()) - routed1;
  for (int64_t ep : {1, 2, 4, 8}) {
    CAPTURE(ep);
    const MemoryBreakdown b = seed("dp=8,tp=8,zero=1,ep=" + std::to_string(ep));
    // mixed precision: 2 + 2 bytes of weight and gradient, 12 of optimizer per parameter.
    CHECK(b.params_bytes == Approx(2 * (dense + routed1 / double(ep))).epsilon(1e-12));
    CHECK(b.grads_bytes == Approx(2 * (dense + routed1 / double(ep))).epsilon(1e-12));
    CHECK(b.optimizer_bytes ==
          Approx(12 * (dense / 8 + routed1 / double(ep) / double(8 / ep))).epsilon(1e-12));
  }
  // ZeRO-3 over dp=8 with ep=8: the experts have no replica to shard over (dp/ep = 1).
  const MemoryBreakdown z3 = seed("dp=8,tp=8,zero=3,ep=8");
  CHECK(z3.params_bytes == Approx(2 * (dense / 8 + routed1 / 8)).epsilon(1e-12));
  const MemoryBreakdown z3_ep2 = seed("dp=8,tp=8,zero=3,ep=2");
  CHECK(z3_ep2.params_bytes == Approx(2 * (dense / 8 + routed1 / 2 / 4)).epsilon(1e-12));

  // The detailed model agrees in direction: doubling ep lowers the model states without
  // ZeRO, and by the experts' share.
  const MemoryBreakdown d1 = EstimateMemory(m, t, Plan("dp=8,tp=8,ep=1"), MemoryModel::kDetailed);
  const MemoryBreakdown d2 = EstimateMemory(m, t, Plan("dp=8,tp=8,ep=2"), MemoryModel::kDetailed);
  CHECK(d1.params_bytes - d2.params_bytes == Approx(2 * routed1 / 2).epsilon(1e-3));
  CHECK(d1.optimizer_bytes - d2.optimizer_bytes == Approx(12 * routed1 / 2).epsilon(1e-3));
}

TEST_CASE("dropless routing: the busiest ep rank's rows set activations and expert time",
          "[planner][moe][ep][memory]") {
  ModelSpec m = Mixtral();
  const TrainingSpec t = Training(64, 4096);
  const ParallelPlan ep8 = Plan("dp=8,tp=8,ep=8");
  // u = 1 with ep = 1, the configured imbalance with ep > 1, 1 with a capacity factor.
  CHECK(LoadImbalance(m, Plan("dp=8,tp=8")) == 1.0);
  CHECK(LoadImbalance(m, ep8) == kDefaultLoadImbalance);
  const double T = 4096;  // one sequence per micro-batch, cp = 1
  const ExpertParallelWork w = ExpertParallelOf(m, ep8, T, 2);
  CHECK(w.local_experts == 1);
  CHECK(w.rows_computed == Approx(T * 2 * kDefaultLoadImbalance));
  CHECK(w.rows_dispatched == Approx(T * 2 / 8));

  m.moe.load_imbalance = 1.0;
  const MemoryBreakdown even = EstimateMemory(m, t, ep8, MemoryModel::kDetailed);
  const double even_s = Estimate(m, H100Cluster(8), t, ep8).time.compute_s;
  m.moe.load_imbalance = 2.0;
  const MemoryBreakdown skewed = EstimateMemory(m, t, ep8, MemoryModel::kDetailed);
  const double skewed_s = Estimate(m, H100Cluster(8), t, ep8).time.compute_s;
  CHECK(skewed.activations_bytes > even.activations_bytes);
  CHECK(skewed_s > even_s);
  // A capacity factor pads every expert to the same rows: no imbalance term.
  m.moe.capacity_factor = 1.25;
  CHECK(LoadImbalance(m, ep8) == 1.0);
}

int Count(const PartWork& part, CollectiveKind kind, StepPhase phase) {
  int n = 0;
  for (const Collective& c : part.collectives)
    if (c.kind == kind && c.phase == phase) n += c.count;
  return n;
}

TEST_CASE("all-to-all: 4 per MoE block, bytes = rows dispatched x E x a", "[planner][moe][ep][comm]") {
  const ModelSpec& m = Mixtral();
  const TrainingSpec t = Training(64, 4096);
  const StepWork w = BuildStepWork(m, t, Plan("dp=8,tp=2,ep=4,mbs=2"));
  CHECK(Count(w.block, CollectiveKind::kAllToAll, StepPhase::kForward) == 2);
  CHECK(Count(w.block, CollectiveKind::kAllToAll, StepPhase::kBackward) == 2);
  CHECK(Count(w.block, CollectiveKind::kAllToAll, StepPhase::kRecompute) == 0);
  // B*S tokens, top-2, split over tp = 2, E = 4096 bf16 (mixed) elements a row.
  const double bytes = 2.0 * 4096 * 2 / 2 * 4096 * 2;
  for (const Collective& c : w.block.collectives)
    if (c.kind == CollectiveKind::kAllToAll) {
      CHECK(c.bytes == Approx(bytes));
      CHECK(c.dim == MeshDim::kEp);
      CHECK(c.group.size() == 4);
      CHECK_FALSE(c.overlappable);
    }
  // Full recompute replays the forward pair.
  const StepWork full = BuildStepWork(m, t, Plan("dp=8,tp=2,ep=4,recompute=full"));
  CHECK(Count(full.block, CollectiveKind::kAllToAll, StepPhase::kRecompute) == 2);
  // ep = 1: no exchange at all.
  const StepWork none = BuildStepWork(m, t, Plan("dp=8,tp=2"));
  CHECK(Count(none.block, CollectiveKind::kAllToAll, StepPhase::kForward) == 0);
  // Per step, ep bytes sent per rank: 4 exchanges x (n-1)/n of the buffer, per block and
  // micro-batch.
  const StepWork one = BuildStepWork(m, t, Plan("dp=8,tp=2,ep=4"));
  const double buffer = 4096.0 * 2 / 2 * 4096 * 2;
  CHECK(CommBytesPerStep(one, 0)[MeshDim::kEp] ==
        Approx(32 * one.micro_batches * 4 * 0.75 * buffer));
}

TEST_CASE("expert gradients sync over dp/ep, the rest over dp", "[planner][moe][ep][comm]") {
  const ModelSpec& m = Mixtral();
  const StepWork w = BuildStepWork(m, Training(64, 4096), Plan("dp=8,tp=8,ep=2"));
  const int64_t routed = RoutedExpertParamsPerRank(m, 8, 2);
  bool dense_seen = false, expert_seen = false;
  for (const Collective& c : w.block.collectives) {
    if (c.dim != MeshDim::kDp) continue;
    if (c.group.size() == 8) {
      dense_seen = true;
      CHECK(c.bytes == Approx(double(w.block.params - routed) * 2));
    } else {
      expert_seen = true;
      CHECK(c.group.size() == 4);
      CHECK(c.bytes == Approx(double(routed) * 2));
    }
  }
  CHECK(dense_seen);
  CHECK(expert_seen);
}

TEST_CASE("all-to-all cost: nccl-tests bus bandwidth, slower across nodes",
          "[planner][moe][ep][comm]") {
  const ClusterSpec c = H100Cluster(2);  // 2 nodes of 8: NVLink 450e9 / 3 us, IB 50e9 / 6 us
  const double bytes = 64e6;
  CommGroup in_node;
  in_node.inner = {1, 8};
  CommGroup across;
  across.inner = {8, 2};  // one member per node
  CommGroup spread;
  spread.inner = {2, 8};  // 4 per node on 2 nodes
  // (n-1)/n of the buffer at the bus bandwidth, one latency step.
  CHECK(CollectiveTime(CollectiveKind::kAllToAll, bytes, in_node, c) ==
        Approx(3e-6 + 7.0 / 8 * bytes / 450e9));
  CHECK(CollectiveTime(CollectiveKind::kAllToAll, bytes, across, c) ==
        Approx(6e-6 + 1.0 / 2 * bytes / 50e9));
  // 4 per node: 3/8 of the buffer inside the node, 4/8 across, at once.
  CHECK(CollectiveTime(CollectiveKind::kAllToAll, bytes, spread, c) ==
        Approx(6e-6 + std::max(3.0 / 8 * bytes / 450e9, 4.0 / 8 * bytes / 50e9)));
  CHECK(CollectiveTime(CollectiveKind::kAllToAll, bytes, spread, c) >
        CollectiveTime(CollectiveKind::kAllToAll, bytes, in_node, c));
  CHECK(CollectiveCostOf(CollectiveKind::kAllToAll, bytes, spread, c).inter_node);
  CHECK_FALSE(CollectiveCostOf(CollectiveKind::kAllToAll, bytes, in_node, c).inter_node);
  CHECK(BytesSentPerRank(CollectiveKind::kAllToAll, bytes, 8) == Approx(7.0 / 8 * bytes));

  // The plan's ep group: ep consecutive dp ranks, spaced tp*cp*pp apart. tp=1, dp=16 on
  // 2 x 8: ep=8 stays in a node; tp=2, ep=8 spans two nodes and exposes more time.
  const ModelSpec& m = Mixtral();
  const TrainingSpec t = Training(64, 4096);
  CHECK(StaysInNode(MeshGroup(Plan("dp=16,ep=8"), MeshDim::kEp), 8));
  CHECK_FALSE(StaysInNode(MeshGroup(Plan("dp=8,tp=2,ep=8"), MeshDim::kEp), 8));
  const PlanCost inside = Estimate(m, c, t, Plan("dp=8,tp=2,ep=4,zero=3"));
  const PlanCost spans = Estimate(m, c, t, Plan("dp=8,tp=2,ep=8,zero=3"));
  CHECK(inside.time.exposed_comm_s[MeshDim::kEp] > 0);
  CHECK(spans.time.exposed_comm_s[MeshDim::kEp] > inside.time.exposed_comm_s[MeshDim::kEp]);
}

TEST_CASE("the search adds ep for MoE models only", "[planner][moe][ep][search]") {
  const ClusterSpec c = H100Cluster(8);
  const TrainingSpec t = Training(512, 4096);
  PlanSpaceOptions pinned;
  pinned.pins.Pin(PlanField::kEp, 1);
  // A dense model: the same grid with or without the ep=1 pin, every mesh at ep = 1.
  const ModelSpec dense = testing::Spec7b();
  const PlanSpace dense_space(dense, t, c, {});
  CHECK(dense_space.size() == PlanSpace(dense, t, c, pinned).size());
  for (int64_t i = 0; i < dense_space.num_meshes(); ++i) CHECK(dense_space.mesh(i).ep == 1);
  // Mixtral: each mesh also at every ep dividing dp and the 8 experts.
  const ModelSpec& m = Mixtral();
  const PlanSpace moe_space(m, t, c, {});
  CHECK(moe_space.size() > PlanSpace(m, t, c, pinned).size());
  bool saw_ep8 = false;
  for (int64_t i = 0; i < moe_space.num_meshes(); ++i) {
    const MeshShape& mesh = moe_space.mesh(i);
    CHECK(mesh.dp % mesh.ep == 0);
    CHECK(8 % mesh.ep == 0);
    saw_ep8 = saw_ep8 || mesh.ep == 8;
  }
  CHECK(saw_ep8);
  CHECK(moe_space.OrdinalOf(Plan("dp=64,ep=8")).has_value());
  CHECK_FALSE(moe_space.OrdinalOf(Plan("dp=64,ep=16")).has_value());
  CHECK(ParsePlanPins("ep=4")[PlanField::kEp] == 4);
  CHECK(ParsePlanPins("ep=4").ToString() == "ep=4");
}

// A model YAML with `extra` under moe:, loaded from a temporary file.
ModelSpec LoadMoeYaml(const std::string& extra) {
  const auto path = std::filesystem::temp_directory_path() / "meshplan_ep_cost_test.yaml";
  std::ofstream(path) << "name: m\nblock: llama\nvocab_size: 1000\nhidden: 256\nlayers: 2\n"
                         "heads: 8\nkv_heads: 8\nffn_hidden: 512\nmoe:\n  experts: 8\n"
                         "  top_k: 2\n  expert_ffn_hidden: 512\n" + extra;
  struct Remove {
    std::filesystem::path p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{path};
  return LoadModel(path.string());
}

TEST_CASE("moe.load_imbalance: YAML key, default, range", "[planner][moe][ep][config]") {
  CHECK(LoadMoeYaml("").moe.load_imbalance == kDefaultLoadImbalance);
  CHECK(LoadMoeYaml("  load_imbalance: 1.5\n").moe.load_imbalance == 1.5);
  try {
    LoadMoeYaml("  load_imbalance: 0.5\n");
    FAIL("load_imbalance 0.5 loaded");
  } catch (const InputError& e) {
    CHECK(e.field() == "moe.load_imbalance");
  }
  // Applied capped at ep: the busiest rank cannot take more than its group's rows.
  ModelSpec m = LoadMoeYaml("  load_imbalance: 5\n");
  CHECK(LoadImbalance(m, ParsePlanString("dp=4,ep=2")) == 2.0);
  CHECK(LoadImbalance(m, ParsePlanString("dp=8,ep=8")) == 5.0);
}

}  // namespace
}  // namespace meshplan
