// Xxh64: the checksum of snapshot files (executor/snapshot_format.h), streaming.
//
// XXH64 (Yann Collet's xxHash, 64-bit variant, seed 0), written from its published
// specification (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md): the same
// value as `xxh64sum` and python's xxhash.xxh64 for the same bytes, on any machine (inputs are
// read little-endian). Why this one and not CRC-32C: a snapshot file is gigabytes that are
// read twice on every resume, and XXH64 runs at memory speed in portable C++ (no SSE4.2 / ARM
// CRC instructions to dispatch on), while a 64-bit value makes an undetected corruption
// 2^32 times less likely than a 32-bit CRC (the damage we guard against is large: zeroed
// megabytes, swapped or copied files, not single-bit line noise).
// Update() may be called with any split of the bytes; the digest does not depend on it.
// Not thread-safe (one object per stream). No LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace meshplan {

class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void Update(const void* data, size_t bytes);
  uint64_t Digest() const;  // of everything so far; Update may continue after it

  // One-shot.
  static uint64_t Of(const void* data, size_t bytes, uint64_t seed = 0);

 private:
  uint64_t acc_[4];
  uint64_t seed_;
  uint64_t total_ = 0;
  unsigned char buffer_[32];
  size_t buffered_ = 0;
};

// 16 lowercase hex digits.
std::string HexDigest(uint64_t value);

}  // namespace meshplan
