// `meshplan run` end to end on CPU: --nproc 2 trains a tiny plan and writes
// measured.json; a rank that fails (hidden --fail-* flags) ends the whole run with
// a message naming it, within the bound, leaving no process behind; a rank that hangs
// (SIGSTOP, or stuck while its heartbeat goes on) is named and the run ends within 30 s;
// a rank that fails on bad input is named, not the peer left waiting; a NaN loss stops the
// run at its step with measured.json of the steps before; bad plans, flags out of range,
// unwritable outputs and a --nproc that is not the plan's world size exit 2 before any
// rank starts; the binary also runs as ranks started by someone else (torchrun's
// variables).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include "tests/scratch_dir.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A scratch directory whose unique path also marks every process of one test run.
struct Scratch : test::ScratchDir {
  Scratch() : test::ScratchDir("meshplan_run_test") {}
};

// A tiny plan (tiny-llama, 4 sequences of 32 tokens, fp32): seconds on CPU.
std::string TinyPlan(const std::string& plan_section) {
  return "model: tiny-llama\n"
         "cluster: 2xa40-pcie\n"
         "training:\n"
         "  global_batch: 4\n"
         "  seq_len: 32\n"
         "  precision: fp32\n"
         "  steps: 4\n"
         "plan:\n" +
         plan_section;
}

struct Outcome {
  int exit_code = -1;  // 128 + signal when killed
  double elapsed_s = 0;
  std::string out, err;
};

// Runs the meshplan binary with `args` (and extra environment), stdout/stderr into
// files of `scratch` named by `tag`; kills it after 120 s so a hang fails the test
// instead of blocking CTest.
pid_t Start(const Scratch& scratch, const std::string& tag, const std::vector<std::string>& args,
            const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> argv = {MESHPLAN_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string out = scratch.Path(tag + ".out"), err = scratch.Path(tag + ".err");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> c;
    for (auto& a : argv) c.push_back(a.data());
    c.push_back(nullptr);
    ::execv(c[0], c.data());
    ::_exit(127);
  }
  return pid;
}

Outcome Wait(const Scratch& scratch, const std::string& tag, pid_t pid, Clock::time_point start) {
  Outcome outcome;
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (Clock::now() - start > std::chrono::seconds(120)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  outcome.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.out = scratch.Read(tag + ".out");
  outcome.err = scratch.Read(tag + ".err");
  return outcome;
}

Outcome Run(const Scratch& scratch, const std::vector<std::string>& args) {
  const auto start = Clock::now();
  return Wait(scratch, "run", Start(scratch, "run", args), start);
}

// Processes whose command line mentions `marker` (the scratch directory), not zombies.
std::vector<std::string> ProcessesMentioning(const std::string& marker) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(entry.path() / "cmdline", std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    if (text.find(marker) == std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const auto paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z') continue;
    found.push_back(name);
  }
  return found;
}

// Waits up to 3 s for every process of this run to be gone.
bool NothingLeft(const std::string& marker) {
  for (int i = 0; i < 150; ++i) {
    if (ProcessesMentioning(marker).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST_CASE("meshplan run --nproc 2 trains a tiny plan and writes measured.json",
          "[executor][launcher][run]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n  zero: 1\n"));
  const Outcome run = Run(scratch, {"run", scratch.Path("plan.yaml"), "--nproc", "2", "--steps",
                                    "3", "--warmup", "1", "--out", scratch.Path("measured.json")});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("[rank 0] "));  // rank 0's summary, prefixed
  const nlohmann::json measured = nlohmann::json::parse(scratch.Read("measured.json"));
  CHECK(measured.at("steps") == 3);
  CHECK(measured.at("environment").at("world_size") == 2);
  REQUIRE(measured.at("ranks").size() == 2);
  for (const auto& rank : measured.at("ranks")) CHECK(rank.at("peak_memory_bytes") > 0);
  CHECK(NothingLeft(scratch.dir.string()));
}

TEST_CASE("meshplan run: a rank that fails ends the run, named, within the bound",
          "[executor][launcher][run]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n"));
  const auto [mode, cause] = GENERATE(std::make_pair(std::string("exit"), std::string("exited with code 3")),
                                      std::make_pair(std::string("kill"), std::string("killed by signal 9")));
  const Outcome run =
      Run(scratch, {"run", scratch.Path("plan.yaml"), "--nproc", "2", "--steps", "4", "--out",
                    scratch.Path("measured.json"), "--fail-rank", "1", "--fail-at-step", "1",
                    "--fail-mode", mode});
  INFO(run.out << run.err);
  CHECK(run.exit_code != 0);
  CHECK(run.elapsed_s < 20);
  CHECK_THAT(run.err, Catch::Contains("rank 1") && Catch::Contains(cause));
  CHECK_FALSE(fs::exists(scratch.Path("measured.json")));
  CHECK(NothingLeft(scratch.dir.string()));
}

TEST_CASE("meshplan run: a rank that hangs makes its peer time out, and the run ends naming it",
          "[executor][launcher][run]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n"));
  // Rank 1's training thread sleeps after step 1 (its heartbeat goes on): rank 0 times out
  // waiting in step 2, and the launcher names rank 1, which is behind in its milestones.
  const Outcome run =
      Run(scratch, {"run", scratch.Path("plan.yaml"), "--nproc", "2", "--steps", "4", "--out",
                    scratch.Path("measured.json"), "--comm-timeout", "3", "--fail-rank", "1",
                    "--fail-at-step", "1", "--fail-mode", "hang"});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 124);
  CHECK(run.elapsed_s < 20);
  CHECK_THAT(run.err, Catch::Contains("failed: rank 1") && Catch::Contains("stopped making progress") &&
                          Catch::Contains("rank 0 failed waiting for it"));
  CHECK(NothingLeft(scratch.dir.string()));
}

TEST_CASE("meshplan run: a stopped rank (SIGSTOP) ends the run within 30 s with the default "
          "timeout, naming it", "[executor][launcher][run][hang]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n"));
  // The default --comm-timeout (60 s) would end it at 70 s; the heartbeat bound is 10 s.
  const Outcome run =
      Run(scratch, {"run", scratch.Path("plan.yaml"), "--nproc", "2", "--steps", "4", "--out",
                    scratch.Path("measured.json"), "--fail-rank", "1", "--fail-at-step", "1",
                    "--fail-mode", "stop"});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 124);
  CHECK(run.elapsed_s < 30);
  CHECK_THAT(run.err, Catch::Contains("failed: rank 1") && Catch::Contains("hung: no heartbeat") &&
                          Catch::Contains("it is stopped") && Catch::Contains("stopped ranks 0"));
  CHECK_FALSE(fs::exists(scratch.Path("measured.json")));
  CHECK(NothingLeft(scratch.dir.string()));
}

TEST_CASE("meshplan run: the rank that fails on bad input is named, not the peer waiting for it",
          "[executor][launcher][run]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n"));
  SECTION("a token file whose bad id only rank 1 reads") {
    // 4 windows of 33 uint16 tokens; dp rank 1 reads windows 2 and 3 at step 1.
    std::vector<uint16_t> tokens(4 * 33, 7);
    tokens[2 * 33 + 5] = 60000;  // tiny-llama has 8192 tokens
    std::ofstream(scratch.Path("bad.tokens"), std::ios::binary)
        .write(reinterpret_cast<const char*>(tokens.data()),
               static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
    for (int attempt = 0; attempt < 3; ++attempt) {
      const Outcome run = Run(scratch, {"run", scratch.Path("plan.yaml"), "--nproc", "2", "--steps",
                                        "2", "--warmup", "0", "--data", scratch.Path("bad.tokens"),
                                        "--out", scratch.Path("measured.json")});
      INFO("attempt " << attempt << "\n" << run.out << run.err);
      CHECK(run.exit_code == 2);
      CHECK_THAT(run.err, Catch::Contains("failed: rank 1") && Catch::Contains("bad.tokens") &&
                              Catch::Contains("--data") && Catch::Contains("60000"));
      CHECK(NothingLeft(scratch.dir.string()));
    }
  }
  SECTION("a snapshot whose rank 1 file was damaged") {
    scratch.Write("plan.yaml", TinyPlan("  dp: 2\n  zero: 1\n"));  // a file per rank
    const Outcome save =
        Run(scratch, {"run", scratch.Path("plan.yaml"), "--nproc", "2", "--steps", "2", "--warmup",
                      "0", "--save-every", "2", "--snapshot", scratch.Path("snap"), "--out",
                      scratch.Path("first.json")});
    INFO(save.out << save.err);
    REQUIRE(save.exit_code == 0);
    const std::string file = scratch.Path("snap/step_00000002/rank_00001.bin");
    REQUIRE(fs::exists(file));
    {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-1000, std::ios::end);  // inside rank 1's Adam state
      f.put('\x7f');
    }
    for (int attempt = 0; attempt < 3; ++attempt) {
      const Outcome run = Run(scratch, {"run", scratch.Path("plan.yaml"), "--nproc", "2", "--steps",
                                        "4", "--resume", scratch.Path("snap"), "--out",
                                        scratch.Path("measured.json")});
      INFO("attempt " << attempt << "\n" << run.out << run.err);
      CHECK(run.exit_code == 2);
      CHECK_THAT(run.err, Catch::Contains("failed: rank 1") && Catch::Contains(file) &&
                              Catch::Contains("checksum: "));
      CHECK_THAT(run.err, Catch::Contains("[rank 0] meshplan: error: ") &&
                              Catch::Contains("rank 1 refused its snapshot file"));
      CHECK_FALSE(fs::exists(scratch.Path("measured.json")));
      CHECK(NothingLeft(scratch.dir.string()));
    }
  }
}

TEST_CASE("meshplan run: a NaN loss stops the run at its step and keeps what was measured",
          "[executor][launcher][run]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n"));
  // Rank 1's parameters become NaN after step 2: step 3's loss is NaN on every rank.
  const Outcome run =
      Run(scratch, {"run", scratch.Path("plan.yaml"), "--nproc", "2", "--steps", "6", "--warmup",
                    "1", "--out", scratch.Path("measured.json"), "--fail-rank", "1",
                    "--fail-at-step", "2", "--fail-mode", "nan"});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 1);
  CHECK(run.elapsed_s < 30);
  CHECK_THAT(run.err, Catch::Contains("step 3: the loss is nan") &&
                          Catch::Contains("rank 1: micro-batch 0 gave the first non-finite loss") &&
                          Catch::Contains("measured.json holds the 2 step(s) done before"));
  const nlohmann::json measured = nlohmann::json::parse(scratch.Read("measured.json"));
  CHECK(measured.at("steps") == 2);
  CHECK(measured.at("losses").size() == 2);
  CHECK(measured.at("step_times_s").size() == 2);
  CHECK_THAT(measured.at("stop_reason").get<std::string>(),
             Catch::Contains("step 3: the loss is nan") && Catch::Contains("rank 1"));
  // And `meshplan compare` reads it.
  const Outcome compare = Run(scratch, {"compare", scratch.Path("plan.yaml"), scratch.Path("measured.json")});
  INFO(compare.out << compare.err);
  CHECK(compare.exit_code == 0);
  CHECK(NothingLeft(scratch.dir.string()));
}

TEST_CASE("meshplan run: outputs that cannot be written are refused before any rank starts",
          "[executor][launcher][run]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n"));
  const std::string plan = scratch.Path("plan.yaml");
  struct Case {
    std::vector<std::string> args;
    std::string flag;
  };
  // Paths inside this run's scratch directory (a new one for every generated case).
  const std::vector<Case> cases = {
      {{"--out", scratch.Path("no/such/dir/measured.json")}, "--out"},
      {{"--out", scratch.dir.string()}, "--out"},
      {{"--out", scratch.Path("plan.yaml/measured.json")}, "--out"},
      {{"--save-every", "1", "--snapshot", scratch.Path("no/such/snap")}, "--snapshot"},
      {{"--save-every", "1", "--snapshot", scratch.Path("plan.yaml")}, "--snapshot"}};
  const Case& c = cases[static_cast<size_t>(GENERATE(range(0, 5)))];
  std::vector<std::string> args = {"run", plan, "--steps", "4"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  if (c.flag != "--out") args.insert(args.end(), {"--out", scratch.Path("m.json")});
  const Outcome run = Run(scratch, args);
  INFO(run.out << run.err);
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.err, Catch::Contains(c.flag));
  CHECK_THAT(run.out + run.err, !Catch::Contains("[rank"));
  CHECK(run.elapsed_s < 10);
}

TEST_CASE("meshplan run: flags out of range are refused, naming the flag",
          "[executor][launcher][run]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n"));
  const auto [flag, value] = GENERATE(
      std::make_pair(std::string("--comm-timeout"), std::string("0.5")),
      std::make_pair(std::string("--comm-timeout"), std::string("0")),
      std::make_pair(std::string("--comm-timeout"), std::string("-3")),
      std::make_pair(std::string("--comm-timeout"), std::string("nan")),
      std::make_pair(std::string("--comm-timeout"), std::string("inf")),
      std::make_pair(std::string("--comm-timeout"), std::string("1e300")),
      std::make_pair(std::string("--comm-timeout"), std::string("86401")),
      std::make_pair(std::string("--steps"), std::string("99999999999999999999")),
      std::make_pair(std::string("--steps"), std::string("100000000")),
      std::make_pair(std::string("--steps"), std::string("-1")),
      std::make_pair(std::string("--steps"), std::string("1e3")),
      std::make_pair(std::string("--warmup"), std::string("99999999999999999999")),
      std::make_pair(std::string("--warmup"), std::string("-5")),
      std::make_pair(std::string("--nproc"), std::string("0")),
      std::make_pair(std::string("--nproc"), std::string("2.5")),
      std::make_pair(std::string("--nproc"), std::string("99999")),
      std::make_pair(std::string("--save-every"), std::string("-1")),
      std::make_pair(std::string("--save-every"), std::string("99999999999999999999")),
      std::make_pair(std::string("--seed"), std::string("-1")),
      std::make_pair(std::string("--seed"), std::string("18446744073709551616")),
      std::make_pair(std::string("--seed"), std::string("1.5")),
      std::make_pair(std::string("--cpu-bind"), std::string("socket")));
  const Outcome run = Run(scratch, {"run", scratch.Path("plan.yaml"), flag, value, "--out",
                                    scratch.Path("m.json")});
  INFO(flag << " " << value << "\n" << run.out << run.err);
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.err, Catch::Contains(flag));
  CHECK_THAT(run.out + run.err, !Catch::Contains("[rank"));
  CHECK(run.elapsed_s < 10);
}

TEST_CASE("meshplan run refuses bad plans and a wrong --nproc before any rank starts",
          "[executor][launcher][run]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n"));
  scratch.Write("bad_tp.yaml", TinyPlan("  tp: 3\n"));  // tiny-llama has 8 heads
  const Outcome mismatch =
      Run(scratch, {"run", scratch.Path("plan.yaml"), "--nproc", "3", "--out", scratch.Path("m.json")});
  CHECK(mismatch.exit_code == 2);
  CHECK_THAT(mismatch.err, Catch::Contains("world_size") && Catch::Contains("3"));
  CHECK_THAT(mismatch.out + mismatch.err, !Catch::Contains("[rank"));

  const Outcome bad = Run(scratch, {"run", scratch.Path("bad_tp.yaml"), "--out", scratch.Path("m.json")});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("tp_divides_heads"));
  CHECK_THAT(bad.out + bad.err, !Catch::Contains("[rank"));

  scratch.Write("bad_pp.yaml", TinyPlan("  pp: 3\n"));  // tiny-llama has 4 layers
  const Outcome bad_pp = Run(scratch, {"run", scratch.Path("bad_pp.yaml"), "--out", scratch.Path("m.json")});
  CHECK(bad_pp.exit_code == 2);
  CHECK_THAT(bad_pp.err, Catch::Contains("pp_divides_layers") && Catch::Contains("bad_pp.yaml"));
  CHECK_THAT(bad_pp.out + bad_pp.err, !Catch::Contains("[rank"));

  scratch.Write("bad_cp.yaml", TinyPlan("  cp: 3\n"));  // seq_len 32 does not split into 6 chunks
  const Outcome bad_cp = Run(scratch, {"run", scratch.Path("bad_cp.yaml"), "--out", scratch.Path("m.json")});
  CHECK(bad_cp.exit_code == 2);
  CHECK_THAT(bad_cp.err, Catch::Contains("cp_divides_seq") && Catch::Contains("bad_cp.yaml"));
  CHECK_THAT(bad_cp.out + bad_cp.err, !Catch::Contains("[rank"));

  const Outcome missing = Run(scratch, {"run", scratch.Path("nope.yaml")});
  CHECK(missing.exit_code == 2);
}

TEST_CASE("meshplan run: --device and --backend are checked before any rank starts",
          "[executor][launcher][run]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n"));
  const std::string plan = scratch.Path("plan.yaml"), out = scratch.Path("m.json");
  const Outcome device = Run(scratch, {"run", plan, "--device", "tpu", "--out", out});
  CHECK(device.exit_code == 2);
  CHECK_THAT(device.err, Catch::Contains("--device") && Catch::Contains("auto, cpu, cuda") &&
                             Catch::Contains("tpu"));
  const Outcome backend = Run(scratch, {"run", plan, "--backend", "mpi", "--out", out});
  CHECK(backend.exit_code == 2);
  CHECK_THAT(backend.err, Catch::Contains("--backend") && Catch::Contains("gloo, nccl"));
  // NCCL needs a GPU per rank: refused on CPU ranks, with the reason.
  const Outcome nccl = Run(scratch, {"run", plan, "--device", "cpu", "--backend", "nccl", "--out", out});
  CHECK(nccl.exit_code == 2);
  CHECK_THAT(nccl.err, Catch::Contains("--backend") && Catch::Contains("use gloo"));
  CHECK_THAT(nccl.out + nccl.err, !Catch::Contains("[rank"));
  // Without a CUDA LibTorch and a GPU (CI), --device cuda is refused, saying why.
  const Outcome cuda = Run(scratch, {"run", plan, "--device", "cuda", "--steps", "2", "--warmup",
                                     "0", "--out", out});
  if (cuda.exit_code != 0) {
    CHECK(cuda.exit_code == 2);
    CHECK_THAT(cuda.err, Catch::Contains("--device") && Catch::Contains("cuda: "));
  }
}

TEST_CASE("meshplan run trains mixed precision on CPU ranks and says which attention ran",
          "[executor][launcher][run]") {
  Scratch scratch;
  std::string plan = TinyPlan("  dp: 2\n  zero: 2\n");
  const size_t at = plan.find("precision: fp32");
  REQUIRE(at != std::string::npos);
  plan.replace(at, std::string("precision: fp32").size(), "precision: mixed");
  scratch.Write("plan.yaml", plan);
  const Outcome run = Run(scratch, {"run", scratch.Path("plan.yaml"), "--device", "cpu", "--steps",
                                    "2", "--warmup", "0", "--out", scratch.Path("measured.json")});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json measured = nlohmann::json::parse(scratch.Read("measured.json"));
  CHECK(measured.at("environment").at("precision") == "mixed");
  CHECK(measured.at("environment").at("device") == "cpu");
  CHECK(measured.at("environment").at("attention") == "naive");  // fused needs CUDA
  for (const auto& rank : measured.at("ranks")) CHECK(rank.at("peak_reserved_bytes") == 0);
}

// A free TCP port on 127.0.0.1 (closed again: the rank 0 process binds it next).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST_CASE("meshplan run as ranks started by another launcher (torchrun variables)",
          "[executor][launcher][run]") {
  Scratch scratch;
  scratch.Write("plan.yaml", TinyPlan("  dp: 2\n"));
  const std::string port = std::to_string(FreePort());
  const auto start = Clock::now();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r)
    pids.push_back(Start(scratch, "rank" + std::to_string(r),
                         {"run", scratch.Path("plan.yaml"), "--steps", "2", "--warmup", "0",
                          "--out", scratch.Path("measured.json")},
                         {{"RANK", std::to_string(r)},
                          {"WORLD_SIZE", "2"},
                          {"LOCAL_RANK", std::to_string(r)},
                          {"MASTER_ADDR", "127.0.0.1"},
                          {"MASTER_PORT", port}}));
  for (int r = 0; r < 2; ++r) {
    const Outcome rank = Wait(scratch, "rank" + std::to_string(r), pids[r], start);
    INFO("rank " << r << ": " << rank.out << rank.err);
    CHECK(rank.exit_code == 0);
  }
  const nlohmann::json measured = nlohmann::json::parse(scratch.Read("measured.json"));
  CHECK(measured.at("environment").at("world_size") == 2);
}

}  // namespace
}  // namespace meshplan
