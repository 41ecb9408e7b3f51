// Running the meshplan binary (or any shell command) from a test: its exit code and output.
#pragma once

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

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

}  // namespace meshplan::test
