// The snapshot checksum (XXH64) against the published test vectors, and the snapshot
// format's refusals on bytes (executor/snapshot_format.h): every one names the field.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "executor/checksum.h"
#include "executor/snapshot_format.h"
#include "planner/input_error.h"

namespace meshplan {
namespace {

TEST_CASE("XXH64 gives the reference values, however the bytes are split",
          "[executor][snapshot][checksum]") {
  // xxHash's own vectors (seed 0), and python-xxhash's README example (39 bytes: the
  // 32-byte stripes and the tail).
  CHECK(HexDigest(Xxh64::Of("", 0)) == "ef46db3751d8e999");
  CHECK(HexDigest(Xxh64::Of("a", 1)) == "d24ec4f1a98c6e5b");
  CHECK(HexDigest(Xxh64::Of("abc", 3)) == "44bc2cf5ad770999");
  const std::string spam = "Nobody inspects the spammish repetition";
  CHECK(HexDigest(Xxh64::Of(spam.data(), spam.size())) == "fbcea83c8a378bf1");

  std::mt19937_64 rng(7);
  std::vector<unsigned char> bytes(1000);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  for (size_t size : {0, 1, 31, 32, 33, 64, 100, 999, 1000}) {
    const uint64_t whole = Xxh64::Of(bytes.data(), size);
    Xxh64 split;
    for (size_t at = 0; at < size;) {
      const size_t n = std::min<size_t>(size - at, rng() % 40);
      split.Update(bytes.data() + at, n);
      at += n;
    }
    INFO("size " << size);
    CHECK(split.Digest() == whole);
  }
  bytes[500] ^= 1;
  CHECK(Xxh64::Of(bytes.data(), 1000) != Xxh64::Of(bytes.data(), 999));
}

SnapshotIdentity SmallIdentity() {
  SnapshotIdentity id;
  id.step = 4;
  id.rank = 1;
  id.world_size = 2;
  id.plan = "dp=2";
  id.dp = 2;
  id.zero = 1;
  id.model = "m";
  id.model_shape = {{"vocab", 10}, {"hidden", 4}};
  id.precision = "fp32";
  id.tensors = {{"a.params", 3, "Float"}, {"a.adam_m", 2, "BFloat16"}};
  return id;
}

// A complete, valid rank file of SmallIdentity().
std::string SmallFile() {
  std::string f = FormatSnapshotHeader(SmallIdentity());
  const float values[3] = {1, 2, 3};
  const uint16_t halves[2] = {0x3f80, 0x4000};  // bf16 1, 2
  f.append(reinterpret_cast<const char*>(values), sizeof values);
  f.append(reinterpret_cast<const char*>(halves), sizeof halves);
  return f + FormatSnapshotTrailer(Xxh64::Of(f.data(), f.size()));
}

std::string FieldRefused(const std::string& file) {
  try {
    VerifySnapshotBytes(file, SmallIdentity(), "f.bin");
  } catch (const InputError& e) {
    CHECK(e.where().file == "f.bin");
    return e.field();
  }
  return "(accepted)";
}

TEST_CASE("snapshot bytes: a valid file passes, each damage is refused by field",
          "[executor][snapshot][checksum]") {
  const std::string good = SmallFile();
  const SnapshotHeader header = VerifySnapshotBytes(good, SmallIdentity(), "f.bin");
  CHECK(header.identity == SmallIdentity());
  CHECK(header.data_bytes == 16);
  CHECK(header.header_bytes + 16 + kSnapshotTrailerBytes == static_cast<int64_t>(good.size()));

  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string f = good;
    const size_t at = f.find(from);
    REQUIRE(at != std::string::npos);
    return f.replace(at, from.size(), to);
  };
  CHECK(FieldRefused("") == "format");
  CHECK(FieldRefused("MESHPLAN-SNAPSHOT 2") == "format");  // not even the magic line
  CHECK(FieldRefused("MESHPLAN-SNAPSHOT 2\n{\"format\": 2") == "header");  // no end of line
  CHECK(FieldRefused(edited("{", "[")) == "header");
  CHECK(FieldRefused(edited("{\"data_bytes\"", "[[[[[[[[{\"data_bytes\"")) == "header");
  CHECK(FieldRefused(edited("\"step\":4", "\"step\":-4")) == "step");
  CHECK(FieldRefused(edited("\"step\":4", "\"step\":1e30")) == "step");
  CHECK(FieldRefused(edited("\"step\":4", "\"step\":18446744073709551616")) == "step");
  CHECK(FieldRefused(edited("\"step\":4", "\"step\":\"4\"")) == "step");
  CHECK(FieldRefused(edited("\"rank\":1", "\"rank\":2")) == "rank");  // >= world_size
  CHECK(FieldRefused(edited("\"rank\":1", "\"rank\":0")) == "rank");  // another rank's
  CHECK(FieldRefused(edited("\"model\":\"m\",", "")) == "model");
  CHECK(FieldRefused(edited("\"hidden\":4", "\"hidden\":8")) == "model_shape.hidden");
  CHECK(FieldRefused(edited("\"tensors\":[", "\"tensors\":{\"x\":[")) == "header");
  CHECK(FieldRefused(edited("\"dtype\":\"Float\"", "\"dtype\":\"Int\"")) == "tensors[0].dtype");
  CHECK(FieldRefused(edited("\"dtype\":\"Float\"", "\"dtype\":\"Half\"")) == "tensors[0].dtype");
  CHECK(FieldRefused(edited("\"numel\":3", "\"numel\":4")) == "tensors[0].numel");
  CHECK(FieldRefused(edited("\"data_bytes\":16", "\"data_bytes\":17")) == "data_bytes");
  CHECK(FieldRefused(good.substr(0, good.size() - 1)) == "data_bytes");  // truncated
  CHECK(FieldRefused(good + "x") == "data_bytes");                        // extended
  std::string flipped = good;
  flipped[static_cast<size_t>(header.header_bytes) + 5] ^= 0x20;
  CHECK(FieldRefused(flipped) == "checksum");
  std::string bad_trailer = good;
  bad_trailer[bad_trailer.size() - 3] = 'z';
  CHECK(FieldRefused(bad_trailer) == "checksum");
  // A NaN with a matching checksum (a forgery, or a state broken before it was saved).
  std::string nan = good.substr(0, good.size() - kSnapshotTrailerBytes);
  const float not_a_number = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&nan[static_cast<size_t>(header.header_bytes) + 4], &not_a_number, 4);
  CHECK(FieldRefused(nan + FormatSnapshotTrailer(Xxh64::Of(nan.data(), nan.size()))) == "tensors[0]");
}

TEST_CASE("snapshot bytes: `latest` names a step directory and nothing else",
          "[executor][snapshot][checksum]") {
  CHECK(ParseLatestPointer("step_00000002\n", "latest") == 2);
  CHECK(ParseLatestPointer("step_99999999", "latest") == 99999999);
  for (const char* text : {"", "\n", "step_0000002", "step_000000002", "step_00000000",
                           "../x/step_00000002", "/tmp/step_00000002", "step_0000000a",
                           "step_00000002/..", "step_00000002 extra", "./step_00000002"}) {
    INFO("'" << text << "'");
    CHECK_THROWS_AS(ParseLatestPointer(text, "latest"), InputError);
  }
}

TEST_CASE("non-finite values are found in every dtype a snapshot holds",
          "[executor][snapshot][checksum]") {
  const float f[3] = {1, std::numeric_limits<float>::infinity(), 2};
  CHECK(FirstNonFinite(f, 3, "Float") == 1);
  CHECK(FirstNonFinite(f, 1, "Float") == -1);
  const double d[2] = {0, std::numeric_limits<double>::quiet_NaN()};
  CHECK(FirstNonFinite(d, 2, "Double") == 1);
  const uint16_t bf16[3] = {0x3f80, 0xff80, 0x7fc0};  // 1, -inf, nan
  CHECK(FirstNonFinite(bf16, 3, "BFloat16") == 1);
  const uint16_t half[2] = {0x3c00, 0x7e00};  // 1, nan
  CHECK(FirstNonFinite(half, 2, "Half") == 1);
}

}  // namespace
}  // namespace meshplan
