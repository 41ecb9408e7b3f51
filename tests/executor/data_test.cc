// Token sources and per-rank batch shards: determinism, the union of the shards is the
// single-process batch, token files read right and refused clearly.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "executor/data.h"
#include "planner/input_error.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;

TEST_CASE("synthetic tokens are deterministic, in range and seed-dependent", "[executor][data]") {
  const auto a = MakeSyntheticTokens(7, 50, 16), b = MakeSyntheticTokens(7, 50, 16),
             c = MakeSyntheticTokens(8, 50, 16);
  std::vector<int64_t> x(17), y(17), z(17);
  a->Sequence(123, x.data());
  b->Sequence(123, y.data());
  c->Sequence(123, z.data());
  CHECK(x == y);
  CHECK(x != z);
  for (int64_t id : x) CHECK((id >= 0 && id < 50));
}

TEST_CASE("the dp shards of a global batch are the single-process batch", "[executor][data]") {
  const auto source = MakeSyntheticTokens(3, 1000, 8);
  const int64_t G = 8, step = 5;
  const BatchShard whole{G, 0, 1, 8};
  const at::Tensor want = MicroBatchTokens(*source, whole, step, 0);  // (8, 9)
  for (int64_t dp : {2, 4}) {
    for (int64_t mbs : {1, 2}) {
      std::vector<at::Tensor> parts;
      for (int64_t r = 0; r < dp; ++r) {
        const BatchShard shard{G, r, dp, mbs};
        for (int64_t i = 0; i < shard.microbatches(); ++i)
          parts.push_back(MicroBatchTokens(*source, shard, step, i));
      }
      CHECK(at::equal(at::cat(parts, 0), want));
    }
  }
}

struct TempFile {
  fs::path path = fs::temp_directory_path() / ("meshplan_tokens_" + std::to_string(::getpid()));
  ~TempFile() { fs::remove(path); }
  void Write(const std::vector<uint8_t>& bytes) const {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
};

std::vector<uint8_t> LittleEndian(const std::vector<uint32_t>& ids, int width) {
  std::vector<uint8_t> out;
  for (uint32_t id : ids)
    for (int b = 0; b < width; ++b) out.push_back(static_cast<uint8_t>(id >> (8 * b)));
  return out;
}

TEST_CASE("token files: windows of S+1 ids, uint16 and uint32", "[executor][data]") {
  TempFile file;
  std::vector<uint32_t> ids(30);
  for (uint32_t i = 0; i < 30; ++i) ids[i] = (i * 7 + 300) % 1000;  // > 255: both bytes matter
  for (int width : {2, 4}) {
    file.Write(LittleEndian(ids, width));
    const TokenDtype dtype = width == 2 ? TokenDtype::kUint16 : TokenDtype::kUint32;
    const auto source = OpenTokenFile(file.path.string(), dtype, 1000, 4, 2);  // 6 windows of 5
    std::vector<int64_t> seq(5);
    source->Sequence(1, seq.data());
    CHECK(seq == std::vector<int64_t>{ids[5], ids[6], ids[7], ids[8], ids[9]});
    source->Sequence(7, seq.data());  // wraps: window 7 mod 6 = 1
    CHECK(seq[0] == ids[5]);
  }
}

TEST_CASE("bad token files are refused with the reason", "[executor][data]") {
  TempFile file;
  CHECK_THROWS_WITH(OpenTokenFile(file.path.string(), TokenDtype::kUint16, 100, 4, 1),
                    Catch::Contains("cannot open"));
  file.Write({1, 0, 2});  // 3 bytes: not whole uint16 ids
  CHECK_THROWS_WITH(OpenTokenFile(file.path.string(), TokenDtype::kUint16, 100, 4, 1),
                    Catch::Contains("not a whole number of uint16"));
  file.Write(LittleEndian({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 2));  // 2 windows of 5
  CHECK_THROWS_WITH(OpenTokenFile(file.path.string(), TokenDtype::kUint16, 100, 4, 4),
                    Catch::Contains("too short"));
  CHECK_THROWS_AS(OpenTokenFile(file.path.string(), TokenDtype::kUint16, 100, 4, 4), InputError);
  file.Write(LittleEndian({1, 2, 3, 4, 500, 6, 7, 8, 9, 10}, 2));
  const auto source = OpenTokenFile(file.path.string(), TokenDtype::kUint16, 100, 4, 1);
  std::vector<int64_t> seq(5);
  CHECK_THROWS_WITH(source->Sequence(0, seq.data()), Catch::Contains("outside the model's vocabulary"));
  CHECK_THROWS_AS(ParseTokenDtype("int8"), InputError);
}

TEST_CASE("token file checks work on bytes alone", "[executor][data]") {
  CHECK(TokenFileWindows(20, TokenDtype::kUint16, 4, 1, "t.bin") == 2);   // 10 ids, windows of 5
  CHECK(TokenFileWindows(40, TokenDtype::kUint32, 4, 2, "t.bin") == 2);
  CHECK_THROWS_WITH(TokenFileWindows(21, TokenDtype::kUint16, 4, 1, "t.bin"),
                    Catch::Contains("t.bin") && Catch::Contains("--data") &&
                        Catch::Contains("not a whole number"));
  CHECK_THROWS_WITH(TokenFileWindows(20, TokenDtype::kUint16, 4, 3, "t.bin"), Catch::Contains("too short"));
  CHECK_THROWS_AS(TokenFileWindows(0, TokenDtype::kUint16, 4, 0, "t.bin"), InputError);
  CHECK_THROWS_AS(TokenFileWindows(-2, TokenDtype::kUint16, 4, 1, "t.bin"), InputError);
  const unsigned char bytes[] = {1, 0, 0xff, 0xff, 3, 0};  // 1, 65535, 3
  int64_t ids[3];
  CHECK_THROWS_WITH(DecodeTokenIds(bytes, 3, TokenDtype::kUint16, 100, 40, "t.bin", ids),
                    Catch::Contains("token 41 is 65535"));
  DecodeTokenIds(bytes, 3, TokenDtype::kUint16, 65536, 0, "t.bin", ids);
  CHECK((ids[0] == 1 && ids[1] == 65535 && ids[2] == 3));
}

}  // namespace
}  // namespace meshplan
