// The two executables (cli/exec_handoff.h): `meshplan` links no LibTorch, lists every
// command, hands `run` / `calibrate` over to meshplan-exec and says what to do when it is
// missing; an unexpected error inside a command is one line and exit code 1, never an abort.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cli_run.h"

namespace meshplan {
namespace {

TEST_CASE("meshplan links no LibTorch", "[planner][cli][exec]") {
  const test::CliResult ldd = test::RunShell(std::string("ldd '") + MESHPLAN_BINARY + "'");
  REQUIRE(ldd.exit_code == 0);
  INFO(ldd.output);
  CHECK(ldd.output.find("libc.so") != std::string::npos);  // ldd really listed the libraries
  CHECK(ldd.output.find("torch") == std::string::npos);
  CHECK(ldd.output.find("libc10") == std::string::npos);
}

TEST_CASE("meshplan --help lists the executor's commands too", "[planner][cli][exec]") {
  const test::CliResult help = test::RunMeshplan("--help");
  REQUIRE(help.exit_code == 0);
  for (const char* command : {"estimate", "search", "simulate", "run", "calibrate", "compare",
                              "measurements", "shrink"}) {
    INFO(command);
    CHECK(help.output.find(std::string("  ") + command) != std::string::npos);
  }
}

TEST_CASE("run and calibrate without meshplan-exec: exit 2 naming what to install",
          "[planner][cli][exec]") {
  for (const char* command : {"run plan.yaml --nproc 2", "calibrate --quick"}) {
    INFO(command);
    const test::CliResult r = test::RunShell(std::string("MESHPLAN_EXEC=/nonexistent/meshplan-exec '") +
                                             MESHPLAN_BINARY + "' " + command + " 2>&1");
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("/nonexistent/meshplan-exec") != std::string::npos);
    CHECK(r.output.find("scripts/install_torch_wheel.sh") != std::string::npos);
    CHECK(r.output.find("MESHPLAN_EXEC") != std::string::npos);
  }
}

TEST_CASE("the hand-over keeps the arguments, the exit code and the process",
          "[planner][cli][exec]") {
  // A stand-in executor that reports its pid, arguments and exits with a chosen code.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("meshplan_handoff_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path fake = dir / "meshplan-exec";
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\necho \"pid=$$ args=$*\"\nexit 7\n";
  }
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const test::CliResult r = test::RunShell(
      "MESHPLAN_EXEC='" + fake.string() + "' sh -c 'echo shell=$$; exec \"$0\" run plan.yaml " +
      "--nproc \"two words\"' '" + MESHPLAN_BINARY + "' 2>&1");
  std::filesystem::remove_all(dir);
  INFO(r.output);
  CHECK(r.exit_code == 7);
  CHECK(r.output.find("args=run plan.yaml --nproc two words") != std::string::npos);
  // exec, not fork: the stand-in runs in the process the shell exec'ed meshplan into.
  const size_t shell = r.output.find("shell="), pid = r.output.find("pid=");
  REQUIRE(shell != std::string::npos);
  REQUIRE(pid != std::string::npos);
  const std::string shell_pid = r.output.substr(shell + 6, r.output.find('\n', shell) - shell - 6);
  const std::string exec_pid = r.output.substr(pid + 4, r.output.find(' ', pid) - pid - 4);
  CHECK(shell_pid == exec_pid);
}

TEST_CASE("an unexpected error in a command is one line and exit 1, never an abort",
          "[planner][cli][exec]") {
  // A number no double holds: nlohmann::json throws out_of_range from deep in the loader.
  const std::filesystem::path config =
      std::filesystem::temp_directory_path() / ("meshplan_huge_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(config);
    out << R"({"model_type": "llama", "hidden_size": 1e400})";
  }
  const test::CliResult r =
      test::RunMeshplan("estimate --model '" + config.string() + "' --cluster 8xH100");
  std::filesystem::remove(config);
  INFO(r.output);
  CHECK((r.exit_code == 1 || r.exit_code == 2));
  CHECK(r.output.find("meshplan") == 0);
  CHECK(r.output.find('\n') == r.output.size() - 1);  // exactly one line
}

}  // namespace
}  // namespace meshplan
