// Offload and overlap choices in the cost model (planner/cost/offload.h, step_time.h,
// memory_detailed.cc): plan keys and rules, what moves to the host, what the copies, the
// CPU optimizer step and the TP overlap slowdown cost, and the host-memory limit.
// Expected values are derived here from the definitions (bytes per parameter, link rates),
// not copied from the implementation's output.
#include <catch2/catch.hpp>

#include <algorithm>

#include "planner/cost/activation_memory.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/offload.h"
#include "planner/cost/param_count.h"
#include "planner/input_error.h"
#include "planner/names.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using Catch::Matchers::WithinRel;
using testing::H100Cluster;
using testing::SpecLlama;
using testing::Training;

// H100 nodes with a host side: 2 TB, a PCIe Gen5-like link, a CPU AdamW rate.
ClusterSpec HostCluster(int64_t nodes, double link_Bps = 50e9, double optimizer_Bps = 16e9) {
  ClusterSpec c = H100Cluster(nodes);
  c.host.memory_bytes_per_node = 2'000'000'000'000;
  c.host.link = {"pcie", link_Bps, 10e-6, 1.0};
  c.host.optimizer_Bps = optimizer_Bps;
  return c;
}

ParallelPlan Plan(const std::string& text) { return ParsePlanString(text, "test"); }

// offload_opt's update workspace on the host, held once: the largest group's shard (a block
// or the vocabulary-wide embedding / head) times AdamW's denominator (state dtype) + mixed's
// fp32 gradient copy.
double HostWorkspace(const ModelSpec& model, Precision precision, int64_t shards) {
  const double largest = std::max(static_cast<double>(BlockParams(model)),
                                  static_cast<double>(PaddedVocab(model, 1) * model.hidden));
  return largest / static_cast<double>(shards) *
         (BytesPerParamFor(precision).state + (precision == Precision::kMixed ? 4.0 : 0.0));
}

TEST_CASE("the offload and overlap keys round-trip through plan strings", "[planner][offload]") {
  const ParallelPlan p =
      Plan("dp=8,zero=3,offload_opt=1,offload_act=1,offload_params=1,dp_overlap=0,prefetch=2");
  CHECK(p.offload_optimizer);
  CHECK(p.offload_activations);
  CHECK(p.offload_params);
  CHECK_FALSE(p.dp_comm_overlap);
  CHECK(p.zero3_prefetch == 2);
  CHECK(ParsePlanString(ToPlanString(p)) == p);
  CHECK(ParsePlanString(ToShortPlanString(p)) == p);
  // Defaults are not written.
  CHECK(ToPlanString(Plan("dp=8")).find("offload") == std::string::npos);
  CHECK(ToShortPlanString(Plan("dp=8,prefetch=1,dp_overlap=1")) == "dp=8");
  CHECK_THROWS_AS(Plan("prefetch=9"), InputError);
  CHECK_THROWS_AS(Plan("offload_opt=maybe"), InputError);
}

TEST_CASE("offload rules name their constraint", "[planner][offload]") {
  const ModelSpec model = SpecLlama(1024, 16, 8, 4096);
  const TrainingSpec training = Training(64, 1024);
  auto ids = [&](const std::string& plan) {
    std::vector<std::string> out;
    for (const PlanViolation& v : Validate(Plan(plan), model, training, 8)) out.push_back(v.constraint);
    return out;
  };
  CHECK(ids("dp=8,zero=1,offload_opt=1,offload_params=1") ==
        std::vector<std::string>{"offload_params_needs_zero3"});
  CHECK(ids("dp=8,zero=3,offload_params=1") ==
        std::vector<std::string>{"offload_params_needs_offload_opt"});
  CHECK(ids("dp=8,prefetch=-1") == std::vector<std::string>{"prefetch_range"});
  CHECK(ids("dp=8,zero=3,offload_opt=1,offload_params=1,offload_act=1").empty());
}

TEST_CASE("offload_opt moves the optimizer states and the gradient shard to the host",
          "[planner][offload][memory]") {
  const ModelSpec model = SpecLlama(2048, 16, 8, 8192);
  const TrainingSpec training = Training(64, 2048);
  const ClusterSpec cluster = HostCluster(1);
  const PlanCost base = Estimate(model, cluster, training, Plan("dp=8,zero=1"));
  const PlanCost off = Estimate(model, cluster, training, Plan("dp=8,zero=1,offload_opt=1"));
  REQUIRE(base.memory.peak_phase != "optimizer");
  CHECK(off.memory.optimizer_bytes == 0);
  CHECK_THAT(off.memory.total_bytes,
             WithinRel(base.memory.total_bytes - base.memory.optimizer_bytes, 1e-12));
  // Mixed precision: 12 bytes of fp32 state and 2 of bf16 gradient per parameter of the
  // shard, and the update's workspace.
  const double shard = static_cast<double>(CountParams(model)) / 8;
  CHECK_THAT(off.memory.host_optimizer_bytes,
             WithinRel(14 * shard + HostWorkspace(model, Precision::kMixed, 8), 1e-3));
  CHECK_THAT(off.host_bytes_per_node, WithinRel(8 * off.memory.host_total_bytes(), 1e-12));
  CHECK(off.fits_host);
}

// Without an fp32 master (fp32, bf16) the host keeps a copy of the shard's parameters for
// AdamW to update, as the executor's ZeroEngine does: fp32 4 + 8 + 4 (gradient) = 16 bytes,
// bf16 2 + 4 + 2 = 8; the CPU step reads and writes 12 and 6 of them.
TEST_CASE("offload_opt keeps a parameter copy on the host where there is no fp32 master",
          "[planner][offload][memory]") {
  const ModelSpec model = SpecLlama(2048, 16, 8, 8192);
  const double optimizer_Bps = 5e9;
  const ClusterSpec cluster = HostCluster(1, 50e9, optimizer_Bps);
  const double shard = static_cast<double>(CountParams(model)) / 8;
  struct Case { Precision precision; double host, updated; };
  for (const Case& c : {Case{Precision::kFp32, 16, 12}, Case{Precision::kBf16, 8, 6},
                        Case{Precision::kMixed, 14, 12}}) {
    TrainingSpec training = Training(64, 2048);
    training.precision = c.precision;
    const PlanCost off = Estimate(model, cluster, training, Plan("dp=8,zero=1,offload_opt=1"));
    INFO(ToString(c.precision));
    CHECK_THAT(off.memory.host_optimizer_bytes,
               WithinRel(c.host * shard + HostWorkspace(model, c.precision, 8), 1e-3));
    CHECK_THAT(off.time.optimizer_s, WithinRel(c.updated * shard / optimizer_Bps, 1e-3));
    CHECK(HostOptimizerBytesPerParam(BytesPerParamFor(c.precision)) == c.host);
    CHECK(HostUpdatedBytesPerParam(BytesPerParamFor(c.precision)) == c.updated);
  }
}

TEST_CASE("offload_opt runs AdamW on the CPU and copies the shard out and in",
          "[planner][offload][time]") {
  const ModelSpec model = SpecLlama(2048, 16, 8, 8192);
  const TrainingSpec training = Training(64, 2048);
  const double optimizer_Bps = 5e9, link_Bps = 20e9;
  const ClusterSpec cluster = HostCluster(1, link_Bps, optimizer_Bps);
  const PlanCost off = Estimate(model, cluster, training, Plan("dp=8,zero=1,offload_opt=1"));
  const double shard = static_cast<double>(CountParams(model)) / 8;
  // The CPU step: 12 bytes of state per parameter at the host's rate.
  CHECK_THAT(off.time.optimizer_s, WithinRel(12 * shard / optimizer_Bps, 1e-3));
  // The updated bf16 parameters come back exposed (2 bytes each, plus the copy latency);
  // the gradient shard going out may hide behind the last backward.
  const double params_in = 10e-6 + 2 * shard / link_Bps;
  CHECK(off.time.offload_s >= params_in * (1 - 1e-9));
  CHECK(off.time.offload_s <= params_in + 10e-6 + 2 * shard / link_Bps);
}

TEST_CASE("offload_act keeps two blocks on the GPU and hides its copies behind compute",
          "[planner][offload][memory][time]") {
  const ModelSpec model = SpecLlama(2048, 16, 8, 8192);
  const TrainingSpec training = Training(64, 2048);
  const ParallelPlan plan = Plan("dp=8,mbs=2,offload_act=1");
  const ClusterSpec fast = HostCluster(1, 1e15);
  const PlanCost base = Estimate(model, fast, training, Plan("dp=8,mbs=2"));
  const PlanCost off = Estimate(model, fast, training, plan);
  // One micro-batch in flight (pp = 1): L blocks' saved tensors, of which L - 2 go out.
  const RankShape shape = MakeRankShape(model, training, plan);
  const double block = BlockSavedTensors(model, shape, AttentionImpl::kFused, Recompute::kNone).TotalBytes();
  CHECK_THAT(off.memory.host_activations_bytes, WithinRel(double(model.layers - 2) * block, 1e-9));
  CHECK_THAT(base.memory.activations_bytes - off.memory.activations_bytes,
             WithinRel(double(model.layers - 2) * block, 1e-9));
  // A link fast enough hides every copy; a slow one shows (copy - compute) per pass.
  CHECK(off.time.offload_s == 0);
  CHECK_THAT(off.time.total_s, WithinRel(base.time.total_s, 1e-12));
  const PlanCost slow = Estimate(model, HostCluster(1, 1e8), training, plan);
  CHECK(slow.time.offload_s > 0);
  CHECK(slow.time.total_s > base.time.total_s);
}

TEST_CASE("offload_params moves the ZeRO-3 shard to the host and slows its gathers",
          "[planner][offload]") {
  const ModelSpec model = SpecLlama(2048, 16, 8, 8192);
  const TrainingSpec training = Training(64, 2048);
  const ClusterSpec cluster = HostCluster(1, 1e9);
  const PlanCost opt = Estimate(model, cluster, training, Plan("dp=8,zero=3,offload_opt=1"));
  const PlanCost params =
      Estimate(model, cluster, training, Plan("dp=8,zero=3,offload_opt=1,offload_params=1"));
  const double shard = static_cast<double>(CountParams(model)) / 8;
  CHECK_THAT(params.memory.host_params_bytes, WithinRel(2 * shard, 1e-3));
  CHECK_THAT(opt.memory.total_bytes - params.memory.total_bytes,
             WithinRel(params.memory.host_params_bytes, 1e-9));
  CHECK(params.time.exposed_comm_s[MeshDim::kDp] > opt.time.exposed_comm_s[MeshDim::kDp]);
}

TEST_CASE("the node's host memory limits offload", "[planner][offload][memory]") {
  const ModelSpec model = SpecLlama(2048, 16, 8, 8192);
  const TrainingSpec training = Training(64, 2048);
  ClusterSpec small = HostCluster(1);
  small.host.memory_bytes_per_node = 1'000'000'000;  // 1 GB for 8 GPUs
  const PlanCost off = Estimate(model, small, training, Plan("dp=8,zero=1,offload_opt=1"));
  CHECK(off.memory.total_bytes < static_cast<double>(small.gpu.memory_bytes));
  CHECK_FALSE(off.fits_host);
  CHECK_FALSE(off.fits);
  CHECK(off.reason.rfind(kHostMemoryExceeded, 0) == 0);
}

TEST_CASE("offload on a cluster without host data names the missing field",
          "[planner][offload][input]") {
  ClusterSpec c = H100Cluster(1);
  CHECK(MissingHostField(c, Plan("dp=8")).empty());
  CHECK(MissingHostField(c, Plan("dp=8,offload_act=1")) == "host.memory_GB_per_node");
  c.host.memory_bytes_per_node = 1'000'000'000'000;
  CHECK(MissingHostField(c, Plan("dp=8,offload_act=1")) == "host.link.bandwidth_GBps");
  c.host.link.bandwidth_Bps = 50e9;
  CHECK(MissingHostField(c, Plan("dp=8,offload_act=1")).empty());
  CHECK(MissingHostField(c, Plan("dp=8,offload_opt=1")) == "host.optimizer_GBps");
  try {
    RequireHostData(c, Plan("dp=8,offload_opt=1"), {"clusters/x.yaml"});
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.field() == "host.optimizer_GBps");
    CHECK_THAT(std::string(e.what()), Catch::Contains("clusters/x.yaml"));
  }
}

TEST_CASE("TP overlap hides TP time but slows the GEMMs it overlaps", "[planner][overlap]") {
  const ModelSpec model = SpecLlama(4096, 32, 4, 16384);
  const TrainingSpec training = Training(8, 4096);
  const ParallelPlan off = Plan("tp=8"), on = Plan("tp=8,tp_overlap=1");
  ClusterSpec c = H100Cluster(1);
  c.gpu.comm_overlap_slowdown = 0;  // free overlap: never slower, TP mostly hidden
  const PlanCost free_off = Estimate(model, c, training, off), free_on = Estimate(model, c, training, on);
  CHECK(free_on.time.total_s <= free_off.time.total_s);
  CHECK(free_on.time.overlap_slowdown_s == 0);
  // A slowdown s stretches every pass that carries TP communication by s: here every
  // block pass and the embedding forward, so about s * compute.
  c.gpu.comm_overlap_slowdown = 0.5;
  const PlanCost slow_on = Estimate(model, c, training, on);
  CHECK_THAT(slow_on.time.overlap_slowdown_s, WithinRel(0.5 * slow_on.time.compute_s, 0.1));
  // Over fast NVLink the TP time is smaller than half the compute: overlapping loses.
  CHECK(free_off.time.exposed_comm_s[MeshDim::kTp] < 0.5 * free_off.time.compute_s);
  CHECK(slow_on.time.total_s > free_off.time.total_s);
}

TEST_CASE("ZeRO-3 prefetch depth trades gathered blocks for exposed gathers",
          "[planner][overlap][memory]") {
  const ModelSpec model = SpecLlama(2048, 16, 8, 8192);
  const TrainingSpec training = Training(64, 2048);
  const ClusterSpec c = H100Cluster(4);
  const PlanCost p0 = Estimate(model, c, training, Plan("dp=32,zero=3,prefetch=0"));
  const PlanCost p1 = Estimate(model, c, training, Plan("dp=32,zero=3"));
  const PlanCost p2 = Estimate(model, c, training, Plan("dp=32,zero=3,prefetch=2"));
  // One gathered bf16 block (padded over 32 ranks) per depth.
  const double block = 2 * static_cast<double>(BlockParamsPerTpRank(model, 1));
  CHECK_THAT(p1.memory.gathered_params_bytes - p0.memory.gathered_params_bytes, WithinRel(block, 1e-3));
  CHECK_THAT(p2.memory.gathered_params_bytes - p1.memory.gathered_params_bytes, WithinRel(block, 1e-3));
  CHECK(p0.time.exposed_comm_s[MeshDim::kDp] > p1.time.exposed_comm_s[MeshDim::kDp]);
  CHECK(p2.time.total_s == p1.time.total_s);
  // dp_overlap=0: the gradient sync after the backward, never faster.
  const PlanCost serial = Estimate(model, c, training, Plan("dp=32,zero=3,dp_overlap=0"));
  CHECK(serial.time.exposed_comm_s[MeshDim::kDp] > p1.time.exposed_comm_s[MeshDim::kDp]);
}

}  // namespace
}  // namespace meshplan
