// Snapshot rank files as bytes: header, trailer, identity and verification (see
// snapshot_format.h). No LibTorch.
#include "executor/snapshot_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include "executor/checksum.h"
#include "planner/input_error.h"

namespace meshplan {
namespace {

using nlohmann::json;

constexpr std::string_view kFormat1Magic = "MESHPLAN-SNAPSHOT 1";
constexpr std::string_view kTrailerPrefix = "xxh64 ";
constexpr int kMaxJsonDepth = 4;              // header -> tensors -> entry -> value
constexpr int64_t kMaxTensors = 1'000'000;
constexpr int64_t kMaxNumel = int64_t{1} << 44;
constexpr int64_t kMaxDataBytes = int64_t{1} << 52;
constexpr int64_t kMaxWorldSize = 1 << 20;
constexpr size_t kMaxStringBytes = 4096;
constexpr int64_t kChunkBytes = 8 << 20;    // verification reads, a multiple of every dtype size

[[noreturn]] void Refuse(const std::string& path, const std::string& field, const std::string& why) {
  throw InputError({path}, field, why);
}

std::string Shown(const json& value) {
  std::string text = value.dump();
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

// Typed reads of one JSON object that name the field ("tensors[3].numel") on failure.
class Fields {
 public:
  Fields(const json& object, const std::string& path, std::string prefix)
      : object_(object), path_(path), prefix_(std::move(prefix)) {}

  const json& At(const std::string& key) const {
    const auto it = object_.find(key);
    if (it == object_.end()) Refuse(path_, prefix_ + key, "missing from the snapshot header");
    return *it;
  }
  int64_t Int(const std::string& key, int64_t min, int64_t max) const {
    const json& v = At(key);
    bool in_range = false;
    int64_t value = 0;
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      in_range = u <= static_cast<uint64_t>(max) && static_cast<int64_t>(u) >= min;
      value = in_range ? static_cast<int64_t>(u) : 0;
    } else if (v.is_number_integer()) {
      value = v.get<int64_t>();
      in_range = value >= min && value <= max;
    }
    if (!in_range)
      Refuse(path_, prefix_ + key, fmt::format("expected an integer in {}..{}, got {}", min, max, Shown(v)));
    return value;
  }
  std::string String(const std::string& key) const {
    const json& v = At(key);
    if (!v.is_string()) Refuse(path_, prefix_ + key, "expected a string, got " + Shown(v));
    std::string s = v.get<std::string>();
    if (s.size() > kMaxStringBytes)
      Refuse(path_, prefix_ + key, fmt::format("longer than {} bytes", kMaxStringBytes));
    return s;
  }
  std::string Field(const std::string& key) const { return prefix_ + key; }

 private:
  const json& object_;
  const std::string& path_;
  std::string prefix_;
};

json ParseJsonLine(std::string_view line, const std::string& path) {
  // The depth limit keeps a hostile header ("[[[[...") from costing more than its bytes.
  const json::parser_callback_t depth_limit = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth)
      Refuse(path, "header", fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    return true;
  };
  try {
    return json::parse(line.begin(), line.end(), depth_limit);
  } catch (const json::exception& e) {
    Refuse(path, "header", std::string("not valid JSON: ") + e.what());
  }
}

template <typename Bits>
int64_t FirstWithExponentAllOnes(const void* data, int64_t count, Bits mask) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (int64_t i = 0; i < count; ++i) {
    Bits bits;
    std::memcpy(&bits, p + i * static_cast<int64_t>(sizeof(Bits)), sizeof(Bits));
    if ((bits & mask) == mask) return i;
  }
  return -1;
}

std::string Join(const std::map<std::string, int64_t>& shape) {
  std::string out;
  for (const auto& [key, value] : shape) out += (out.empty() ? "" : ", ") + key + "=" + std::to_string(value);
  return out;
}

}  // namespace

int64_t SnapshotDtypeBytes(std::string_view dtype) {
  if (dtype == "Float") return 4;
  if (dtype == "BFloat16" || dtype == "Half") return 2;
  if (dtype == "Double") return 8;
  return 0;
}

int64_t SnapshotDataBytes(const std::vector<SnapshotTensor>& tensors, const std::string& path) {
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t bytes = tensors[i].numel * SnapshotDtypeBytes(tensors[i].dtype);
    if (tensors[i].numel > kMaxNumel || bytes > kMaxDataBytes - total)
      Refuse(path, fmt::format("tensors[{}].numel", i),
             fmt::format("the tensors add up to more than {} bytes", kMaxDataBytes));
    total += bytes;
  }
  return total;
}

std::string FormatSnapshotHeader(const SnapshotIdentity& id) {
  json tensors = json::array();
  for (const SnapshotTensor& t : id.tensors)
    tensors.push_back({{"name", t.name}, {"numel", t.numel}, {"dtype", t.dtype}});
  json shape = json::object();
  for (const auto& [key, value] : id.model_shape) shape[key] = value;
  const json header{{"format", 2},
                    {"step", id.step},
                    {"rank", id.rank},
                    {"world_size", id.world_size},
                    {"plan", id.plan},
                    {"dp", id.dp},
                    {"zero", id.zero},
                    {"model", id.model},
                    {"model_shape", shape},
                    {"precision", id.precision},
                    {"data_bytes", SnapshotDataBytes(id.tensors, "<snapshot being written>")},
                    {"tensors", tensors}};
  return std::string(kSnapshotMagic) + "\n" + header.dump() + "\n";
}

std::string FormatSnapshotTrailer(uint64_t checksum) {
  return std::string(kTrailerPrefix) + HexDigest(checksum) + "\n";
}

SnapshotHeader ParseSnapshotHeader(std::string_view bytes, const std::string& path) {
  const size_t magic_end = bytes.substr(0, kSnapshotMagic.size() + 1).find('\n');
  const std::string_view magic = bytes.substr(0, magic_end == std::string_view::npos ? 0 : magic_end);
  if (magic == kFormat1Magic)
    Refuse(path, "format",
           "a format-1 snapshot (written before snapshots carried a checksum): it cannot be "
           "verified, so it is not resumed; start the run again");
  if (magic != kSnapshotMagic)
    Refuse(path, "format", "not a meshplan snapshot (it does not start with '" +
                               std::string(kSnapshotMagic) + "')");
  const size_t start = magic_end + 1;
  const size_t line_end = bytes.substr(0, static_cast<size_t>(kMaxSnapshotHeaderBytes)).find('\n', start);
  if (line_end == std::string_view::npos)
    Refuse(path, "header", fmt::format("no complete header line in the first {} bytes (truncated?)",
                                       std::min<size_t>(bytes.size(), kMaxSnapshotHeaderBytes)));
  const json header = ParseJsonLine(bytes.substr(start, line_end - start), path);
  if (!header.is_object()) Refuse(path, "header", "expected a JSON object, got " + Shown(header));

  const Fields f(header, path, "");
  SnapshotHeader out;
  SnapshotIdentity& id = out.identity;
  if (f.Int("format", 0, std::numeric_limits<int64_t>::max()) != 2)
    Refuse(path, "format", "expected 2, got " + Shown(header.at("format")));
  id.step = f.Int("step", 1, kMaxSnapshotStep);
  id.world_size = static_cast<int>(f.Int("world_size", 1, kMaxWorldSize));
  id.rank = static_cast<int>(f.Int("rank", 0, id.world_size - 1));
  id.plan = f.String("plan");
  id.dp = f.Int("dp", 1, id.world_size);
  id.zero = static_cast<int>(f.Int("zero", 0, 3));
  id.model = f.String("model");
  const json& shape = f.At("model_shape");
  if (!shape.is_object())
    Refuse(path, "model_shape", "expected an object of sizes, got " + Shown(shape));
  const Fields shape_fields(shape, path, "model_shape.");
  for (const auto& [key, value] : shape.items()) {
    (void)value;
    if (key.size() > kMaxStringBytes) Refuse(path, "model_shape", "a key is too long");
    id.model_shape[key] = shape_fields.Int(key, 0, kMaxNumel);
  }
  id.precision = f.String("precision");
  out.data_bytes = f.Int("data_bytes", 0, kMaxDataBytes);
  const json& tensors = f.At("tensors");
  if (!tensors.is_array())
    Refuse(path, "tensors", "expected a list of {name, numel, dtype}, got " + Shown(tensors));
  if (static_cast<int64_t>(tensors.size()) > kMaxTensors)
    Refuse(path, "tensors", fmt::format("{} entries, more than {}", tensors.size(), kMaxTensors));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string prefix = fmt::format("tensors[{}]", i);
    if (!tensors[i].is_object())
      Refuse(path, prefix, "expected {name, numel, dtype}, got " + Shown(tensors[i]));
    const Fields t(tensors[i], path, prefix + ".");
    SnapshotTensor entry{t.String("name"), t.Int("numel", 0, kMaxNumel), t.String("dtype")};
    if (SnapshotDtypeBytes(entry.dtype) == 0)
      Refuse(path, t.Field("dtype"),
             "'" + entry.dtype + "' is not a dtype snapshots hold (Float, BFloat16, Half, Double)");
    id.tensors.push_back(std::move(entry));
  }
  out.header_bytes = static_cast<int64_t>(line_end + 1);
  return out;
}

uint64_t ParseSnapshotTrailer(std::string_view trailer, const std::string& path) {
  const bool shaped = trailer.size() == static_cast<size_t>(kSnapshotTrailerBytes) &&
                      trailer.substr(0, kTrailerPrefix.size()) == kTrailerPrefix &&
                      trailer.back() == '\n';
  uint64_t value = 0;
  if (shaped)
    for (char c : trailer.substr(kTrailerPrefix.size(), 16)) {
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) Refuse(path, "checksum", "the trailer's checksum is not 16 hex digits");
      value = (value << 4) | static_cast<uint64_t>(digit);
    }
  else
    Refuse(path, "checksum", "the file does not end with its checksum line ('xxh64 <16 hex>')");
  return value;
}

void CheckSnapshotIdentity(const SnapshotIdentity& saved, const SnapshotIdentity& expected,
                           const std::string& path) {
  const auto differs = [&](const std::string& field, const std::string& has, const std::string& want) {
    Refuse(path, field, "the snapshot was saved with " + field + " " + has + ", this run has " + want);
  };
  if (saved.rank != expected.rank)
    Refuse(path, "rank",
           fmt::format("this file holds rank {}'s state, but rank {}'s belongs here (rank files "
                       "swapped or copied?)", saved.rank, expected.rank));
  if (saved.world_size != expected.world_size)
    differs("world_size", std::to_string(saved.world_size), std::to_string(expected.world_size));
  if (saved.model != expected.model) differs("model", saved.model, expected.model);
  if (saved.model_shape != expected.model_shape) {
    for (const auto& [key, value] : expected.model_shape) {
      const auto it = saved.model_shape.find(key);
      if (it == saved.model_shape.end()) Refuse(path, "model_shape." + key, "missing from the snapshot header");
      if (it->second != value)
        differs("model_shape." + key, std::to_string(it->second), std::to_string(value));
    }
    differs("model_shape", "{" + Join(saved.model_shape) + "}", "{" + Join(expected.model_shape) + "}");
  }
  if (saved.precision != expected.precision) differs("precision", saved.precision, expected.precision);
  if (saved.dp != expected.dp) differs("dp", std::to_string(saved.dp), std::to_string(expected.dp));
  if (saved.zero != expected.zero)
    differs("zero", std::to_string(saved.zero), std::to_string(expected.zero));
  if (saved.plan != expected.plan) differs("plan", saved.plan, expected.plan);
  if (saved.step != expected.step)
    Refuse(path, "step",
           fmt::format("the file says step {}, but it lies in {} (moved or edited?)", saved.step,
                       SnapshotStepDirName(expected.step)));
  if (saved.tensors.size() != expected.tensors.size())
    differs("tensors", fmt::format("{} tensors", saved.tensors.size()),
            fmt::format("{}", expected.tensors.size()));
  for (size_t i = 0; i < saved.tensors.size(); ++i) {
    const SnapshotTensor& s = saved.tensors[i];
    const SnapshotTensor& e = expected.tensors[i];
    const std::string field = fmt::format("tensors[{}]", i);
    if (s.name != e.name) differs(field + ".name", s.name, e.name);
    if (s.numel != e.numel)
      differs(field + ".numel", fmt::format("{} ({})", s.numel, s.name), std::to_string(e.numel));
    if (s.dtype != e.dtype) differs(field + ".dtype", fmt::format("{} ({})", s.dtype, s.name), e.dtype);
  }
}

SnapshotHeader VerifySnapshot(const SnapshotReadAt& read, int64_t file_bytes,
                              const SnapshotIdentity& expected, const std::string& path) {
  // The header: read more until both lines are in, the bound or the end of the file.
  const int64_t limit = std::min(file_bytes, kMaxSnapshotHeaderBytes + 64);
  std::string head;
  for (int64_t want = std::min<int64_t>(64 << 10, limit);; want = std::min(want * 2, limit)) {
    head.resize(static_cast<size_t>(want));
    head.resize(static_cast<size_t>(read(0, head.data(), want)));
    const size_t first = head.find('\n');
    const bool both = first != std::string::npos && head.find('\n', first + 1) != std::string::npos;
    if (both || want >= limit || static_cast<int64_t>(head.size()) < want) break;
  }
  const SnapshotHeader header = ParseSnapshotHeader(head, path);
  CheckSnapshotIdentity(header.identity, expected, path);
  const int64_t data_bytes = SnapshotDataBytes(header.identity.tensors, path);
  if (header.data_bytes != data_bytes)
    Refuse(path, "data_bytes",
           fmt::format("the header says {} bytes of tensor data, its tensors hold {}",
                       header.data_bytes, data_bytes));
  const int64_t expected_bytes = header.header_bytes + data_bytes + kSnapshotTrailerBytes;
  if (file_bytes != expected_bytes)
    Refuse(path, "data_bytes",
           fmt::format("the file has {} bytes, its header promises {} (header, {} bytes of "
                       "tensors, checksum): {} after it was written",
                       file_bytes, expected_bytes, data_bytes,
                       file_bytes < expected_bytes ? "truncated" : "extended"));

  // Every byte through the checksum; the first non-finite value is remembered (a damaged
  // file is reported as such before the values it holds).
  Xxh64 hash;
  hash.Update(head.data(), static_cast<size_t>(header.header_bytes));
  std::vector<unsigned char> chunk(static_cast<size_t>(std::min(kChunkBytes, std::max<int64_t>(data_bytes, 1))));
  int64_t offset = header.header_bytes;
  std::string non_finite_field, non_finite_why;
  for (size_t i = 0; i < header.identity.tensors.size(); ++i) {
    const SnapshotTensor& t = header.identity.tensors[i];
    const int64_t element = SnapshotDtypeBytes(t.dtype);
    for (int64_t done = 0; done < t.numel * element;) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(chunk.size()), t.numel * element - done);
      if (read(offset, chunk.data(), n) != n)
        Refuse(path, "data_bytes", fmt::format("cannot read {} bytes at offset {}", n, offset));
      hash.Update(chunk.data(), static_cast<size_t>(n));
      if (non_finite_field.empty())
        if (const int64_t bad = FirstNonFinite(chunk.data(), n / element, t.dtype); bad >= 0) {
          non_finite_field = fmt::format("tensors[{}]", i);
          non_finite_why = fmt::format("{} holds a NaN or infinity at element {}: the state was "
                                       "broken before it was saved", t.name, done / element + bad);
        }
      offset += n;
      done += n;
    }
  }
  std::string trailer(static_cast<size_t>(kSnapshotTrailerBytes), '\0');
  trailer.resize(static_cast<size_t>(read(offset, trailer.data(), kSnapshotTrailerBytes)));
  const uint64_t stored = ParseSnapshotTrailer(trailer, path);
  const uint64_t computed = hash.Digest();
  if (stored != computed)
    Refuse(path, "checksum",
           "the file's bytes do not match its checksum (xxh64 " + HexDigest(stored) +
               " saved, " + HexDigest(computed) + " now): it was damaged after it was written");
  if (!non_finite_field.empty()) Refuse(path, non_finite_field, non_finite_why);
  return header;
}

SnapshotHeader VerifySnapshotBytes(std::string_view file, const SnapshotIdentity& expected,
                                   const std::string& path) {
  const SnapshotReadAt read = [file](int64_t offset, void* out, int64_t bytes) -> int64_t {
    if (offset < 0 || offset >= static_cast<int64_t>(file.size())) return 0;
    const int64_t n = std::min<int64_t>(bytes, static_cast<int64_t>(file.size()) - offset);
    std::memcpy(out, file.data() + offset, static_cast<size_t>(n));
    return n;
  };
  return VerifySnapshot(read, static_cast<int64_t>(file.size()), expected, path);
}

SnapshotHeader VerifySnapshotFile(const std::string& path, const SnapshotIdentity& expected) {
  // O_NONBLOCK: a FIFO in its place is refused below, never waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) Refuse(path, "file", std::string("cannot open the rank's snapshot file: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    Refuse(path, "file", "not a regular file");
  }
  const SnapshotReadAt read = [fd, &path](int64_t offset, void* out, int64_t bytes) -> int64_t {
    int64_t done = 0;
    while (done < bytes) {
      const ssize_t n = ::pread(fd, static_cast<char*>(out) + done, static_cast<size_t>(bytes - done),
                                static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) Refuse(path, "file", std::string("read failed: ") + std::strerror(errno));
      if (n == 0) break;
      done += n;
    }
    return done;
  };
  try {
    SnapshotHeader header = VerifySnapshot(read, static_cast<int64_t>(st.st_size), expected, path);
    ::close(fd);
    return header;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

int64_t ParseLatestPointer(std::string_view text, const std::string& latest_path) {
  std::string_view name = text;
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.remove_suffix(1);
  constexpr std::string_view kPrefix = "step_";
  const bool shaped = name.size() == kPrefix.size() + 8 && name.substr(0, kPrefix.size()) == kPrefix &&
                      std::all_of(name.begin() + kPrefix.size(), name.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (!shaped) {
    const std::string shown(name.substr(0, 80));
    Refuse(latest_path, "latest",
           "expected the name of a step directory beside it (step_<8 digits>), got '" + shown +
               "'" + (shown.find('/') != std::string::npos || shown.find("..") != std::string::npos
                          ? ": a path, which could lead outside the snapshot directory"
                          : ""));
  }
  const int64_t step = std::stoll(std::string(name.substr(kPrefix.size())));
  if (step < 1) Refuse(latest_path, "latest", "names step 0; snapshots start at step 1");
  return step;
}

std::string SnapshotStepDirName(int64_t step) { return fmt::format("step_{:08d}", step); }
std::string SnapshotRankFileName(int rank) { return fmt::format("rank_{:05d}.bin", rank); }

int64_t FirstNonFinite(const void* data, int64_t count, std::string_view dtype) {
  if (dtype == "Float") return FirstWithExponentAllOnes<uint32_t>(data, count, 0x7F800000u);
  if (dtype == "BFloat16") return FirstWithExponentAllOnes<uint16_t>(data, count, 0x7F80u);
  if (dtype == "Half") return FirstWithExponentAllOnes<uint16_t>(data, count, 0x7C00u);
  if (dtype == "Double")
    return FirstWithExponentAllOnes<uint64_t>(data, count, 0x7FF0000000000000ull);
  return -1;
}

}  // namespace meshplan
