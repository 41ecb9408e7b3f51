// LaunchLocalRanks with /bin/sh as the rank program: environment, prefixed output,
// and supervision (a failing rank stops the others within the bound, nothing left behind).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "executor/launch/launcher.h"

namespace meshplan {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// A scratch directory with the ranks' output files.
struct Scratch {
  fs::path dir;
  int out_fd = -1, err_fd = -1;
  Scratch() {
    char pattern[] = "/tmp/meshplan_launch_XXXXXX";
    dir = ::mkdtemp(pattern);
    out_fd = ::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    err_fd = ::open((dir / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  ~Scratch() {
    ::close(out_fd);
    ::close(err_fd);
    fs::remove_all(dir);
  }
  std::string Read(const char* name) const {
    std::ifstream in(dir / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

LaunchOptions Shell(const Scratch& scratch, int nproc, const std::string& script) {
  LaunchOptions options;
  options.nproc = nproc;
  options.exe = "/bin/sh";
  options.argv = {"sh", "-c", script};
  options.master_port = 29999;
  options.out_fd = scratch.out_fd;
  options.err_fd = scratch.err_fd;
  return options;
}

// Alive = exists and is not a zombie (a zombie has finished running).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// Waits up to 2 s (a SIGKILL is delivered asynchronously) for pid to be gone.
bool GoneSoon(pid_t pid) {
  for (int i = 0; i < 200 && Alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !Alive(pid);
}

TEST_CASE("launcher gives each rank its environment and prefixes its output",
          "[executor][launcher]") {
  Scratch scratch;
  const LaunchResult result = LaunchLocalRanks(Shell(
      scratch, 3,
      "echo \"hello $RANK/$WORLD_SIZE local=$LOCAL_RANK at $MASTER_ADDR:$MASTER_PORT "
      "agent=$TORCHELASTIC_USE_AGENT_STORE\"; echo oops >&2; printf 'no newline'"));
  CHECK(result.exit_code == 0);
  CHECK(result.failed_rank == -1);
  CHECK(result.failure.empty());
  const std::string out = scratch.Read("out"), err = scratch.Read("err");
  for (int r = 0; r < 3; ++r) {
    const std::string rank = std::to_string(r);
    CHECK_THAT(out, Catch::Contains("[rank " + rank + "] hello " + rank + "/3 local=" + rank +
                                    " at 127.0.0.1:29999 agent=True\n"));
    CHECK_THAT(out, Catch::Contains("[rank " + rank + "] no newline\n"));
    CHECK_THAT(err, Catch::Contains("[rank " + rank + "] oops\n"));
  }
  for (const RankExit& e : result.ranks) CHECK((e.exited && e.code == 0));
}

TEST_CASE("launcher: a failing rank stops the others and is named", "[executor][launcher]") {
  Scratch scratch;
  const auto start = Clock::now();
  const LaunchResult result = LaunchLocalRanks(
      Shell(scratch, 4, "if [ \"$RANK\" = 2 ]; then sleep 0.2; exit 3; fi; exec sleep 60"));
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  CHECK(elapsed_s < 10);  // the sleeping ranks die at SIGTERM
  CHECK(result.failed_rank == 2);
  CHECK(result.exit_code == 3);
  CHECK_THAT(result.failure, Catch::Contains("rank 2") && Catch::Contains("exited with code 3"));
  CHECK_THAT(scratch.Read("err"), Catch::Contains("[launcher] rank 2"));
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    const RankExit& e = result.ranks[r];
    CHECK(GoneSoon(e.pid));
    if (r != 2) {
      CHECK(e.stopped_by_launcher);
      CHECK(e.signal == SIGTERM);
    }
  }
}

TEST_CASE("launcher: a rank killed by a signal is reported with the signal",
          "[executor][launcher]") {
  Scratch scratch;
  const LaunchResult result = LaunchLocalRanks(
      Shell(scratch, 2, "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 60"));
  CHECK(result.failed_rank == 0);
  CHECK(result.exit_code == 128 + 9);
  CHECK_THAT(result.failure, Catch::Contains("rank 0") && Catch::Contains("killed by signal 9"));
  CHECK(GoneSoon(result.ranks[1].pid));
}

TEST_CASE("launcher: a rank that ignores SIGTERM is killed after the grace period",
          "[executor][launcher]") {
  Scratch scratch;
  // Rank 1 fails only once rank 0 ignores SIGTERM; otherwise the SIGTERM could land first.
  const std::string ready = (scratch.dir / "ready").string();
  LaunchOptions options = Shell(
      scratch, 2,
      "if [ \"$RANK\" = 1 ]; then while [ ! -e " + ready + " ]; do sleep 0.02; done; exit 1; fi; "
      "trap '' TERM; touch " + ready + "; sleep 60; sleep 60");
  options.stop_grace = std::chrono::milliseconds(500);
  const auto start = Clock::now();
  const LaunchResult result = LaunchLocalRanks(options);
  CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 10);
  CHECK(result.failed_rank == 1);
  CHECK(result.ranks[0].signal == SIGKILL);
}

TEST_CASE("launcher: nothing a rank started is left behind", "[executor][launcher]") {
  Scratch scratch;
  // The background sleep keeps the rank's stdout open after the rank has exited.
  const std::string pid_file = (scratch.dir / "bg.pid").string();
  const LaunchResult result =
      LaunchLocalRanks(Shell(scratch, 1, "sleep 60 & echo $! > " + pid_file + "; exit 0"));
  CHECK(result.exit_code == 0);
  std::ifstream in(pid_file);
  pid_t background = 0;
  in >> background;
  REQUIRE(background > 0);
  CHECK(GoneSoon(background));
}

TEST_CASE("launcher: a program that cannot be executed fails its rank", "[executor][launcher]") {
  Scratch scratch;
  LaunchOptions options = Shell(scratch, 2, "");
  options.exe = "/nonexistent/meshplan";
  const LaunchResult result = LaunchLocalRanks(options);
  CHECK(result.exit_code == 127);
  CHECK(result.failed_rank >= 0);
  CHECK_THAT(scratch.Read("err"), Catch::Contains("cannot execute"));
}

}  // namespace
}  // namespace meshplan
