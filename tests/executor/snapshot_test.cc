// Snapshots through RunRank: a run saved at step 2 and resumed continues with the same
// losses as the uninterrupted run (one process, and ZeRO-1/3 on 2 ranks with sharded
// files); a crash between writing and publishing leaves the previous snapshot loadable;
// a snapshot damaged after it was written is refused on every rank, naming the file and
// the field, before any state is loaded.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "executor/checksum.h"
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
  resumed.warmup_steps = 0;  // both resumed steps are timed: a run that times none is refused
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

// ---------------------------------------------------------------------------------------
// Damaged snapshots

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void WriteBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A rank file split into its parts, to damage one and write it back.
struct RankFile {
  std::string magic;        // the first line, without its newline
  nlohmann::json header;    // the second line
  std::string data;         // the tensor bytes
  std::string trailer;      // "xxh64 <hex>\n"

  static RankFile Read(const fs::path& path) {
    const std::string bytes = ReadBytes(path);
    RankFile f;
    const size_t first = bytes.find('\n'), second = bytes.find('\n', first + 1);
    f.magic = bytes.substr(0, first);
    f.header = nlohmann::json::parse(bytes.substr(first + 1, second - first - 1));
    f.data = bytes.substr(second + 1, bytes.size() - second - 1 - kSnapshotTrailerBytes);
    f.trailer = bytes.substr(bytes.size() - kSnapshotTrailerBytes);
    return f;
  }
  // Writes it back; `reseal`: with the checksum of the new bytes (a consistent forgery).
  void Write(const fs::path& path, bool reseal = false) const {
    std::string bytes = magic + "\n" + header.dump() + "\n" + data;
    WriteBytes(path, bytes + (reseal ? FormatSnapshotTrailer(Xxh64::Of(bytes.data(), bytes.size()))
                                     : trailer));
  }
  // Where tensor `name` starts in `data`.
  size_t Offset(const std::string& name) const {
    size_t offset = 0;
    for (const auto& t : header.at("tensors")) {
      if (t.at("name") == name) return offset;
      offset += t.at("numel").get<size_t>() * SnapshotDtypeBytes(t.at("dtype").get<std::string>());
    }
    FAIL("no tensor " << name);
    return 0;
  }
};

// What one rank's resume ended with.
struct Refusal {
  bool refused = false;    // threw InputError
  bool elsewhere = false;  // ... as SnapshotRefusedElsewhere (another rank's file was bad)
  std::string file, field, what;
};

// Resumes `pf` from `dir` on every rank (threads) and returns how each rank ended. Any
// other exception fails the test (OnMesh).
std::vector<Refusal> Resume(const PlanFile& pf, const fs::path& dir) {
  std::vector<Refusal> out(static_cast<size_t>(pf.plan.world_size()));
  RunOptions resumed;
  resumed.steps = 4;
  resumed.resume_dir = dir.string();
  test::OnMesh(pf.plan, [&](const DeviceMesh& mesh) {
    Refusal& r = out[static_cast<size_t>(mesh.world_rank())];
    try {
      RunRank(pf, resumed, mesh);
    } catch (const SnapshotRefusedElsewhere& e) {
      r = {true, true, e.where().file, e.field(), e.what()};
    } catch (const InputError& e) {
      r = {true, false, e.where().file, e.field(), e.what()};
    }
  });
  return out;
}

// A 2-rank ZeRO-1 snapshot of step 2 (one file per rank), saved once and copied per case.
const fs::path& PristineSnapshot() {
  static TempDir dir("meshplan_snapshot_pristine");
  static const bool saved = [] {
    RunOptions first;
    first.steps = 2;
    first.save_every = 2;
    first.snapshot_dir = dir.path.string();
    RunRanks(SmallPlan(2, 1), first);
    return true;
  }();
  (void)saved;
  return dir.path;
}

fs::path RankPath(const fs::path& dir, int rank) {
  return dir / SnapshotStepDirName(2) / SnapshotRankFileName(rank);
}

// The damaged rank refuses naming its file and `field`; every other rank refuses too,
// pointing at it; nobody trains.
void CheckRefusedBy(const std::vector<Refusal>& ranks, int damaged, const fs::path& file,
                    const std::string& field) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    INFO("rank " << r << ": " << ranks[r].what);
    REQUIRE(ranks[r].refused);
    if (static_cast<int>(r) == damaged) {
      CHECK_FALSE(ranks[r].elsewhere);
      CHECK(ranks[r].file == file.string());
      CHECK(ranks[r].field == field);
      CHECK_THAT(ranks[r].what, Catch::Contains(file.string()) && Catch::Contains(field + ": "));
    } else {
      CHECK(ranks[r].elsewhere);
      CHECK_THAT(ranks[r].what, Catch::Contains("rank " + std::to_string(damaged) + " refused"));
    }
  }
}

TEST_CASE("resuming refuses snapshot files damaged after they were written",
          "[executor][snapshot][damage]") {
  const PlanFile pf = SmallPlan(2, 1);
  TempDir dir("meshplan_snapshot_damage");
  fs::remove_all(dir.path);
  fs::copy(PristineSnapshot(), dir.path, fs::copy_options::recursive);
  const fs::path rank1 = RankPath(dir.path, 1);
  RankFile file = RankFile::Read(rank1);

  SECTION("a flipped byte in the Adam state") {
    file.data[file.Offset("block1.adam_v") + 5] ^= 0x10;
    file.Write(rank1);
    CheckRefusedBy(Resume(pf, dir.path), 1, rank1, "checksum");
  }
  SECTION("1 MB of parameters zeroed (the whole file's tensors when smaller)") {
    std::memset(file.data.data(), 0, std::min<size_t>(file.data.size(), 1 << 20));
    file.Write(rank1);
    CheckRefusedBy(Resume(pf, dir.path), 1, rank1, "checksum");
  }
  SECTION("a block of NaN parameters") {
    const bool reseal = GENERATE(false, true);
    INFO("checksum recomputed: " << reseal);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const size_t at = file.Offset("block0.params");
    for (size_t i = 0; i < 16; ++i) std::memcpy(&file.data[at + 4 * i], &nan, 4);
    file.Write(rank1, reseal);
    // A forgery with a matching checksum is still refused: the values are not finite.
    CheckRefusedBy(Resume(pf, dir.path), 1, rank1, reseal ? "tensors[3]" : "checksum");
  }
  SECTION("a header whose dtype or rank was edited (checksum recomputed or not)") {
    const bool reseal = GENERATE(false, true);
    INFO("checksum recomputed: " << reseal);
    const bool dtype = GENERATE(true, false);
    if (dtype) file.header["tensors"][1]["dtype"] = "Half";
    else file.header["rank"] = 0;
    file.Write(rank1, reseal);
    CheckRefusedBy(Resume(pf, dir.path), 1, rank1, dtype ? "tensors[1].dtype" : "rank");
  }
  SECTION("a negative, a huge, or a moved step") {
    const int64_t step = GENERATE(int64_t{-2}, int64_t{0}, int64_t{123456789012}, int64_t{3});
    INFO("step " << step);
    file.header["step"] = step;
    file.Write(rank1, true);
    CheckRefusedBy(Resume(pf, dir.path), 1, rank1, "step");
  }
  SECTION("a missing field") {
    const std::string field = GENERATE(as<std::string>{}, "model", "step", "rank", "plan",
                                       "tensors", "data_bytes", "precision", "model_shape");
    file.header.erase(field);
    file.Write(rank1, true);
    CheckRefusedBy(Resume(pf, dir.path), 1, rank1, field);
  }
  SECTION("a tensor list that is not a list, or entries that are not tensors") {
    const int variant = GENERATE(0, 1, 2);
    if (variant == 0) file.header["tensors"] = {{"name", "embedding.params"}};
    if (variant == 1) file.header["tensors"][2] = 7;
    if (variant == 2) file.header["tensors"][2]["numel"] = -1;
    file.Write(rank1, true);
    CheckRefusedBy(Resume(pf, dir.path), 1, rank1,
                   variant == 0 ? "tensors" : variant == 1 ? "tensors[2]" : "tensors[2].numel");
  }
  SECTION("not JSON, not a snapshot, truncated, an old format") {
    const int variant = GENERATE(0, 1, 2, 3);
    std::string bytes = ReadBytes(rank1);
    std::string field = "header";
    if (variant == 0) bytes.replace(bytes.find('{'), 1, "[");
    if (variant == 1) bytes = "PK\x03\x04 not a snapshot", field = "format";
    if (variant == 2) bytes.resize(bytes.size() / 2), field = "data_bytes";
    if (variant == 3) bytes.replace(0, std::strlen("MESHPLAN-SNAPSHOT 2"), "MESHPLAN-SNAPSHOT 1"),
                      field = "format";
    WriteBytes(rank1, bytes);
    CheckRefusedBy(Resume(pf, dir.path), 1, rank1, field);
  }
}

TEST_CASE("resuming refuses swapped and copied rank files", "[executor][snapshot][damage]") {
  const PlanFile pf = SmallPlan(2, 1);
  TempDir dir("meshplan_snapshot_swap");
  fs::remove_all(dir.path);
  fs::copy(PristineSnapshot(), dir.path, fs::copy_options::recursive);
  const fs::path rank0 = RankPath(dir.path, 0), rank1 = RankPath(dir.path, 1);
  SECTION("the two rank files swapped: each rank refuses its own") {
    const std::string a = ReadBytes(rank0), b = ReadBytes(rank1);
    WriteBytes(rank0, b);
    WriteBytes(rank1, a);
    const std::vector<Refusal> ranks = Resume(pf, dir.path);
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << ranks[r].what);
      CHECK((ranks[r].refused && !ranks[r].elsewhere));
      CHECK(ranks[r].field == "rank");
      CHECK(ranks[r].file == RankPath(dir.path, r).string());
      CHECK_THAT(ranks[r].what, Catch::Contains("swapped or copied"));
    }
  }
  SECTION("rank 1's file replaced by a copy of rank 0's") {
    fs::copy_file(rank0, rank1, fs::copy_options::overwrite_existing);
    CheckRefusedBy(Resume(pf, dir.path), 1, rank1, "rank");
  }
}

TEST_CASE("resuming refuses a `latest` that leads outside the snapshot directory",
          "[executor][snapshot][damage]") {
  const PlanFile pf = SmallPlan(2, 1);
  TempDir dir("meshplan_snapshot_latest");
  fs::copy(PristineSnapshot(), dir.path / "run", fs::copy_options::recursive);
  // A complete, valid snapshot outside: still not followed.
  fs::copy(PristineSnapshot(), dir.path / "elsewhere", fs::copy_options::recursive);
  const std::string pointer = GENERATE(
      as<std::string>{}, "../elsewhere/step_00000002", (fs::temp_directory_path() / "step_00000002").string(),
      "step_00000002/..", "step_2", "step_00000000", "", "latest");
  INFO("latest: '" << pointer << "'");
  WriteBytes(dir.path / "run" / "latest", pointer + "\n");
  const std::vector<Refusal> ranks = Resume(pf, dir.path / "run");
  for (const Refusal& r : ranks) {  // every rank reads the pointer itself
    INFO(r.what);
    CHECK((r.refused && !r.elsewhere));
    CHECK(r.field == "latest");
    CHECK(r.file == (dir.path / "run" / "latest").string());
  }
}

TEST_CASE("a refused resume loads nothing", "[executor][snapshot][damage]") {
  const PlanFile pf = SmallPlan(1, 0);
  TempDir dir("meshplan_snapshot_nothing_loaded");
  const DeviceMesh one(pf.plan, 0, nullptr);
  const auto data = MakeSyntheticTokens(1, pf.model.vocab_size, pf.training.seq_len);
  {
    Trainer t(pf.model, pf.training, one, *data, 1, nullptr);
    t.Step();
    t.Step();
    SaveSnapshot(dir.path.string(), t);
  }
  const fs::path file = dir.path / SnapshotStepDirName(2) / SnapshotRankFileName(0);
  std::string bytes = ReadBytes(file);
  bytes[bytes.size() - kSnapshotTrailerBytes - 3] ^= 1;  // the last tensor's last bytes
  WriteBytes(file, bytes);
  Trainer fresh(pf.model, pf.training, one, *data, 1, nullptr);
  std::vector<at::Tensor> before;
  for (size_t g = 0; g < fresh.engine().layout().groups.size(); ++g) {
    const ZeroEngine::OwnedState s = fresh.engine().Owned(static_cast<int>(g));
    for (const at::Tensor& t : {s.params, s.m, s.v}) before.push_back(t.clone());
  }
  CHECK_THROWS_WITH(LoadSnapshot(dir.path.string(), fresh),
                    Catch::Contains(file.string()) && Catch::Contains("checksum: "));
  CHECK(fresh.step() == 0);
  size_t i = 0;
  for (size_t g = 0; g < fresh.engine().layout().groups.size(); ++g) {
    const ZeroEngine::OwnedState s = fresh.engine().Owned(static_cast<int>(g));
    for (const at::Tensor& t : {s.params, s.m, s.v}) CHECK(at::equal(t, before[i++]));
  }
}

TEST_CASE("a snapshot of a state with NaN is not written", "[executor][snapshot]") {
  const PlanFile pf = SmallPlan(1, 0);
  TempDir dir("meshplan_snapshot_nan_state");
  const DeviceMesh one(pf.plan, 0, nullptr);
  const auto data = MakeSyntheticTokens(1, pf.model.vocab_size, pf.training.seq_len);
  Trainer t(pf.model, pf.training, one, *data, 1, nullptr);
  t.Step();
  t.engine().Owned(0).params.fill_(std::numeric_limits<float>::quiet_NaN());
  CHECK_THROWS_WITH(SaveSnapshot(dir.path.string(), t), Catch::Contains("NaN"));
  CHECK_FALSE(fs::exists(dir.path / "latest"));
  CHECK_FALSE(fs::exists(dir.path / SnapshotStepDirName(1) / (SnapshotRankFileName(0) + ".tmp")));
}

TEST_CASE("a snapshot that cannot be written is refused, naming the file and the cause",
          "[executor][snapshot]") {
  // /dev/full answers every write with ENOSPC: what a full disk does.
  if (!fs::exists("/dev/full")) {
    WARN("no /dev/full: not checked");
    return;
  }
  const PlanFile pf = SmallPlan(1, 0);
  TempDir dir("meshplan_snapshot_disk_full");
  const DeviceMesh one(pf.plan, 0, nullptr);
  const auto data = MakeSyntheticTokens(1, pf.model.vocab_size, pf.training.seq_len);
  Trainer t(pf.model, pf.training, one, *data, 1, nullptr);
  t.Step();
  SaveSnapshot(dir.path.string(), t);  // step 1: complete
  t.Step();
  fs::create_directories(dir.path / SnapshotStepDirName(2));
  fs::create_symlink("/dev/full", dir.path / SnapshotStepDirName(2) / (SnapshotRankFileName(0) + ".tmp"));
  CHECK_THROWS_WITH(SaveSnapshot(dir.path.string(), t),
                    Catch::Contains("rank_00000.bin.tmp") && Catch::Contains("No space left on device"));
  // The previous snapshot is still the one that loads.
  Trainer u(pf.model, pf.training, one, *data, 1, nullptr);
  CHECK(LoadSnapshot(dir.path.string(), u) == 1);
}

}  // namespace
}  // namespace meshplan
