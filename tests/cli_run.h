// Running the meshplan binary (or any shell command) from a test: its exit code and output.
#pragma once

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/scratch_dir.h"

namespace meshplan::test {

struct CliResult {
  int exit_code = -1;  // -1 when the command did not exit normally
  std::string output;  // stdout (and stderr unless it was redirected elsewhere)
};

// Runs `command` through the shell and collects its stdout.
inline CliResult RunShell(const std::string& command) {
  CliResult r;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `meshplan ARGS` (the binary under test, MESHPLAN_BINARY); stderr joins the output unless
// with_stderr is false (then it is dropped).
inline CliResult RunMeshplan(const std::string& args, bool with_stderr = true) {
  return RunShell(std::string("'") + MESHPLAN_BINARY + "' " + args +
                  (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

// `meshplan ARGS` with stdout and stderr into <tag>.log of `scratch`; the exit code (128
// when it did not exit normally).
inline int RunMeshplanLogged(const ScratchDir& scratch, const std::string& tag,
                             const std::string& args) {
  const std::string command = std::string("'") + MESHPLAN_BINARY + "' " + args + " > '" +
                              scratch.Path(tag + ".log") + "' 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

}  // namespace meshplan::test
