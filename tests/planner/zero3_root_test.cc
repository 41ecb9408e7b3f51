// FrameworkSpec::zero3_end_parts root: FSDP's root unit (torchtitan's and plain PyTorch's
// fully_shard(model) / FSDP(model) around the wrapped blocks) gathers the embedding, the final
// norm and the head once as the forward starts, holds them through the backward and
// reduce-scatters their gradients together after it; `groups` (DeepSpeed, meshplan's
// executor) gathers each part before each pass that reads it.
#include <catch2/catch.hpp>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/step_work.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

// A part's DP collectives by what they do: bytes per micro-batch, and how many.
struct DpCalls {
  double forward_gather = 0, backward_gather = 0, reduce_scatter = 0;
  int count = 0;
};

DpCalls DpOf(const PartWork& part) {
  DpCalls calls;
  for (const Collective& c : part.collectives) {
    if (c.dim != MeshDim::kDp) continue;
    ++calls.count;
    if (c.kind == CollectiveKind::kAllGather && c.phase == StepPhase::kForward)
      calls.forward_gather += c.bytes;
    else if (c.kind == CollectiveKind::kAllGather && c.phase == StepPhase::kBackward)
      calls.backward_gather += c.bytes;
    else if (c.kind == CollectiveKind::kReduceScatter)
      calls.reduce_scatter += c.bytes;
  }
  return calls;
}

TrainingSpec Torchtitan(Zero3EndParts end_parts) {
  TrainingSpec t{.global_batch = 16, .seq_len = 4096, .precision = Precision::kMixed,
                 .framework = LoadFramework("torchtitan")};
  t.framework.zero3_end_parts = end_parts;
  return t;
}

TEST_CASE("zero3_end_parts: FSDP's profiles hold a root unit, the others gather each part",
          "[planner][framework]") {
  for (const char* name : {"torchtitan", "torchtitan-2024-04", "pytorch"})
    CHECK(LoadFramework(name).zero3_end_parts == Zero3EndParts::kRoot);
  for (const char* name : {"deepspeed", "meshplan", "megatron-core", "nemo"})
    CHECK(LoadFramework(name).zero3_end_parts == Zero3EndParts::kGroups);
}

TEST_CASE("zero3_end_parts root: one gather as the forward starts, one reduce-scatter after the "
          "backward, none for the backward",
          "[planner][framework]") {
  const ModelSpec model = LoadModel("llama3-8b");
  ParallelPlan plan;
  plan.dp = 8;
  plan.zero_stage = 3;
  const StepWork root = BuildStepWork(model, Torchtitan(Zero3EndParts::kRoot), plan);
  const StepWork groups = BuildStepWork(model, Torchtitan(Zero3EndParts::kGroups), plan);
  const double p = static_cast<double>(groups.param_bytes), g = static_cast<double>(groups.grad_bytes);

  const DpCalls ge = DpOf(groups.embedding), gh = DpOf(groups.head);
  CHECK(gh.count == 3);
  CHECK(gh.forward_gather == Approx(p * static_cast<double>(groups.head.params)));
  CHECK(gh.backward_gather == Approx(p * static_cast<double>(groups.head.params)));
  CHECK(gh.reduce_scatter == Approx(g * static_cast<double>(groups.head.params)));

  const DpCalls re = DpOf(root.embedding), rh = DpOf(root.head);
  CHECK(rh.count == 0);
  CHECK(re.count == 2);
  CHECK(re.backward_gather == 0);
  CHECK(re.forward_gather == Approx(ge.forward_gather + gh.forward_gather));
  CHECK(re.reduce_scatter == Approx(ge.reduce_scatter + gh.reduce_scatter));
  // The blocks are FSDP units of their own either way.
  const DpCalls rb = DpOf(root.block), gb = DpOf(groups.block);
  CHECK(rb.count == gb.count);
  CHECK(rb.backward_gather == Approx(gb.backward_gather));
  // Not gathered for the backward: no copy out of the all-gather buffer there (zero3_buffers
  // copies, 2 x param bytes per parameter).
  CHECK(groups.head.backward_input.memory_bytes - root.head.backward_input.memory_bytes ==
        Approx(2 * p * static_cast<double>(groups.head.params)));

  SECTION("pp = 2: each stage's root holds its end part, gathered once, reduced once") {
    plan.dp = 4;
    plan.pp = 2;
    const StepWork staged = BuildStepWork(model, Torchtitan(Zero3EndParts::kRoot), plan);
    const DpCalls se = DpOf(staged.embedding), sh = DpOf(staged.head);
    CHECK(se.backward_gather == 0);
    CHECK(sh.backward_gather == 0);
    CHECK(sh.forward_gather == Approx(p * static_cast<double>(staged.head.params)));
    CHECK(sh.reduce_scatter == Approx(g * static_cast<double>(staged.head.params)));
  }
  SECTION("ZeRO-1 keeps its gradient reduce-scatter and parameter all-gather per part") {
    plan.zero_stage = 1;
    const DpCalls r1 = DpOf(BuildStepWork(model, Torchtitan(Zero3EndParts::kRoot), plan).head);
    const DpCalls g1 = DpOf(BuildStepWork(model, Torchtitan(Zero3EndParts::kGroups), plan).head);
    CHECK(r1.count == g1.count);
    CHECK(r1.reduce_scatter == Approx(g1.reduce_scatter));
  }
}

TEST_CASE("zero3_end_parts root: the embedding and the head stay gathered through the backward, "
          "the head's gradient in the parameters' dtype",
          "[planner][framework][memory]") {
  const ModelSpec model = LoadModel("llama3-8b");
  const ClusterSpec cluster = LoadCluster("8xH100");
  ParallelPlan plan;
  plan.dp = 8;
  plan.zero_stage = 3;
  const PlanCost root = Estimate(model, cluster, Torchtitan(Zero3EndParts::kRoot), plan);
  const PlanCost groups = Estimate(model, cluster, Torchtitan(Zero3EndParts::kGroups), plan);
  REQUIRE(root.memory.peak_phase == "head_backward");
  REQUIRE(groups.memory.peak_phase == "head_backward");
  // As the head's backward runs: the embedding gathered beside the head (bf16, 2 bytes), and
  // the head's gradient as autograd writes it (bf16) instead of the reduce dtype (fp32).
  const StepWork work = BuildStepWork(model, Torchtitan(Zero3EndParts::kRoot), plan);
  const double embedding = static_cast<double>(work.embedding.params);
  const double head = static_cast<double>(work.head.params);
  CHECK(root.memory.gathered_params_bytes - groups.memory.gathered_params_bytes ==
        Approx(2 * embedding));
  CHECK(groups.memory.comm_buffer_bytes - root.memory.comm_buffer_bytes ==
        Approx((4 - 2) * head));
}

}  // namespace
}  // namespace meshplan
