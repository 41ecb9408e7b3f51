// Estimate(): the analytic cost of a plan, through the same call `meshplan estimate` makes.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>

#include "planner/cost/cost_model.h"
#include "planner/cost/cost_report.h"
#include "planner/cost/flops.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"
#include "planner/cost/step_time.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::H100Cluster;
using testing::Spec7b;
using testing::SpecLlama;
using testing::Training;

ParallelPlan Plan(int64_t dp, int64_t tp = 1, int64_t pp = 1, int64_t cp = 1, int zero = 0) {
  ParallelPlan p;
  p.dp = dp;
  p.tp = tp;
  p.pp = pp;
  p.cp = cp;
  p.zero_stage = zero;
  return p;
}

TEST_CASE("docs/cost_model.md 2(c): DP and ZeRO-1/2 move 2P per GPU per step, ZeRO-3 3P",
          "[planner][cost][spec]") {
  const ModelSpec m = Spec7b();
  const ClusterSpec c = H100Cluster(8);  // 64 GPUs
  const int64_t n = 64;
  const double P = static_cast<double>(CountParams(m));
  const Precision precision = GENERATE(Precision::kBf16, Precision::kMixed);
  const TrainingSpec t = Training(n, 256, precision);  // one micro-batch per rank
  double bytes[4];
  for (int zero = 0; zero <= 3; ++zero) {
    const PlanCost cost = Estimate(m, c, t, Plan(n, 1, 1, 1, zero));
    bytes[zero] = cost.comm_bytes_per_step[MeshDim::kDp];
    // Elements (docs/cost_model.md 2(c)) * ring share (n-1)/n * 2 bytes (bf16 gradients and
    // parameters).
    CHECK(bytes[zero] == Approx(SeedDpCommElements(P, zero) * (n - 1) / n * 2).epsilon(1e-12));
    CHECK(cost.comm_bytes_per_step[MeshDim::kTp] == 0);
  }
  CHECK(bytes[0] == Approx(2 * P * 63 / 64 * 2));
  CHECK(bytes[1] == Approx(bytes[0]));
  CHECK(bytes[2] == Approx(bytes[0]));
  CHECK(bytes[3] / bytes[0] == Approx(1.5));
}

TEST_CASE("fp32 training syncs 4-byte gradients", "[planner][cost]") {
  const ModelSpec m = SpecLlama(1024, 8, 16, 1536);
  const double P = static_cast<double>(CountParams(m));
  const PlanCost cost =
      Estimate(m, H100Cluster(1), Training(8, 256, Precision::kFp32), Plan(8), {MemoryModel::kSeed});
  CHECK(cost.comm_bytes_per_step[MeshDim::kDp] == Approx(2 * P * 7 / 8 * 4));
}

TEST_CASE("tokens/s is tokens per step divided by the step time", "[planner][cost]") {
  const ModelSpec m = Spec7b();
  const TrainingSpec t = Training(64, 2048);
  ParallelPlan p = GENERATE(Plan(8, 1, 1, 1, 1), Plan(2, 4, 1, 1, 1), Plan(1, 2, 4, 1, 0),
                            Plan(2, 2, 1, 2, 3));
  const PlanCost cost = Estimate(m, H100Cluster(1), t, p);
  const StepTimeBreakdown& s = cost.time;
  CHECK(s.total_s == Approx(s.compute_s + s.exposed_comm_s.sum() + s.bubble_s + s.optimizer_s));
  CHECK(cost.tokens_per_s == Approx(64.0 * 2048 / s.total_s));
  CHECK(cost.tokens_per_s * s.total_s == Approx(64.0 * 2048));
}

TEST_CASE("bubble fraction is (p-1)/(m+p-1) for gpipe and 1f1b", "[planner][cost][pipeline]") {
  const int64_t p = GENERATE(2, 4, 8);
  const int64_t m = GENERATE(1, 4, 16);
  const double f = 1.0, b = 1.3, w = 0.9;
  for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B}) {
    const double bubble = PipelineBubble(schedule, p, 1, f, b, w);
    CHECK(bubble / (m * (f + b + w) + bubble) == Approx(double(p - 1) / double(m + p - 1)));
  }
  // Interleaving divides the bubble by vpp; ZB-H1 leaves (f + b - w) per stage.
  CHECK(PipelineBubble(PipelineSchedule::kInterleaved, p, 2, f, b, w) ==
        Approx(PipelineBubble(PipelineSchedule::k1F1B, p, 1, f, b, w) / 2));
  CHECK(PipelineBubble(PipelineSchedule::kZeroBubbleH1, p, 1, 1, 1, 1) ==
        Approx(PipelineBubble(PipelineSchedule::k1F1B, p, 1, 1, 1, 1) / 3));
  CHECK(PipelineBubble(PipelineSchedule::k1F1B, 1, 1, f, b, w) == 0);
}

TEST_CASE("Estimate's bubble follows the schedule", "[planner][cost][pipeline]") {
  const ModelSpec m = Spec7b();  // 48 layers
  const TrainingSpec t = Training(8, 2048);
  ParallelPlan p = Plan(1, 1, 4);  // 8 micro-batches, no TP / CP / DP communication
  const PlanCost one_f_one_b = Estimate(m, H100Cluster(1, 4), t, p);
  const StepTimeBreakdown& s = one_f_one_b.time;
  // The last stage, with the head, is the slowest; the fill and drain run through the other
  // three, each lighter: less than (p-1)/(m+p-1) of the step, and more than the three
  // middle-weight stages' blocks alone would leave without the embedding (2/3 of that).
  const double fraction = s.bubble_s / (s.compute_s + s.bubble_s);
  CHECK(fraction < 3.0 / (8 + 3));
  CHECK(fraction > 2.0 / 3 * 3.0 / (8 + 3));

  p.schedule = PipelineSchedule::kInterleaved;
  p.virtual_stages = 2;
  const PlanCost interleaved = Estimate(m, H100Cluster(1, 4), t, p);
  CHECK(interleaved.time.bubble_s == Approx(s.bubble_s / 2));

  p.schedule = PipelineSchedule::kZeroBubbleH1;
  p.virtual_stages = 1;
  const PlanCost zb = Estimate(m, H100Cluster(1, 4), t, p);
  // (pp-1) max(0, f + b - w): a third of 1F1B's when f = b = w; here the backward-input pass
  // launches more kernels than the forward, so somewhat more.
  CHECK(zb.time.bubble_s < s.bubble_s);
  CHECK(zb.time.bubble_s > 0);
  CHECK(zb.tokens_per_s > one_f_one_b.tokens_per_s);
}

TEST_CASE("MFU lies in (0, 1) and HFU counts recompute", "[planner][cost]") {
  const ModelSpec m = Spec7b();
  const TrainingSpec t = Training(64, 4096);
  ParallelPlan p = GENERATE(Plan(8, 1, 1, 1, 1), Plan(2, 4, 1, 1, 1), Plan(1, 2, 4, 1),
                            Plan(1, 8), Plan(2, 1, 1, 4, 2));
  const PlanCost none = Estimate(m, H100Cluster(1), t, p);
  CHECK(none.mfu > 0);
  CHECK(none.mfu < 1);
  CHECK(none.mfu_no_attention < none.mfu);
  CHECK(none.hfu == Approx(none.mfu));
  p.recompute = Recompute::kFull;
  const PlanCost full = Estimate(m, H100Cluster(1), t, p);
  CHECK(full.hfu > full.mfu);
  CHECK(full.hfu < 1);
  CHECK(full.time.recompute_s > 0);
  CHECK(full.time.total_s > none.time.total_s);
  CHECK(full.mfu < none.mfu);
}

TEST_CASE("more GPUs give more tokens/s, but not more than linearly", "[planner][cost]") {
  const ModelSpec m = SpecLlama(2048, 16, 24, 3072);
  const TrainingSpec t = Training(256, 2048);
  const PlanCost eight = Estimate(m, H100Cluster(1), t, Plan(8, 1, 1, 1, 1));
  const PlanCost sixteen = Estimate(m, H100Cluster(2), t, Plan(16, 1, 1, 1, 1));
  const PlanCost sixty_four = Estimate(m, H100Cluster(8), t, Plan(64, 1, 1, 1, 1));
  CHECK(sixteen.tokens_per_s > 1.5 * eight.tokens_per_s);
  CHECK(sixteen.tokens_per_s <= 2 * eight.tokens_per_s * (1 + 1e-9));
  CHECK(sixty_four.tokens_per_s > sixteen.tokens_per_s);
}

TEST_CASE("every field is filled from the shared functions", "[planner][cost]") {
  const ModelSpec m = Spec7b();
  const TrainingSpec t = Training(16, 2048);
  const ParallelPlan p = Plan(2, 2, 2, 1, 1);
  const PlanCost cost = Estimate(m, H100Cluster(1), t, p);
  CHECK(cost.params_total == CountParams(m));
  CHECK(cost.params_per_rank == std::max(CountStageParams(m, p, 0).total(),
                                         CountStageParams(m, p, 1).total()));
  const StepFlops flops = StepFlopsOf(m, t, p);
  CHECK(cost.model_flops_per_step == flops.model);
  CHECK(cost.model_flops_no_attention == flops.model_no_attention);
  CHECK(cost.hardware_flops_per_step == flops.hardware);
  CHECK(cost.memory.total_bytes == EstimateMemory(m, t, p, MemoryModel::kDetailed).total_bytes);
  CHECK(cost.comm_bytes_per_step[MeshDim::kDp] > 0);
  CHECK(cost.comm_bytes_per_step[MeshDim::kTp] > 0);
  CHECK(cost.comm_bytes_per_step[MeshDim::kPp] > 0);
  CHECK(cost.comm_bytes_per_step[MeshDim::kCp] == 0);
  CHECK(cost.time.compute_s > 0);
  CHECK(cost.time.optimizer_s > 0);
  CHECK(cost.time.bubble_s > 0);
  CHECK(cost.fits);
  CHECK(cost.reason.empty());
}

TEST_CASE("a plan that does not fit says by how much", "[planner][cost]") {
  // docs/cost_model.md 2(a): the 7B model in pure bf16 needs ~60 GB and does not fit a 48 GB A40.
  const ModelSpec m = Spec7b();
  ClusterSpec c = H100Cluster(1, 2);
  c.gpu.memory_bytes = 48'305'799'168;  // A40: 46068 MiB
  const TrainingSpec t = Training(2, 256, Precision::kBf16);
  const PlanCost replicated = Estimate(m, c, t, Plan(2), {MemoryModel::kSeed});
  CHECK_FALSE(replicated.fits);
  CHECK(replicated.reason == fmt::format("needs {:.1f} GiB, GPU has 45.0 GiB (headroom 0%)",
                                         replicated.memory.total_bytes / (1024.0 * 1024 * 1024)));
  // Sharding everything over the two cards (ZeRO-3) makes it fit.
  const PlanCost sharded = Estimate(m, c, t, Plan(2, 1, 1, 1, 3), {MemoryModel::kSeed});
  CHECK(sharded.fits);
  CHECK(sharded.reason.empty());
  // Headroom: the same plan no longer fits when 90% must stay free.
  const PlanCost tight = Estimate(m, c, t, Plan(2, 1, 1, 1, 3), {MemoryModel::kSeed, 0.9});
  CHECK_FALSE(tight.fits);
  CHECK(tight.reason.find("headroom 90%") != std::string::npos);
}

TEST_CASE("a plan over the GPU only by the allocator's assumed fragmentation is tight",
          "[planner][cost]") {
  const ModelSpec m = Spec7b();
  ClusterSpec c = H100Cluster(1, 2);
  c.gpu.runtime_memory.allocator_fragmentation = 0.15;
  const TrainingSpec t = Training(2, 2048);
  const ParallelPlan p = Plan(2, 1, 1, 1, 3);
  const PlanCost roomy = Estimate(m, c, t, p);
  REQUIRE(roomy.fits);
  CHECK_FALSE(FitIsTight(roomy));
  const double total = roomy.memory.total_bytes;
  const double overhead = roomy.memory.allocator_overhead_bytes;
  REQUIRE(overhead > 0);
  // A GPU between the tensors' total and the total with the assumed fragmentation: tight, and
  // the reason says how much of the need is that assumption.
  c.gpu.memory_bytes = static_cast<int64_t>(total - overhead / 2);
  const PlanCost tight = Estimate(m, c, t, p);
  REQUIRE(tight.memory.total_bytes == total);  // the memory does not depend on the capacity
  CHECK_FALSE(tight.fits);
  CHECK(FitIsTight(tight));
  CHECK(tight.reason.find(fmt::format("; {:.1f} GiB of it is the allocator's assumed fragmentation",
                                      overhead / (1024.0 * 1024 * 1024))) != std::string::npos);
  PlanFile setup;
  setup.model = m;
  setup.cluster = c;
  setup.training = t;
  setup.plan = p;
  CHECK(FormatCostTable(setup, tight).find("\nfits: tight: needs ") != std::string::npos);
  CHECK(CostToJson(tight)["fit_tight"] == true);
  // Below the tensors' total: no longer tight, and the reason does not blame the allocator.
  c.gpu.memory_bytes = static_cast<int64_t>(total - overhead * 1.01);
  const PlanCost over = Estimate(m, c, t, p);
  CHECK_FALSE(over.fits);
  CHECK_FALSE(FitIsTight(over));
  CHECK(over.reason.find("allocator") == std::string::npos);
  setup.cluster = c;
  CHECK(FormatCostTable(setup, over).find("\nfits: no: needs ") != std::string::npos);
  CHECK(CostToJson(over)["fit_tight"] == false);
}

TEST_CASE("tp inside a node uses NVLink, dp across nodes the inter-node network",
          "[planner][cost][tier]") {
  const ModelSpec m = Spec7b();
  const TrainingSpec t = Training(16, 2048);
  ParallelPlan p = Plan(2, 8, 1, 1, 1);  // tp = 8 fills each node, dp = 2 spans the nodes
  p.sequence_parallel = true;
  ClusterSpec fast = H100Cluster(2);
  ClusterSpec slow = fast;
  slow.inter_node.bandwidth_Bps /= 4;
  const PlanCost a = Estimate(m, fast, t, p);
  const PlanCost b = Estimate(m, slow, t, p);
  CHECK(b.time.exposed_comm_s[MeshDim::kTp] == a.time.exposed_comm_s[MeshDim::kTp]);
  // ZeRO-1's all-gather of the updated parameters after the step is exposed and crosses nodes.
  CHECK(b.time.exposed_comm_s[MeshDim::kDp] > 3 * a.time.exposed_comm_s[MeshDim::kDp]);
}

TEST_CASE("sequence parallel moves 1.25x the TP volume, overlap hides some", "[planner][cost]") {
  const ModelSpec m = Spec7b();
  const TrainingSpec t = Training(16, 4096);
  ParallelPlan p = Plan(2, 4);
  const PlanCost plain = Estimate(m, H100Cluster(1), t, p);
  p.sequence_parallel = true;
  const PlanCost sp = Estimate(m, H100Cluster(1), t, p);
  // Each all-reduce (2 units of ring volume) becomes an all-gather + reduce-scatter (1 + 1),
  // and the backward re-gathers each region's saved sharded input (+1 per region): per block
  // 2 x 2 + 2 x 3 = 10 units instead of 4 x 2 = 8.
  CHECK(sp.comm_bytes_per_step[MeshDim::kTp] ==
        Approx(1.25 * plain.comm_bytes_per_step[MeshDim::kTp]).epsilon(0.01));
  CHECK(plain.time.exposed_comm_s[MeshDim::kTp] > 0);
  p.tp_comm_overlap = true;
  const PlanCost overlapped = Estimate(m, H100Cluster(1), t, p);
  CHECK(overlapped.time.exposed_comm_s[MeshDim::kTp] < sp.time.exposed_comm_s[MeshDim::kTp]);
}

TEST_CASE("CP passes K and V around the ring, and their gradients back", "[planner][cost]") {
  const ModelSpec m = Spec7b();
  const TrainingSpec t = Training(8, 8192);
  const ParallelPlan p = Plan(2, 1, 1, 4);  // 4 micro-batches per dp rank
  const PlanCost cost = Estimate(m, H100Cluster(1), t, p);
  // Per block and micro-batch: K and V of the whole sequence (S, 2*K*D) in bf16, each
  // rank passing (cp-1)/cp of it once forward and twice backward (K, V and dK, dV).
  const double kv = 8192.0 * 2 * 4096 * 2;
  CHECK(cost.comm_bytes_per_step[MeshDim::kCp] == Approx(48 * 4 * 3 * kv * 3 / 4));
  // The ring overlaps the attention core. Forward, per block and micro-batch, the ring takes
  // c = (3/4 kv) / 450 GB/s + 3 steps x 3 us = 0.233 ms; the causal flash kernel of a cp rank
  // executes 4 * (S/cp) * S * E * (1/2 + 128 / (2 * S/cp)) FLOPs at 989.4 TFLOP/s x 0.5
  // (attention efficiency), a = 0.295 ms; its backward 2.5 a (planner/cost/compute_work.h).
  // The backward ring passes twice as much, so the ring is hidden: nothing is exposed.
  const double a = 4.0 * (8192 / 4) * 8192 * 4096 * (0.5 + 0.5 * 128 / 2048) / (989.4e12 * 0.5);
  CHECK(cost.time.exposed_comm_s[MeshDim::kCp] == 0);
  // A 10x slower link (45 GB/s) outlasts it: c - a forward and 2c - 2.5a backward are
  // exposed, per block (48) and micro-batch (4).
  ClusterSpec slow = H100Cluster(1);
  slow.intra_node.bandwidth_Bps = 45e9;
  const double c = kv * 3 / 4 / 45e9 + 3 * 3e-6;  // 2.246 ms
  CHECK(Estimate(m, slow, t, p).time.exposed_comm_s[MeshDim::kCp] ==
        Approx(48 * 4 * ((c - a) + (2 * c - 2.5 * a))));
}

}  // namespace
}  // namespace meshplan
