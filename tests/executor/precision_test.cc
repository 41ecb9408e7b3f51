// bf16 and mixed precision in the executor (executor/model/precision_dtypes.h), on the CPU:
// the dtypes the engine holds, mixed precision's fp32 master, training that follows the
// fp32 run, the same result on 2 ZeRO ranks as on one (bf16 collectives over Gloo), and a
// resumed mixed-precision run that continues the uninterrupted one.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "executor/comm/communicator_factory.h"
#include "executor/comm/single_rank_communicator.h"
#include "executor/model/precision_dtypes.h"
#include "executor/parallel/zero_engine.h"
#include "executor/run_rank.h"
#include "planner/input_error.h"
#include "planner/names.h"
#include "tests/executor/test_training.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

TrainingSpec TrainingIn(Precision precision) { return test::TinyTraining(4, 8, precision); }

TEST_CASE("precision: the engine's dtypes, and mixed precision's fp32 master",
          "[executor][precision]") {
  const ModelSpec model = test::TinySpec(false, 2);
  SingleRankCommunicator one("dp");
  const ParamLayout layout = BuildParamLayout(model, 1);
  for (const Precision p : {Precision::kFp32, Precision::kBf16, Precision::kMixed}) {
    INFO(ToString(p));
    const PrecisionDtypes dtypes = DtypesFor(p);
    ZeroEngine engine(layout, 0, one, AdamWOptions{}, /*seed=*/7, p);
    const ZeroEngine::OwnedState owned = engine.Owned(0);
    CHECK(engine.LeaseParams(0).params().scalar_type() == dtypes.compute);
    CHECK(engine.GradBuffer(0).scalar_type() == dtypes.compute);
    CHECK(owned.m.scalar_type() == dtypes.state);
    CHECK(owned.v.scalar_type() == dtypes.state);
    // Owned().params is what a snapshot saves and AdamW updates: the master under mixed.
    CHECK(owned.params.scalar_type() == (dtypes.fp32_master ? at::kFloat : dtypes.compute));
  }
  CHECK(DtypesFor(Precision::kMixed).compute == at::kBFloat16);
  CHECK(DtypesFor(Precision::kBf16).state == at::kBFloat16);

  // After an update the bf16 params are the fp32 master rounded.
  ZeroEngine engine(layout, 0, one, AdamWOptions{}, /*seed=*/7, Precision::kMixed);
  engine.BeginStep(1);
  for (int g = 0; g < static_cast<int>(layout.groups.size()); ++g) {
    engine.GradBuffer(g).fill_(0.25);
    engine.GradReady(g);
  }
  engine.EndBackward();
  const at::Tensor before = engine.Owned(1).params.clone();
  engine.Step();
  const at::Tensor master = engine.Owned(1).params;
  CHECK_FALSE(at::equal(master, before));
  CHECK(at::equal(engine.LeaseParams(1).params(), master.to(at::kBFloat16)));
}

TEST_CASE("precision: bf16 and mixed training follow the fp32 run", "[executor][precision]") {
  const ModelSpec model = test::TinySpec(false, 2);
  ParallelPlan plan;
  plan.micro_batch = 2;  // 2 micro-batches: gradient accumulation in the compute dtype
  const DeviceMesh one(plan, 0, nullptr);
  const test::Trained fp32 = test::TrainSteps(model, TrainingIn(Precision::kFp32), one, 4);
  const test::Trained mixed = test::TrainSteps(model, TrainingIn(Precision::kMixed), one, 4);
  const test::Trained bf16 = test::TrainSteps(model, TrainingIn(Precision::kBf16), one, 4);
  for (size_t s = 0; s < fp32.losses.size(); ++s) {
    INFO("step " << s + 1 << ": fp32 " << fp32.losses[s] << ", mixed " << mixed.losses[s]
                 << ", bf16 " << bf16.losses[s]);
    CHECK(std::isfinite(mixed.losses[s]));
    CHECK(mixed.losses[s] == Approx(fp32.losses[s]).epsilon(0.01));
    CHECK(bf16.losses[s] == Approx(fp32.losses[s]).epsilon(0.02));
  }
  CHECK(fp32.losses.back() < fp32.losses.front());  // it trains (lr 1e-2)
  CHECK(mixed.losses.back() < mixed.losses.front());
  // The weights moved alike (Adam's normalised steps of 1e-2, params rounded to bf16).
  double mixed_err = 0, bf16_err = 0;
  for (size_t g = 0; g < fp32.params.size(); ++g) {
    const at::Tensor want = fp32.params[g];
    mixed_err = std::max(mixed_err, (mixed.params[g].to(at::kFloat) - want).abs().max().item<double>());
    bf16_err = std::max(bf16_err, (bf16.params[g].to(at::kFloat) - want).abs().max().item<double>());
  }
  INFO("max |param - fp32 param|: mixed " << mixed_err << ", bf16 " << bf16_err);
  CHECK(mixed_err < 0.05);
  CHECK(bf16_err < 0.05);
}

TEST_CASE("precision: 2 ranks (DP, ZeRO-1/3, TP with SP) in bf16 and mixed equal one rank",
          "[executor][precision]") {
  const ModelSpec model = test::TinySpec(false, 2);
  for (const Precision p : {Precision::kBf16, Precision::kMixed}) {
    ParallelPlan single;
    single.micro_batch = 2;
    const DeviceMesh one(single, 0, nullptr);
    const test::Trained want = test::TrainSteps(model, TrainingIn(p), one, 3);
    struct Case {
      int64_t dp, tp;
      int zero;
    };
    for (const Case c : {Case{2, 1, 0}, Case{2, 1, 1}, Case{2, 1, 3}, Case{1, 2, 0}}) {
      ParallelPlan plan;
      plan.dp = c.dp;
      plan.tp = c.tp;
      plan.sequence_parallel = c.tp > 1;
      plan.zero_stage = c.zero;
      plan.micro_batch = c.dp > 1 ? 1 : 2;
      std::vector<double> last_loss(2);
      test::OnMesh(plan, [&](const DeviceMesh& mesh) {
        last_loss[mesh.world_rank()] = test::TrainSteps(model, TrainingIn(p), mesh, 3).losses.back();
      });
      INFO(ToString(p) << " " << ToPlanString(plan) << ": loss " << last_loss[0] << " vs "
                       << want.losses.back());
      // Sums in bf16 in another order: equal to bf16 rounding, not bit for bit.
      CHECK(last_loss[0] == Approx(want.losses.back()).epsilon(0.01));
      CHECK(last_loss[1] == last_loss[0]);
    }
  }
}

TEST_CASE("precision: a resumed mixed-precision run continues the uninterrupted one",
          "[executor][precision][snapshot]") {
  PlanFile pf;
  pf.model = test::TinySpec(false, 2);
  pf.training = TrainingIn(Precision::kMixed);
  pf.plan.dp = 2;
  pf.plan.zero_stage = 1;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("meshplan_precision_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto run = [&](const RunOptions& options) {
    std::vector<RankMeasurement> out(2);
    test::OnMesh(pf.plan, [&](const DeviceMesh& mesh) {
      out[mesh.world_rank()] = RunRank(pf, options, mesh);
    });
    return out;
  };
  RunOptions full;
  full.steps = 4;
  const std::vector<RankMeasurement> uninterrupted = run(full);
  RunOptions first = full;
  first.steps = 2;
  first.save_every = 2;
  first.snapshot_dir = dir.string();
  run(first);
  RunOptions resumed = full;
  resumed.resume_dir = dir.string();
  resumed.warmup_steps = 0;  // both resumed steps are timed: a run that times none is refused
  const std::vector<RankMeasurement> rest = run(resumed);
  REQUIRE(rest[0].losses.size() == 2);
  // The fp32 master (not the rounded bf16 params) was saved: bit-identical continuation.
  CHECK(rest[0].losses[0] == uninterrupted[0].losses[2]);
  CHECK(rest[0].losses[1] == uninterrupted[0].losses[3]);

  // A snapshot of one precision does not resume another.
  PlanFile fp32 = pf;
  fp32.training.precision = Precision::kFp32;
  test::OnMesh(fp32.plan, [&](const DeviceMesh& mesh) {
    try {
      RunRank(fp32, resumed, mesh);
      throw std::runtime_error("resumed an fp32 run from a mixed-precision snapshot");
    } catch (const InputError& e) {
      test::Expect(std::string(e.what()).find("precision") != std::string::npos, e.what());
    }
  });
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace meshplan
