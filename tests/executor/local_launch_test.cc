// LaunchLocalRanks with /bin/sh as the rank program: environment, prefixed output, core
// binding (bind_cores), and supervision (a failing rank stops the others within the bound,
// nothing left behind; the status pipe: a rank that stops its heartbeats is hung, and the
// rank that failed on its own is named, not the peer that failed waiting for it).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "executor/launch/launcher.h"
#include "executor/launch/rank_status.h"

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

// Restores (or removes) one variable of this process's environment when it goes.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) saved_ = v, had_ = true;
  }
  ~ScopedEnv() { had_ ? ::setenv(name_, saved_.c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::string saved_;
  bool had_ = false;
};

TEST_CASE("launcher: each rank's OMP_NUM_THREADS is threads_per_rank, else cores / N, one "
          "already set wins", "[executor][launcher]") {
  ScopedEnv restore("OMP_NUM_THREADS");
  const auto threads_seen = [](int threads_per_rank) {
    Scratch scratch;
    LaunchOptions options = Shell(scratch, 2, "echo \"threads=$OMP_NUM_THREADS\"");
    options.threads_per_rank = threads_per_rank;
    REQUIRE(LaunchLocalRanks(options).exit_code == 0);
    return scratch.Read("out");
  };
  ::unsetenv("OMP_NUM_THREADS");
  std::string out = threads_seen(3);  // a CPU profile calibrated with --threads 3
  CHECK_THAT(out, Catch::Contains("[rank 0] threads=3\n") && Catch::Contains("[rank 1] threads=3\n"));
  out = threads_seen(0);
  const std::string share = std::to_string(std::max(1, UsableCores() / 2));
  CHECK_THAT(out, Catch::Contains("[rank 0] threads=" + share + "\n") &&
                      Catch::Contains("[rank 1] threads=" + share + "\n"));
  ::setenv("OMP_NUM_THREADS", "5", 1);
  out = threads_seen(3);
  CHECK_THAT(out, Catch::Contains("[rank 0] threads=5\n") && Catch::Contains("[rank 1] threads=5\n"));
}

// The cores of a "Cpus_allowed_list:" line of /proc/PID/status ("0-2,5").
std::vector<int> ParseCpuList(const std::string& list) {
  std::vector<int> cores;
  std::stringstream ss(list);
  std::string range;
  while (std::getline(ss, range, ',')) {
    const auto dash = range.find('-');
    const int first = std::stoi(range.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
    for (int c = first; c <= last; ++c) cores.push_back(c);
  }
  return cores;
}

// Rank r's cores, as the rank's shell saw them ("[rank R] cores LIST" lines of `out`).
std::vector<int> RankCores(const std::string& out, int rank) {
  const std::string tag = "[rank " + std::to_string(rank) + "] cores ";
  const auto at = out.find(tag);
  if (at == std::string::npos) return {};
  const auto end = out.find('\n', at);
  return ParseCpuList(out.substr(at + tag.size(), end - at - tag.size()));
}

TEST_CASE("launcher: bind_cores runs each rank on its own slice of the cores", "[executor][launcher]") {
  const std::vector<int> all = CoreSlice(0, 1);  // every core of this process
  REQUIRE(!all.empty());
  const std::string script = "echo \"cores $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)\"";

  SECTION("slices: equal, disjoint, in order, within the process's cores") {
    const int n = static_cast<int>(all.size());
    for (int nproc = 1; nproc <= n; ++nproc) {
      std::vector<int> joined;
      for (int r = 0; r < nproc; ++r) {
        const std::vector<int> slice = CoreSlice(r, nproc);
        CHECK(slice.size() == all.size() / static_cast<size_t>(nproc));
        joined.insert(joined.end(), slice.begin(), slice.end());
      }
      CHECK(std::equal(joined.begin(), joined.end(), all.begin()));  // a prefix of `all`
    }
    CHECK(CoreSlice(0, n + 1).empty());  // more ranks than cores: not bound
    CHECK(CoreSlice(2, 2).empty());
    CHECK(CoreSlice(-1, 2).empty());
  }
  SECTION("ranks start on their slice; unbound without bind_cores") {
    const int nproc = std::min<int>(2, static_cast<int>(all.size()));
    for (const bool bind : {true, false}) {
      INFO("bind_cores " << bind);
      Scratch scratch;
      LaunchOptions options = Shell(scratch, nproc, script);
      options.bind_cores = bind;
      REQUIRE(LaunchLocalRanks(options).exit_code == 0);
      const std::string out = scratch.Read("out");
      for (int r = 0; r < nproc; ++r)
        CHECK(RankCores(out, r) == (bind ? CoreSlice(r, nproc) : all));
    }
  }
  SECTION("more ranks than cores: every rank keeps every core") {
    Scratch scratch;
    const int nproc = static_cast<int>(all.size()) + 1;
    LaunchOptions options = Shell(scratch, nproc, script);
    options.bind_cores = true;
    REQUIRE(LaunchLocalRanks(options).exit_code == 0);
    for (int r = 0; r < nproc; ++r) CHECK(RankCores(scratch.Read("out"), r) == all);
  }
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

// ---------------------------------------------------------------------------------------
// The status pipe (executor/launch/rank_status.h): the rank's side, then spoken by hand
// from the shell (fd 3).

TEST_CASE("RankStatus beats with its milestones and reports a failure on one line",
          "[executor][launcher][status]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const std::string fd_text = std::to_string(fds[1]);
  {
    RankStatus status([&](const char* name) -> const char* {
      return std::string(name) == kStatusFdVariable ? fd_text.c_str() : nullptr;
    });
    CHECK(status.active());
    status.Milestone();
    status.Milestone();
    std::this_thread::sleep_for(kHeartbeatPeriod + std::chrono::milliseconds(200));
    status.ReportFailure(FailureKind::kOwn, "plan.yaml: --data:\ntoken 7 is 9000");
  }  // the heartbeat thread stops
  ::close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  ::close(fds[0]);
  INFO(text);
  CHECK(text.rfind("beat ", 0) == 0);  // the first beat at once
  CHECK_THAT(text, Catch::Contains("\nbeat 2 "));
  CHECK_THAT(text, Catch::Contains("\nfail own ") &&
                       Catch::EndsWith(" plan.yaml: --data: token 7 is 9000\n"));

  RankStatus none([](const char*) -> const char* { return nullptr; });
  CHECK_FALSE(none.active());
  none.ReportFailure(FailureKind::kPeer, "nothing happens");
}

TEST_CASE("launcher: every rank gets a status pipe on fd 3", "[executor][launcher][status]") {
  Scratch scratch;
  const LaunchResult result = LaunchLocalRanks(
      Shell(scratch, 2, "echo \"fd=$MESHPLAN_STATUS_FD\"; echo 'beat 1 0' >&3 && echo written"));
  CHECK(result.exit_code == 0);
  const std::string out = scratch.Read("out");
  CHECK_THAT(out, Catch::Contains("[rank 0] fd=3\n") && Catch::Contains("[rank 1] fd=3\n"));
  CHECK_THAT(out, Catch::Contains("[rank 0] written") && Catch::Contains("[rank 1] written"));
}

TEST_CASE("launcher: a rank whose heartbeats stop is declared hung, named and killed",
          "[executor][launcher][status]") {
  Scratch scratch;
  // Rank 0 beats on; rank 1 beats once, then stops itself (SIGSTOP: what a hang looks like).
  LaunchOptions options = Shell(
      scratch, 2,
      "if [ \"$RANK\" = 1 ]; then echo 'beat 2 0' >&3; sleep 0.3; kill -STOP $$; fi; "
      "while true; do echo 'beat 5 0' >&3; sleep 0.1; done");
  options.hang_bound = std::chrono::milliseconds(1500);
  const auto start = Clock::now();
  const LaunchResult result = LaunchLocalRanks(options);
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  INFO(result.failure << "\n" << scratch.Read("err"));
  CHECK(elapsed_s < 6);  // 0.3 s + the 1.5 s bound, then SIGKILL / SIGTERM
  CHECK(result.failed_rank == 1);
  CHECK(result.exit_code == kExitHung);
  CHECK_THAT(result.failure, Catch::Contains("rank 1") && Catch::Contains("hung") &&
                                 Catch::Contains("no heartbeat") && Catch::Contains("stopped"));
  CHECK(result.ranks[1].hung);
  CHECK(result.ranks[1].signal == SIGKILL);
  CHECK(result.ranks[0].stopped_by_launcher);
  for (const RankExit& e : result.ranks) CHECK(GoneSoon(e.pid));
}

TEST_CASE("launcher: the rank that failed on its own is named, not the peer that failed waiting",
          "[executor][launcher][status]") {
  Scratch scratch;
  // Rank 0 fails on bad input but is slow to exit; rank 1, whose collective broke, exits
  // first. The launcher still names rank 0 and returns its code.
  const LaunchResult result = LaunchLocalRanks(Shell(
      scratch, 2,
      "echo 'beat 3 0' >&3; "
      "if [ \"$RANK\" = 0 ]; then echo 'fail own 100 bad.tokens: --data: token 71 is 60000' >&3; "
      "sleep 0.5; exit 2; fi; "
      "sleep 0.1; echo 'fail peer 200 gloo allreduce: connection closed by peer' >&3; exit 1"));
  INFO(scratch.Read("err"));
  CHECK(result.failed_rank == 0);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.failure, Catch::Contains("rank 0") && Catch::Contains("token 71 is 60000"));
  CHECK(result.ranks[0].reported == "bad.tokens: --data: token 71 is 60000");
}

TEST_CASE("launcher: when a peer times out, the silent or stuck rank is named",
          "[executor][launcher][status]") {
  Scratch scratch;
  const bool stopped = GENERATE(true, false);
  INFO((stopped ? "rank 1 stopped (SIGSTOP)" : "rank 1 alive, stuck at an earlier milestone"));
  // Rank 0 reaches milestone 5 and waits; its wait times out after 2.5 s. Rank 1 stays at
  // milestone 4: stopped (no heartbeats), or beating but not moving on.
  const std::string rank1 = stopped ? "echo 'beat 4 0' >&3; kill -STOP $$; "
                                    : "while true; do echo 'beat 4 0' >&3; sleep 0.1; done; ";
  LaunchOptions options = Shell(
      scratch, 2,
      "if [ \"$RANK\" = 1 ]; then " + rank1 + "fi; "
      "i=0; while [ $i -lt 25 ]; do echo 'beat 5 0' >&3; sleep 0.1; i=$((i+1)); done; "
      "echo 'fail peer 300 gloo allreduce: timed out' >&3; exit 1");
  options.hang_bound = std::chrono::seconds(60);  // the peer's timeout comes first
  const auto start = Clock::now();
  const LaunchResult result = LaunchLocalRanks(options);
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  INFO(result.failure << "\n" << scratch.Read("err"));
  CHECK(elapsed_s < 8);
  CHECK(result.failed_rank == 1);
  CHECK(result.exit_code == kExitHung);
  CHECK(result.ranks[1].hung);
  CHECK_THAT(result.failure, Catch::Contains("rank 1") && Catch::Contains("rank 0 failed waiting for it"));
  CHECK_THAT(result.failure, Catch::Contains(stopped ? "no heartbeat" : "stopped making progress"));
  for (const RankExit& e : result.ranks) CHECK(GoneSoon(e.pid));
}

TEST_CASE("launcher: ranks that never write to the status pipe are not watched for hangs",
          "[executor][launcher][status]") {
  Scratch scratch;
  LaunchOptions options = Shell(scratch, 2, "sleep 0.6; exit 0");
  options.hang_bound = std::chrono::milliseconds(100);
  const LaunchResult result = LaunchLocalRanks(options);
  CHECK(result.exit_code == 0);
  CHECK(result.failure.empty());
}

}  // namespace
}  // namespace meshplan
