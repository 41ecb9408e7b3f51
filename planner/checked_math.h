// Overflow-checked integer arithmetic for validity rules and sizes computed from user input.
//
// Every product of values that came from a file or a flag (plan factors, batch x sequence,
// micro-batches x layers) goes through CheckedMul rather than `*`: a product past 2^63 must
// refuse the input, never wrap to a small number that passes a check (dp=2^62+2, tp=4 is
// not an 8-GPU plan) or to 0 that then divides (SIGFPE). Header-only, no allocation.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace meshplan {

// a * b, or nullopt when it does not fit in int64.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of all factors, or nullopt when any partial product overflows int64.
inline std::optional<int64_t> CheckedProduct(std::initializer_list<int64_t> factors) {
  int64_t out = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(out, f, &out)) return std::nullopt;
  return out;
}

// a + b, or nullopt when it does not fit in int64.
inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

}  // namespace meshplan
