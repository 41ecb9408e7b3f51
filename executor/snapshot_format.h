// Snapshot rank files as bytes: the format, and every check that needs no LibTorch
// (executor/snapshot.h writes and loads the tensors; tests/fuzz calls the parsers directly).
//
// A rank file (format 2):
//   "MESHPLAN-SNAPSHOT 2\n"
//   one JSON line, the header: {"format": 2, "step", "rank", "world_size", "plan", "dp", "zero",
//     "model", "model_shape": {"vocab", "hidden", ...}, "precision", "data_bytes",
//     "tensors": [{"name", "numel", "dtype"}, ...]}
//   the tensors' raw bytes in header order (data_bytes of them), then the trailer
//   "xxh64 <16 hex digits>\n": XXH64 (executor/checksum.h) of every byte before it, so the
//   checksum covers the header and every tensor byte.
// The header is the file's identity: which rank's state it holds, of which step, plan,
// model (name and shape) and precision, with which tensors. A resume checks all of it
// against the run, then the size and the checksum, then that every value is finite, before
// any state is loaded (VerifySnapshotBytes / VerifySnapshotFile).
// Every refusal is an InputError naming the file and the field ("step", "rank",
// "tensors[3].dtype", "checksum", "latest", ...). Format 1 files (no checksum) are refused.
// Layout of a snapshot directory: executor/snapshot.h, docs/executor_internals.md#snapshot.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace meshplan {

inline constexpr std::string_view kSnapshotMagic = "MESHPLAN-SNAPSHOT 2";
inline constexpr int64_t kSnapshotTrailerBytes = 23;       // "xxh64 " + 16 hex + "\n"
inline constexpr int64_t kMaxSnapshotStep = 99'999'999;    // step_<8 digits>
inline constexpr int64_t kMaxSnapshotHeaderBytes = 16 << 20;

struct SnapshotTensor {
  std::string name;   // "block3.adam_m"
  int64_t numel = 0;
  std::string dtype;  // c10's name: Float | BFloat16 | Half | Double
  bool operator==(const SnapshotTensor&) const = default;
};

// What a rank file says it is. The run's expectation is built the same way (snapshot.cc).
struct SnapshotIdentity {
  int64_t step = 0;      // optimizer steps done when it was saved, 1..kMaxSnapshotStep
  int rank = 0;          // the world rank whose state it holds (SnapshotFileRank)
  int world_size = 1;
  std::string plan;      // ToPlanString
  int64_t dp = 1;
  int zero = 0;
  std::string model;     // ModelSpec::name
  std::map<std::string, int64_t> model_shape;  // vocab, hidden, layers, heads, kv_heads, ...
  std::string precision;                       // fp32 | bf16 | mixed
  std::vector<SnapshotTensor> tensors;         // in file order
  bool operator==(const SnapshotIdentity&) const = default;
};

struct SnapshotHeader {
  SnapshotIdentity identity;
  int64_t header_bytes = 0;  // the two lines, newlines included: where the tensor bytes start
  int64_t data_bytes = 0;    // as the header declares it (checked against the tensors later)
};

// Bytes per element of a dtype name; 0 for a name snapshots never hold.
int64_t SnapshotDtypeBytes(std::string_view dtype);
// The tensors' total bytes (InputError on `path` when it overflows).
int64_t SnapshotDataBytes(const std::vector<SnapshotTensor>& tensors, const std::string& path);

// The magic line and the header line of `identity` (data_bytes = the tensors' total).
std::string FormatSnapshotHeader(const SnapshotIdentity& identity);
std::string FormatSnapshotTrailer(uint64_t checksum);

// Parses the start of a rank file: `bytes` holds at least the two lines (more is ignored).
// Checks the form of every field (types, ranges: step 1..kMaxSnapshotStep, rank in
// 0..world_size-1, known dtypes, ...), not whether it matches the run. Throws InputError.
SnapshotHeader ParseSnapshotHeader(std::string_view bytes, const std::string& path);
// The checksum in a trailer; InputError (field "checksum") when `trailer` is not one.
uint64_t ParseSnapshotTrailer(std::string_view trailer, const std::string& path);
// Throws InputError naming the first field of `saved` that differs from `expected`.
void CheckSnapshotIdentity(const SnapshotIdentity& saved, const SnapshotIdentity& expected,
                           const std::string& path);

// Reads `bytes` at `offset` into `out`; returns how many it read (fewer only at the end).
using SnapshotReadAt = std::function<int64_t(int64_t offset, void* out, int64_t bytes)>;
// Verifies a whole rank file of `file_bytes` bytes, in this order: the header's form, its
// identity against `expected`, the size (header + data_bytes + trailer), the checksum over
// every byte, and that every value is finite. Returns the header; throws InputError.
SnapshotHeader VerifySnapshot(const SnapshotReadAt& read, int64_t file_bytes,
                              const SnapshotIdentity& expected, const std::string& path);
SnapshotHeader VerifySnapshotBytes(std::string_view file, const SnapshotIdentity& expected,
                                   const std::string& path);
SnapshotHeader VerifySnapshotFile(const std::string& path, const SnapshotIdentity& expected);

// DIR/latest holds "step_<8 digits>\n": returns the step. Anything else (a path, "..", an
// absolute name, step 0) throws InputError (field "latest") on `latest_path`.
int64_t ParseLatestPointer(std::string_view text, const std::string& latest_path);
std::string SnapshotStepDirName(int64_t step);  // step_00000004
std::string SnapshotRankFileName(int rank);     // rank_00001.bin

// The index of the first NaN or infinity among `count` elements of `dtype`, or -1.
int64_t FirstNonFinite(const void* data, int64_t count, std::string_view dtype);

}  // namespace meshplan
