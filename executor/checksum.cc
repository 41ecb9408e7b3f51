// XXH64 (see checksum.h): four 64-bit lanes over 32-byte stripes, then the tail and the
// avalanche, as in the specification.
#include "executor/checksum.h"

#include <bit>
#include <cstring>

namespace meshplan {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

uint64_t Read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}
uint32_t Read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

uint64_t Round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  acc = std::rotl(acc, 31);
  return acc * kP1;
}
uint64_t MergeRound(uint64_t acc, uint64_t lane) {
  acc ^= Round(0, lane);
  return acc * kP1 + kP4;
}

}  // namespace

Xxh64::Xxh64(uint64_t seed)
    : acc_{seed + kP1 + kP2, seed + kP2, seed, seed - kP1}, seed_(seed) {}

void Xxh64::Update(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += bytes;
  if (buffered_ + bytes < 32) {
    if (bytes > 0) std::memcpy(buffer_ + buffered_, p, bytes);
    buffered_ += bytes;
    return;
  }
  if (buffered_ > 0) {  // complete the buffered stripe
    const size_t take = 32 - buffered_;
    std::memcpy(buffer_ + buffered_, p, take);
    for (int lane = 0; lane < 4; ++lane) acc_[lane] = Round(acc_[lane], Read64(buffer_ + 8 * lane));
    p += take;
    bytes -= take;
    buffered_ = 0;
  }
  uint64_t a0 = acc_[0], a1 = acc_[1], a2 = acc_[2], a3 = acc_[3];
  for (; bytes >= 32; p += 32, bytes -= 32) {
    a0 = Round(a0, Read64(p));
    a1 = Round(a1, Read64(p + 8));
    a2 = Round(a2, Read64(p + 16));
    a3 = Round(a3, Read64(p + 24));
  }
  acc_[0] = a0, acc_[1] = a1, acc_[2] = a2, acc_[3] = a3;
  if (bytes > 0) std::memcpy(buffer_, p, bytes);
  buffered_ = bytes;
}

uint64_t Xxh64::Digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = std::rotl(acc_[0], 1) + std::rotl(acc_[1], 7) + std::rotl(acc_[2], 12) +
        std::rotl(acc_[3], 18);
    for (uint64_t lane : acc_) h = MergeRound(h, lane);
  } else {
    h = seed_ + kP5;
  }
  h += total_;
  const unsigned char* p = buffer_;
  size_t left = buffered_;
  for (; left >= 8; p += 8, left -= 8) {
    h ^= Round(0, Read64(p));
    h = std::rotl(h, 27) * kP1 + kP4;
  }
  if (left >= 4) {
    h ^= static_cast<uint64_t>(Read32(p)) * kP1;
    h = std::rotl(h, 23) * kP2 + kP3;
    p += 4;
    left -= 4;
  }
  for (; left > 0; ++p, --left) {
    h ^= static_cast<uint64_t>(*p) * kP5;
    h = std::rotl(h, 11) * kP1;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t Xxh64::Of(const void* data, size_t bytes, uint64_t seed) {
  Xxh64 hash(seed);
  hash.Update(data, bytes);
  return hash.Digest();
}

std::string HexDigest(uint64_t value) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[static_cast<size_t>(i)] = kDigits[value & 15];
  return out;
}

}  // namespace meshplan
