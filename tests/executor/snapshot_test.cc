// Snapshots through RunRank: a run saved at step 2 and resumed continues with the same
// losses as the uninterrupted run (one process, and ZeRO-1/3 on 2 ranks with sharded
// files); a crash between writing and publishing leaves the previous snapshot loadable.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "executor/comm/gloo_communicator.h"
#include "executor/data.h"
#include "executor/run_rank.h"
#include "executor/snapshot.h"
#include "executor/trainer.h"
#include "planner/input_error.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;

PlanFile SmallPlan(int64_t dp, int zero, int64_t tp = 1, int64_t cp = 1, int64_t pp = 1) {
  PlanFile pf;
  pf.model = test::TinySpec(false, 2);
  pf.training.global_batch = 4;
  pf.training.seq_len = 8;
  pf.plan.tp = tp;
  pf.plan.cp = cp;
  pf.plan.pp = pp;
  pf.training.precision = Precision::kFp32;
  pf.training.learning_rate = 1e-2;
  pf.plan.dp = dp;
  pf.plan.zero_stage = zero;
  pf.plan.micro_batch = 1;  // accumulation over 4 / dp micro-batches
  return pf;
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// RunRank on every rank of the plan (threads with Gloo; one rank needs no network).
std::vector<RankMeasurement> RunRanks(const PlanFile& pf, const RunOptions& options) {
  std::vector<RankMeasurement> out(static_cast<size_t>(pf.plan.world_size()));
  test::OnMesh(pf.plan, [&](const DeviceMesh& mesh) {
    out[static_cast<size_t>(mesh.world_rank())] = RunRank(pf, options, mesh);
  });
  return out;
}

TEST_CASE("a resumed run continues the uninterrupted loss trajectory", "[executor][snapshot]") {
  struct Case {
    int64_t dp;
    int zero;
    int64_t tp, cp, pp;
  };
  const Case c = GENERATE(Case{1, 0, 1, 1, 1}, Case{2, 1, 1, 1, 1}, Case{2, 3, 1, 1, 1},
                          Case{2, 0, 2, 1, 1},   // replicas over dp: one file per tp rank
                          Case{1, 2, 2, 2, 1},   // ZeRO over cp: one file per rank
                          Case{2, 1, 1, 1, 2});  // one file per stage and dp rank
  const auto [dp, zero, tp, cp, pp] = c;
  INFO("dp=" << dp << " zero=" << zero << " tp=" << tp << " cp=" << cp << " pp=" << pp);
  const PlanFile pf = SmallPlan(dp, zero, tp, cp, pp);
  const int64_t world = dp * tp * cp * pp;
  TempDir dir("meshplan_snapshot_test");
  RunOptions full;
  full.steps = 4;
  const std::vector<RankMeasurement> uninterrupted = RunRanks(pf, full);
  REQUIRE(uninterrupted[0].losses.size() == 4);

  RunOptions first = full;
  first.steps = 2;
  first.save_every = 2;
  first.snapshot_dir = dir.path.string();
  RunRanks(pf, first);
  CHECK(fs::exists(dir.path / "latest"));
  for (int64_t r = 0; r < world; ++r) {  // every rank under ZeRO, dp = cp = 0 under ZeRO-0
    const MeshCoords coords = CoordsOfRank(pf.plan, r);
    const bool replica = coords[MeshDim::kDp] > 0 || coords[MeshDim::kCp] > 0;
    CHECK(fs::exists(dir.path / "step_00000002" / fmt::format("rank_{:05d}.bin", r)) ==
          (zero > 0 || !replica));
  }

  RunOptions resumed = full;
  resumed.resume_dir = dir.path.string();
  const std::vector<RankMeasurement> rest = RunRanks(pf, resumed);
  for (const RankMeasurement& rank : rest) {
    CHECK(rank.first_step == 2);
    REQUIRE(rank.losses.size() == 2);
    CHECK(rank.losses[0] == uninterrupted[0].losses[2]);  // bit-identical: same computation
    CHECK(rank.losses[1] == uninterrupted[0].losses[3]);
  }
}

TEST_CASE("a crash while saving leaves the previous snapshot loadable", "[executor][snapshot]") {
  const PlanFile pf = SmallPlan(1, 0);
  TempDir dir("meshplan_snapshot_crash_test");
  const DeviceMesh one(pf.plan, 0, nullptr);
  const auto data = MakeSyntheticTokens(1234, pf.model.vocab_size, pf.training.seq_len);
  auto make = [&] {
    return std::make_unique<Trainer>(pf.model, pf.training, one, *data, 1234, nullptr);
  };
  std::vector<double> losses;  // the uninterrupted trajectory, steps 1..4
  {
    auto t = make();
    for (int s = 0; s < 4; ++s) {
      losses.push_back(t->Step().loss);
      if (t->step() == 2) SaveSnapshot(dir.path.string(), *t);
    }
    // Crash 1: the step-4 rank file written but never renamed.
    const std::string tmp = WriteSnapshotTemp(dir.path.string(), *t);
    CHECK(fs::exists(tmp));
  }
  // Crash 2: a half-written `latest` replacement.
  { std::ofstream(dir.path / "latest.tmp") << "step_000"; }
  auto resume_and_check = [&](const std::string& what) {
    INFO(what);
    auto t = make();
    CHECK(LoadSnapshot(dir.path.string(), *t) == 2);
    CHECK(t->Step().loss == losses[2]);
    CHECK(t->Step().loss == losses[3]);
  };
  resume_and_check("temporary files left behind");
  // Crash 3: the rank file of step 3 published, `latest` not yet updated.
  {
    auto t = make();
    LoadSnapshot(dir.path.string(), *t);
    t->Step();
    PublishSnapshotFile(WriteSnapshotTemp(dir.path.string(), *t));
  }
  resume_and_check("a published rank file without its `latest`");
  // Committing makes step 3 the one that loads.
  CommitSnapshot(dir.path.string(), 3);
  {
    auto t = make();
    CHECK(LoadSnapshot(dir.path.string(), *t) == 3);
    CHECK(t->Step().loss == losses[3]);
  }
}

TEST_CASE("resuming refuses a missing or mismatched snapshot", "[executor][snapshot]") {
  TempDir dir("meshplan_snapshot_refuse_test");
  const PlanFile pf = SmallPlan(1, 0);
  const DeviceMesh one(pf.plan, 0, nullptr);
  const auto data = MakeSyntheticTokens(1, pf.model.vocab_size, pf.training.seq_len);
  Trainer t(pf.model, pf.training, one, *data, 1, nullptr);
  CHECK_THROWS_AS(LoadSnapshot(dir.path.string(), t), InputError);
  t.Step();
  SaveSnapshot(dir.path.string(), t);
  ParallelPlan other = pf.plan;
  other.zero_stage = 1;
  const DeviceMesh other_mesh(other, 0, nullptr);
  Trainer u(pf.model, pf.training, other_mesh, *data, 1, nullptr);
  CHECK_THROWS_WITH(LoadSnapshot(dir.path.string(), u),
                    Catch::Contains("saved with zero 0, this run has 1"));
}

}  // namespace
}  // namespace meshplan
