// The shared body of the fuzz targets in tests/fuzz/: the fuzzer's bytes as text, handed to
// one real loader. InputError is the expected refusal of bad input and is swallowed; any
// other exception escapes (libFuzzer reports it as a crash), as do sanitizer errors,
// stack overflows, timeouts and leaks: each is a finding to fix in the loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "planner/input_error.h"

namespace meshplan::fuzz {

template <typename Load>
int RunOnText(const uint8_t* data, size_t size, Load load) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    load(text);
  } catch (const InputError&) {
    // the expected outcome for bad input
  }
  return 0;
}

}  // namespace meshplan::fuzz
