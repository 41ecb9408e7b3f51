// Optimizer offload (the plan's offload_opt; executor/parallel/zero_engine.h): on CPU ranks
// (host == device) the offload path runs the same AdamW on the host copies, so a plan with
// offload_opt must train exactly like the same plan without it, for every ZeRO stage and
// precision; and what it keeps on the host is what the planner counts
// (planner/cost/offload.h HostOptimizerBytesPerParam).
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <algorithm>
#include <string>
#include <vector>

#include "executor/comm/single_rank_communicator.h"
#include "executor/model/adamw.h"
#include "executor/model/param_layout.h"
#include "executor/model/precision_dtypes.h"
#include "executor/parallel/zero_engine.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/offload.h"
#include "planner/names.h"
#include "tests/executor/test_training.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

TrainingSpec TrainingIn(Precision precision) { return test::TinyTraining(4, 8, precision); }

// Every rank's losses and final parameters under `plan`.
std::vector<test::Trained> TrainOnMesh(const ModelSpec& model, const TrainingSpec& training,
                                       const ParallelPlan& plan) {
  std::vector<test::Trained> out(static_cast<size_t>(plan.world_size()));
  test::OnMesh(plan, [&](const DeviceMesh& mesh) {
    out[static_cast<size_t>(mesh.world_rank())] = test::TrainSteps(model, training, mesh, 3);
  });
  return out;
}

TEST_CASE("optimizer offload trains exactly like the on-device optimizer",
          "[executor][offload]") {
  const ModelSpec model = test::TinySpec(false, 2);
  struct Case {
    int64_t dp, pp;
    int zero;
  };
  for (const Precision p : {Precision::kFp32, Precision::kMixed, Precision::kBf16})
    for (const Case c : {Case{2, 1, 0}, Case{2, 1, 1}, Case{2, 1, 2}, Case{2, 1, 3},
                         Case{1, 1, 0}, Case{1, 2, 0}}) {
      ParallelPlan plan;
      plan.dp = c.dp;
      plan.pp = c.pp;
      plan.zero_stage = c.zero;
      plan.micro_batch = 4 / c.dp / 2;  // two micro-batches per step
      ParallelPlan offload = plan;
      offload.offload_optimizer = true;
      INFO(ToString(p) << " " << ToPlanString(offload));
      const std::vector<test::Trained> want = TrainOnMesh(model, TrainingIn(p), plan);
      const std::vector<test::Trained> got = TrainOnMesh(model, TrainingIn(p), offload);
      REQUIRE(got.size() == want.size());
      for (size_t r = 0; r < got.size(); ++r) {
        INFO("rank " << r);
        CHECK(got[r].losses == want[r].losses);
        REQUIRE(got[r].params.size() == want[r].params.size());
        for (size_t g = 0; g < got[r].params.size(); ++g) {
          INFO("group " << got[r].layout.groups[g].name);
          CHECK(got[r].params[g].equal(want[r].params[g]));  // bit for bit
        }
      }
    }
}

TEST_CASE("optimizer offload keeps the planner's host bytes, apart from the device's",
          "[executor][offload]") {
  const ModelSpec model = test::TinySpec(false, 2);
  for (const Precision p : {Precision::kFp32, Precision::kMixed, Precision::kBf16}) {
    INFO(ToString(p));
    const ParamLayout layout = BuildParamLayout(model, 1);
    SingleRankCommunicator one;
    ZeroEngine on_device(layout, 0, one, AdamWOptions{}, /*seed=*/7, p);
    ZeroEngine offloaded(layout, 0, one, AdamWOptions{}, /*seed=*/7, p, at::kCPU, nullptr,
                         /*offload_optimizer=*/true);
    CHECK(on_device.host_optimizer_bytes() == 0);
    CHECK_FALSE(on_device.offloads_optimizer());
    CHECK(offloaded.offloads_optimizer());
    // Per parameter, the planner's bytes; once, the largest group's update workspace
    // (AdamW's denominator unless fused, mixed's fp32 gradient copy).
    double padded = 0, largest = 0;
    for (const ParamGroup& g : layout.groups) {
      padded += static_cast<double>(g.padded_numel);
      largest = std::max(largest, static_cast<double>(g.padded_numel));
    }
    const BytesPerParam bytes = BytesPerParamFor(p);
    const double workspace = largest * ((FusedAdamWBuiltIn(at::kCPU) ? 0.0 : bytes.state) +
                                        (p == Precision::kMixed ? 4.0 : 0.0));
    CHECK(static_cast<double>(offloaded.host_optimizer_bytes()) ==
          padded * HostOptimizerBytesPerParam(bytes) + workspace);
    // What AdamW updates: the fp32 master (mixed) or a copy in the params' dtype, apart
    // from the params; m and v in the state dtype.
    const ZeroEngine::OwnedState s = offloaded.Owned(0);
    const PrecisionDtypes dtypes = DtypesFor(p);
    CHECK(s.params.scalar_type() == (dtypes.fp32_master ? at::kFloat : dtypes.compute));
    CHECK(s.m.scalar_type() == dtypes.state);
    CHECK(s.params.data_ptr() != offloaded.FullParamsCopy(0).data_ptr());
    CHECK(s.params.equal(on_device.Owned(0).params));
  }
}

}  // namespace
}  // namespace meshplan
