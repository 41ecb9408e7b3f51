// Helpers the planner tests share (the CLI and GUI tests too): the
// InputError a call throws, a scratch folder, and the CLI under `timeout 20`.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "planner/input_error.h"
#include "tests/cli_run.h"

namespace meshplan::test {

namespace fs = std::filesystem;

// The InputError `f` throws (fails the test when it throws nothing or something else).
template <typename F>
InputError ErrorOf(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  }
  FAIL("expected an InputError");
  return InputError({}, "", "");
}

// A fresh folder under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path = fs::temp_directory_path() /
                  ("meshplan_hostile_test_" + std::to_string(::getpid()) + "_" +
                   std::to_string(reinterpret_cast<uintptr_t>(this)));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string Write(const std::string& name, const std::string& text) const {
    const fs::path file = path / name;
    std::ofstream(file, std::ios::binary) << text;
    return file.string();
  }
};

// `meshplan ARGS` under `timeout 20` (a hang exits 124 and fails), with its seconds.
struct TimedResult {
  CliResult result;
  double seconds = 0;
};
inline TimedResult RunBounded(const std::string& args) {
  const auto start = std::chrono::steady_clock::now();
  TimedResult r;
  r.result = RunShell("timeout 20 '" + std::string(MESHPLAN_BINARY) + "' " + args + " 2>&1");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace meshplan::test
