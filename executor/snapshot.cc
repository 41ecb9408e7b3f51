// Snapshot files: a magic line, a JSON header line, raw tensor bytes (see snapshot.h).
#include "executor/snapshot.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "planner/atomic_file.h"
#include "planner/input_error.h"
#include "planner/mesh_layout.h"
#include "planner/names.h"

namespace meshplan {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kMagic = "MESHPLAN-SNAPSHOT 1";

std::string StepDirName(int64_t step) { return fmt::format("step_{:08d}", step); }
std::string RankFileName(int rank) { return fmt::format("rank_{:05d}.bin", rank); }

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

json Header(Trainer& trainer) {
  json tensors = json::array();
  for (const auto& [name, t] : StateTensors(trainer))
    tensors.push_back({{"name", name}, {"numel", t.numel()}, {"dtype", c10::toString(t.scalar_type())}});
  return json{{"step", trainer.step()},
              {"precision", ToString(trainer.training().precision)},
              {"model", trainer.model().spec().name},
              {"plan", ToPlanString(trainer.plan())},
              {"dp", trainer.plan().dp},
              {"zero", trainer.plan().zero_stage},
              {"rank", trainer.mesh().world_rank()},
              {"tensors", tensors}};
}

void WriteAll(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
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
    if (::fsync(fd) != 0) throw std::runtime_error("cannot fsync " + path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

void SyncDirectory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
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
  const fs::path step_dir = fs::path(dir) / StepDirName(trainer.step());
  fs::create_directories(step_dir);
  const std::string path = (step_dir / RankFileName(rank)).string() + ".tmp";
  const std::string header = std::string(kMagic) + "\n" + Header(trainer).dump() + "\n";
  WriteFileSynced(path, [&](int fd) {
    WriteAll(fd, header.data(), header.size(), path);
    for (const auto& [name, t] : StateTensors(trainer)) {
      const at::Tensor c = t.to(at::kCPU).contiguous();  // a device tensor: a host copy
      WriteAll(fd, c.data_ptr(), static_cast<size_t>(c.nbytes()), path);
    }
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
  WriteFileAtomically(latest.string(), StepDirName(step) + "\n");
}

void SaveSnapshot(const std::string& dir, Trainer& trainer) {
  const DeviceMesh& mesh = trainer.mesh();
  PublishSnapshotFile(WriteSnapshotTemp(dir, trainer));
  mesh.Barrier();  // every rank's file is in place
  if (mesh.world_rank() == 0) CommitSnapshot(dir, trainer.step());
  mesh.Barrier();  // nobody races ahead to the next save before `latest` is published
}

int64_t LoadSnapshot(const std::string& dir, Trainer& trainer) {
  const fs::path latest = fs::path(dir) / "latest";
  std::ifstream latest_in(latest);
  std::string step_name;
  if (!latest_in || !(latest_in >> step_name))
    throw InputError({dir}, "--resume", "no complete snapshot here (" + latest.string() +
                                            " is missing or empty)");
  const int file_rank = SnapshotFileRank(trainer.plan(), trainer.mesh().world_rank());
  const fs::path path = fs::path(dir) / step_name / RankFileName(file_rank);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({path.string()}, "--resume", "cannot open the rank's snapshot file");
  std::string magic, header_line;
  std::getline(in, magic);
  std::getline(in, header_line);
  if (magic != kMagic) throw InputError({path.string()}, "--resume", "not a meshplan snapshot");
  json header;
  try {
    header = json::parse(header_line);
  } catch (const json::exception& e) {
    throw InputError({path.string()}, "--resume", std::string("corrupt header: ") + e.what());
  }
  const auto mismatch = [&](const std::string& what, const std::string& saved,
                            const std::string& now) {
    throw InputError({path.string()}, "--resume",
                     "the snapshot was saved with " + what + " " + saved + ", this run has " + now);
  };
  if (header.value("model", "") != trainer.model().spec().name)
    mismatch("model", header.value("model", "?"), trainer.model().spec().name);
  if (header.value("dp", int64_t{-1}) != trainer.plan().dp)
    mismatch("dp", std::to_string(header.value("dp", int64_t{-1})), std::to_string(trainer.plan().dp));
  if (header.value("zero", -1) != trainer.plan().zero_stage)
    mismatch("zero", std::to_string(header.value("zero", -1)),
             std::to_string(trainer.plan().zero_stage));
  if (header.value("plan", "") != ToPlanString(trainer.plan()))
    mismatch("plan", header.value("plan", "?"), ToPlanString(trainer.plan()));
  const std::string precision = ToString(trainer.training().precision);
  if (header.value("precision", "fp32") != precision)  // older snapshots: fp32 only
    mismatch("precision", header.value("precision", "fp32"), precision);
  const auto tensors = StateTensors(trainer);
  const json& listed = header.at("tensors");
  if (listed.size() != tensors.size())
    mismatch("tensor count", std::to_string(listed.size()), std::to_string(tensors.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    if (listed[i].value("name", "") != name || listed[i].value("numel", int64_t{-1}) != t.numel())
      mismatch("tensor " + std::to_string(i), listed[i].dump(), name + "[" + std::to_string(t.numel()) + "]");
    at::Tensor host = at::empty_like(t, at::TensorOptions(at::kCPU));  // read, then placed
    in.read(static_cast<char*>(host.data_ptr()), static_cast<std::streamsize>(host.nbytes()));
    if (!in) throw InputError({path.string()}, "--resume", "truncated at tensor " + name);
    at::Tensor target = t;
    target.copy_(host);
  }
  const int64_t step = header.at("step").get<int64_t>();
  trainer.engine().SyncParamsFromShards();
  trainer.set_step(step);
  return step;
}

}  // namespace meshplan
