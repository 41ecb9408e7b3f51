// Snapshots: writing this rank's file (format: snapshot_format.h) and the verified,
// agreed resume (see snapshot.h).
#include "executor/snapshot.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "executor/checksum.h"
#include "planner/atomic_file.h"
#include "planner/input_file.h"
#include "planner/mesh_layout.h"
#include "planner/names.h"

namespace meshplan {

namespace {

namespace fs = std::filesystem;

// The tensors a rank saves, in file order, with their names.
std::vector<std::pair<std::string, at::Tensor>> StateTensors(Trainer& trainer) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  ZeroEngine& engine = trainer.engine();
  for (size_t g = 0; g < engine.layout().groups.size(); ++g) {
    const std::string& name = engine.layout().groups[g].name;
    const ZeroEngine::OwnedState s = engine.Owned(static_cast<int>(g));
    out.emplace_back(name + ".params", s.params);
    out.emplace_back(name + ".adam_m", s.m);
    out.emplace_back(name + ".adam_v", s.v);
  }
  return out;
}

// What the file of this rank's state at `step` is: the header it is written with, and what
// a resume expects.
SnapshotIdentity IdentityOf(Trainer& trainer, int64_t step) {
  const ModelSpec& model = trainer.model().spec();
  SnapshotIdentity id;
  id.step = step;
  id.rank = SnapshotFileRank(trainer.plan(), trainer.mesh().world_rank());
  id.world_size = trainer.mesh().world_size();
  id.plan = ToPlanString(trainer.plan());
  id.dp = trainer.plan().dp;
  id.zero = trainer.plan().zero_stage;
  id.model = model.name;
  id.model_shape = {{"vocab", model.vocab_size},   {"hidden", model.hidden},
                    {"layers", model.layers},      {"heads", model.heads},
                    {"kv_heads", model.kv_heads},  {"ffn_hidden", model.ffn_hidden},
                    {"tied_embeddings", model.tied_embeddings ? 1 : 0}};
  id.precision = ToString(trainer.training().precision);
  for (const auto& [name, t] : StateTensors(trainer))
    id.tensors.push_back({name, t.numel(), c10::toString(t.scalar_type())});
  return id;
}

void WriteAll(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw std::runtime_error("cannot write the snapshot file " + path + ": " +
                               std::strerror(n < 0 ? errno : ENOSPC));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

// Writes `chunks` to path (created or truncated) and fsyncs it.
template <typename Fn>
void WriteFileSynced(const std::string& path, Fn&& write_body) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  try {
    write_body(fd);
    if (::fsync(fd) != 0)
      throw std::runtime_error("cannot fsync " + path + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(path.c_str());  // a partial temporary file only takes space
    throw;
  }
  if (::close(fd) != 0) {  // NFS and friends report a failed write-back here
    const int error = errno;
    ::unlink(path.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(error));
  }
}

void SyncDirectory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// The step DIR/latest names (InputError when there is none, or it is not a step directory
// inside DIR).
int64_t LatestStep(const std::string& dir) {
  const fs::path latest = fs::path(dir) / "latest";
  std::error_code error;
  // ReadInputFile: a regular file only (a FIFO is refused, never waited on).
  const std::string text =
      fs::exists(fs::symlink_status(latest, error)) ? ReadInputFile(latest.string(), "latest") : "";
  if (text.empty())
    throw InputError({latest.string()}, "latest",
                     "no complete snapshot in " + dir + " (its `latest` is missing or empty)");
  return ParseLatestPointer(text, latest.string());
}

// This rank's file of the snapshot DIR/latest names, verified against the run: the
// header it was checked with, or the refusal.
struct Verdict {
  std::string path;
  SnapshotHeader header;
  std::optional<InputError> refusal;
};

Verdict VerifyOwnFile(const std::string& dir, Trainer& trainer) {
  Verdict v;
  v.path = dir;
  try {
    const int64_t step = LatestStep(dir);
    const fs::path step_dir = fs::path(dir) / SnapshotStepDirName(step);
    const int file_rank = SnapshotFileRank(trainer.plan(), trainer.mesh().world_rank());
    v.path = (step_dir / SnapshotRankFileName(file_rank)).string();
    if (fs::is_symlink(step_dir) || fs::is_symlink(v.path))
      throw InputError({v.path}, "file",
                       "a symbolic link: snapshot files are read only from inside " + dir);
    v.header = VerifySnapshotFile(v.path, IdentityOf(trainer, step));
  } catch (const InputError& e) {
    v.refusal = e;
  } catch (const std::exception& e) {  // a file system error: refused like damage
    v.refusal = InputError({v.path}, "file", e.what());
  }
  return v;
}

// Every rank's verdict to every rank: the world ranks that refused (an all-reduce of one
// flag per rank along each mesh dimension in turn, which sums over the whole world).
std::vector<int> RanksThatRefused(const DeviceMesh& mesh, bool refused) {
  at::Tensor flags = at::zeros({mesh.world_size()}, at::kDouble);
  if (refused) flags[mesh.world_rank()] = 1.0;
  for (const MeshDim dim : kAllMeshDims)
    if (mesh.size(dim) > 1) mesh.comm(dim).AllReduceSum(flags);
  std::vector<int> out;
  const auto* f = flags.data_ptr<double>();
  for (int r = 0; r < mesh.world_size(); ++r)
    if (f[r] > 0.5) out.push_back(r);
  return out;
}

// Reads the tensors of a verified file into the trainer's state, hashing them again: a
// file that changed since it was verified is reported (the state is then half-loaded).
void LoadVerified(const Verdict& v, Trainer& trainer) {
  std::ifstream in(v.path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot reopen the snapshot file " + v.path);
  std::string head(static_cast<size_t>(v.header.header_bytes), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  Xxh64 hash;
  hash.Update(head.data(), head.size());
  for (const auto& [name, t] : StateTensors(trainer)) {
    at::Tensor host = at::empty_like(t, at::TensorOptions(at::kCPU)).contiguous();
    in.read(static_cast<char*>(host.data_ptr()), static_cast<std::streamsize>(host.nbytes()));
    if (!in) throw std::runtime_error("the snapshot file " + v.path + " shrank while it was loaded");
    hash.Update(host.data_ptr(), static_cast<size_t>(host.nbytes()));
    at::Tensor target = t;
    target.copy_(host);
  }
  std::string trailer(static_cast<size_t>(kSnapshotTrailerBytes), '\0');
  in.read(trailer.data(), static_cast<std::streamsize>(trailer.size()));
  trailer.resize(static_cast<size_t>(in.gcount()));
  if (ParseSnapshotTrailer(trailer, v.path) != hash.Digest())
    throw std::runtime_error("the snapshot file " + v.path +
                             " changed while it was loaded (it was verified before)");
}

std::string JoinRanks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

int SnapshotFileRank(const ParallelPlan& plan, int world_rank) {
  if (plan.zero_stage != 0) return world_rank;
  MeshCoords c = CoordsOfRank(plan, world_rank);
  c[MeshDim::kDp] = 0;
  c[MeshDim::kCp] = 0;
  return static_cast<int>(RankOfCoords(plan, c));
}

std::string WriteSnapshotTemp(const std::string& dir, Trainer& trainer) {
  const int rank = trainer.mesh().world_rank();
  if (SnapshotFileRank(trainer.plan(), rank) != rank) return "";  // a ZeRO-0 replica
  const fs::path step_dir = fs::path(dir) / SnapshotStepDirName(trainer.step());
  std::error_code error;
  fs::create_directories(step_dir, error);
  if (error)
    throw std::runtime_error("cannot create the snapshot directory " + step_dir.string() + ": " +
                             error.message());
  const std::string path = (step_dir / SnapshotRankFileName(rank)).string() + ".tmp";
  const std::string header = FormatSnapshotHeader(IdentityOf(trainer, trainer.step()));
  WriteFileSynced(path, [&](int fd) {
    Xxh64 hash;
    WriteAll(fd, header.data(), header.size(), path);
    hash.Update(header.data(), header.size());
    for (const auto& [name, t] : StateTensors(trainer)) {
      const at::Tensor c = t.to(at::kCPU).contiguous();  // a device tensor: a host copy
      const std::string dtype = c10::toString(c.scalar_type());
      if (const int64_t bad = FirstNonFinite(c.data_ptr(), c.numel(), dtype); bad >= 0)
        throw std::runtime_error(fmt::format(
            "not saving a snapshot of step {}: {} holds a NaN or infinity at element {}",
            trainer.step(), name, bad));
      WriteAll(fd, c.data_ptr(), static_cast<size_t>(c.nbytes()), path);
      hash.Update(c.data_ptr(), static_cast<size_t>(c.nbytes()));
    }
    const std::string trailer = FormatSnapshotTrailer(hash.Digest());
    WriteAll(fd, trailer.data(), trailer.size(), path);
  });
  return path;
}

void PublishSnapshotFile(const std::string& temp_path) {
  if (temp_path.empty()) return;
  const fs::path tmp(temp_path);
  fs::rename(tmp, fs::path(temp_path.substr(0, temp_path.size() - 4)));  // strip ".tmp"
  SyncDirectory(tmp.parent_path());
}

void CommitSnapshot(const std::string& dir, int64_t step) {
  const fs::path latest = fs::path(dir) / "latest";
  WriteFileAtomically(latest.string(), SnapshotStepDirName(step) + "\n");
}

void SaveSnapshot(const std::string& dir, Trainer& trainer) {
  const DeviceMesh& mesh = trainer.mesh();
  PublishSnapshotFile(WriteSnapshotTemp(dir, trainer));
  mesh.Barrier();  // every rank's file is in place
  if (mesh.world_rank() == 0) CommitSnapshot(dir, trainer.step());
  mesh.Barrier();  // nobody races ahead to the next save before `latest` is published
}

int64_t LoadSnapshot(const std::string& dir, Trainer& trainer) {
  // 1. This rank's file, verified completely (nothing is loaded yet).
  const Verdict verdict = VerifyOwnFile(dir, trainer);
  // 2. Every rank learns every verdict: all load, or none does.
  const std::vector<int> refused = RanksThatRefused(trainer.mesh(), verdict.refusal.has_value());
  if (verdict.refusal) throw *verdict.refusal;
  if (!refused.empty())
    throw SnapshotRefusedElsewhere(
        {dir}, "--resume",
        fmt::format("rank{} {} refused {} snapshot file (see {} message); no rank resumes",
                    refused.size() > 1 ? "s" : "", JoinRanks(refused),
                    refused.size() > 1 ? "their" : "its", refused.size() > 1 ? "their" : "its"));
  // 3. Load.
  LoadVerified(verdict, trainer);
  const int64_t step = verdict.header.identity.step;
  trainer.engine().SyncParamsFromShards();
  trainer.set_step(step);
  return step;
}

}  // namespace meshplan
