#include "executor/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "executor/launch/rank_status.h"

extern char** environ;

namespace meshplan {
namespace {

using Clock = std::chrono::steady_clock;

// The one piece of process-wide mutable state: a signal handler can only talk to
// the supervision loop through a sig_atomic_t. Set while LaunchLocalRanks runs.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void OnStopSignal(int signal) { g_stop_signal = signal; }

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr auto kPollInterval = std::chrono::milliseconds(50);
// The rank's end of its status pipe (rank_status.h).
constexpr int kStatusFd = 3;
// After a rank failed because of a peer: how long to wait for the rank that failed on its
// own to report, before blaming anyone (a cause is written before its effect, so this only
// covers the reaping order of processes that die together).
constexpr auto kBlameWindow = std::chrono::milliseconds(250);
// A watched rank this long without a heartbeat, while a peer failed waiting, is the one
// the peer waited for (heartbeats come every kHeartbeatPeriod).
constexpr auto kSilentBound = 4 * kHeartbeatPeriod;
// More than this between two supervision rounds: the launcher itself was not running
// (suspended, starved), so the ranks' silence meanwhile says nothing about them.
constexpr auto kLauncherStall = std::chrono::seconds(2);
// After the last rank is reaped, how long to keep reading pipes a stray
// descendant may still hold open.
constexpr auto kDrainBound = std::chrono::seconds(1);

// Installs the stop-signal handlers (and ignores SIGPIPE) for one launch.
class SignalScope {
 public:
  SignalScope() {
    g_stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kStopSignals); ++i)
      sigaction(kStopSignals[i], &action, &saved_[i]);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &saved_pipe_);
  }
  ~SignalScope() {
    for (size_t i = 0; i < std::size(kStopSignals); ++i)
      sigaction(kStopSignals[i], &saved_[i], nullptr);
    sigaction(SIGPIPE, &saved_pipe_, nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  struct sigaction saved_[std::size(kStopSignals)] {};
  struct sigaction saved_pipe_ {};
};

void WriteAll(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader is gone: drop the output, keep supervising
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// One output stream of one rank: the pipe's read end and the unfinished line.
struct Stream {
  int fd = -1;
  int sink = -1;
  std::string prefix;
  std::string partial;
  Clock::time_point closed_at = Clock::time_point::max();  // end of file seen

  // Reads what is there and forwards complete lines; closes on end of file.
  void Pump() {
    char buffer[1 << 16];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      Close();
      return;
    }
    partial.append(buffer, static_cast<size_t>(n));
    std::string out;
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1)
      out += prefix + partial.substr(start, nl + 1 - start);
    partial.erase(0, start);
    if (!out.empty()) WriteAll(sink, out);
  }
  void Close() {
    if (fd < 0) return;
    if (!partial.empty()) WriteAll(sink, prefix + partial + "\n");
    partial.clear();
    ::close(fd);
    fd = -1;
    closed_at = std::min(closed_at, Clock::now());
  }
};

int64_t Ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// What a rank said on its status pipe (rank_status.h). Lines that do not parse are ignored.
struct StatusChannel {
  int fd = -1;
  std::string partial;
  int64_t beats = 0;
  Clock::time_point last_beat_at{};  // when we read its last heartbeat
  int64_t milestones = -1;           // -1: none reported
  int64_t milestone_ns = 0;          // when it passed the last one (CLOCK_MONOTONIC)
  std::optional<FailureKind> failed;
  int64_t failed_ns = 0;
  Clock::time_point reported_at{};  // when we read its failure line
  std::string why;

  void Pump() {
    char buffer[1 << 14];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      Close();
      return;
    }
    partial.append(buffer, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1)
      Parse(std::string_view(partial).substr(start, nl - start));
    partial.erase(0, start);
    if (partial.size() > (1 << 16)) partial.clear();  // not our protocol
  }
  void Close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

 private:
  static bool Int(std::string_view& text, int64_t* out) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
    if (error != std::errc()) return false;
    text.remove_prefix(static_cast<size_t>(end - text.data()));
    if (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    return true;
  }
  void Parse(std::string_view line) {
    if (line.substr(0, 5) == "beat ") {
      line.remove_prefix(5);
      int64_t count = 0, ns = 0;
      if (!Int(line, &count) || !Int(line, &ns)) return;
      ++beats;
      last_beat_at = Clock::now();
      milestones = count;
      milestone_ns = ns;
    } else if (line.substr(0, 5) == "fail " && !failed) {
      line.remove_prefix(5);
      FailureKind kind;
      if (line.substr(0, 4) == "own ") kind = FailureKind::kOwn, line.remove_prefix(4);
      else if (line.substr(0, 5) == "peer ") kind = FailureKind::kPeer, line.remove_prefix(5);
      else return;
      if (!Int(line, &failed_ns)) return;
      failed = kind;
      reported_at = Clock::now();
      why = std::string(line.substr(0, 400));
    }
  }
};

struct Child {
  pid_t pid = -1;
  Stream out, err;
  StatusChannel status;
  bool reaped = false;
  Clock::time_point reaped_at{};
  RankExit exit;
  // When its output pipes closed (a process closes them as it exits) or it was reaped,
  // whichever we saw first.
  Clock::time_point ended_at() const { return std::min({out.closed_at, err.closed_at, reaped_at}); }
  bool failed() const { return reaped && (!exit.exited || exit.code != 0); }
  bool alive() const { return pid > 0 && !reaped; }
  // Failed on its own: said so, or said nothing (a crash, a signal, a program without the
  // status protocol). Only a rank that reported a peer failure is not.
  bool failed_on_its_own() const {
    return status.failed ? *status.failed == FailureKind::kOwn : failed();
  }
  // When it failed, as well as we know (its own report is the most precise).
  int64_t failed_ns() const { return status.failed ? status.failed_ns : Ns(ended_at()); }
};

// What /proc says a silent process is doing, for the message.
std::string ProcessState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return "";
  switch (line[paren + 2]) {
    case 'T': return "it is stopped (SIGSTOP or SIGTSTP)";
    case 't': return "it is stopped by a debugger";
    case 'D': return "it is blocked in the kernel (uninterruptible I/O)";
    case 'Z': return "it has exited";
    default: return "it is running but does not report";
  }
}

// KEY=VALUE strings for execve: this process's environment with `overrides` applied.
std::vector<std::string> BuildEnv(const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(overrides.begin(), overrides.end(),
                                      [&](const auto& kv) { return kv.first == key; });
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [key, value] : overrides) env.push_back(key + "=" + value);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The cores this process may run on, in order (its affinity mask).
std::vector<int> AllowedCores() {
  std::vector<int> cores;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) cores.push_back(cpu);
  return cores;
}

bool HasEnv(const char* name) { return std::getenv(name) != nullptr; }

// Forks one rank. Between fork and exec only async-signal-safe calls (the parent
// may have threads): everything the child needs is prepared before.
pid_t Spawn(const char* exe, char* const* argv, char* const* envp, pid_t pgid, pid_t parent,
            int out_write, int err_write, int status_write, const cpu_set_t* cores) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child.
  ::setpgid(0, pgid);                   // pgid 0: lead a new group
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);   // die with the launcher
  if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl
  ::dup2(out_write, STDOUT_FILENO);
  ::dup2(err_write, STDERR_FILENO);
  if (status_write == kStatusFd) ::fcntl(kStatusFd, F_SETFD, 0);  // keep it across exec
  else if (status_write >= 0) ::dup2(status_write, kStatusFd);      // dup2 clears FD_CLOEXEC
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);  // an ignored disposition would survive exec
  if (cores != nullptr) ::sched_setaffinity(0, sizeof *cores, cores);  // best effort
  ::execve(exe, argv, envp);
  static const char kMessage[] = "meshplan launcher: cannot execute the rank program\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(127);
}

}  // namespace

std::string RankExit::Describe() const {
  if (exited) return "exited with code " + std::to_string(code);
  const char* name = strsignal(signal);
  return "was killed by signal " + std::to_string(signal) + (name ? " (" + std::string(name) + ")" : "");
}

namespace {

// The ranks of one launch: started, watched, and stopped together (the first failure, a
// hung rank, or a stop signal to the launcher stops every rank: SIGTERM to the process
// group, SIGKILL after the grace period). One poll interval of supervision per Supervise().
class RankGroup {
 public:
  explicit RankGroup(const LaunchOptions& options)
      : options_(options), children_(static_cast<size_t>(options.nproc)) {
    result_.ranks.resize(children_.size());
  }

  // Starts every rank in order; on the first failure returns why (the ranks already
  // started keep running until StopAll), else "".
  std::string StartAll() {
    const std::string omp_threads = std::to_string(options_.threads_per_rank > 0
                                                       ? options_.threads_per_rank
                                                       : std::max(1, UsableCores() / options_.nproc));
    std::vector<std::string> argv_strings = options_.argv;
    std::vector<char*> argv = CStrings(argv_strings);
    for (int rank = 0; rank < options_.nproc; ++rank) {
      const std::string error = StartRank(rank, argv, omp_threads);
      if (!error.empty()) return error;
    }
    return "";
  }

  // Asks every running rank to stop (once): SIGTERM now (SIGCONT too, so a stopped rank
  // gets it), SIGKILL after options.stop_grace.
  void StopAll(const std::string& why) {
    if (stopping_) return;
    stopping_ = true;
    kill_at_ = Clock::now() + options_.stop_grace;
    bool any = false;
    for (auto& c : children_)
      if (c.alive() && !c.exit.hung) c.exit.stopped_by_launcher = any = true;
    if (any) {
      WriteAll(options_.err_fd, "[launcher] " + why + "; stopping the other ranks\n");
      if (pgid_ > 0) {
        ::killpg(pgid_, SIGTERM);
        ::killpg(pgid_, SIGCONT);
      }
    }
  }

  // One round: forward output, read the status pipes, reap, find whom to blame for a
  // failure or a hang and stop everyone, escalate to SIGKILL past the grace period. False
  // once every rank is reaped and its output drained.
  bool Supervise() {
    std::vector<pollfd> fds;
    std::vector<std::function<void()>> pumps = OpenStreams(&fds);
    if (AllReaped()) {
      if (fds.empty()) return false;
      if (all_reaped_at_ == Clock::time_point{}) all_reaped_at_ = Clock::now();
      if (Clock::now() - all_reaped_at_ > kDrainBound) {
        CloseStreams();  // a stray descendant holds a pipe
        return false;
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(kPollInterval.count()));
    if (ready > 0)
      for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents != 0) pumps[i]();
    ForgiveLauncherStall();
    ReapExited();
    if (!stopping_) Blame();
    if (g_stop_signal != 0 && !stopping_) {
      result_.interrupted = true;
      result_.exit_code = 128 + g_stop_signal;
      result_.failure = std::string("the launcher got signal ") + std::to_string(g_stop_signal);
      StopAll(result_.failure);
    }
    if (stopping_ && !killed_ && Clock::now() >= kill_at_) {
      killed_ = true;
      if (pgid_ > 0) ::killpg(pgid_, SIGKILL);
    }
    return true;
  }

  // Kills anything a rank left behind in its group and returns every rank's exit.
  LaunchResult Finish() {
    if (pgid_ > 0) ::killpg(pgid_, SIGKILL);
    for (size_t rank = 0; rank < children_.size(); ++rank) {
      Child& c = children_[rank];
      c.exit.reported = c.status.why;
      result_.ranks[rank] = c.exit;
    }
    return result_;
  }

 private:
  // Forks rank `rank` with its environment, output and status pipes; "" or why it could not.
  std::string StartRank(int rank, std::vector<char*>& argv, const std::string& omp_threads) {
    std::vector<std::pair<std::string, std::string>> vars = {
        {"RANK", std::to_string(rank)},
        {"WORLD_SIZE", std::to_string(options_.nproc)},
        {"LOCAL_RANK", std::to_string(rank)},
        {"LOCAL_WORLD_SIZE", std::to_string(options_.nproc)},
        {"MASTER_ADDR", options_.master_addr},
        {"MASTER_PORT", std::to_string(options_.master_port)},
        {"TORCHELASTIC_USE_AGENT_STORE", "True"},
        {"TORCHELASTIC_RESTART_COUNT", "0"},
        {kStatusFdVariable, std::to_string(kStatusFd)},
    };
    if (!HasEnv("OMP_NUM_THREADS")) vars.emplace_back("OMP_NUM_THREADS", omp_threads);
    for (const auto& kv : options_.extra_env) vars.push_back(kv);
    std::vector<std::string> env_strings = BuildEnv(vars);
    std::vector<char*> envp = CStrings(env_strings);

    int pipes[3][2];  // stdout, stderr, status
    for (int i = 0; i < 3; ++i)
      if (::pipe2(pipes[i], O_CLOEXEC) != 0) {
        for (int j = 0; j < i; ++j) ::close(pipes[j][0]), ::close(pipes[j][1]);
        return "cannot create pipes for rank " + std::to_string(rank);
      }
    // The status pipe must not land on the child's stdin/stdout/stderr (fds 0-2 are open in
    // any sane launcher, so pipe2 never returns them; a rank then simply has no status pipe).
    cpu_set_t cores;
    CPU_ZERO(&cores);
    const std::vector<int> slice = options_.bind_cores ? CoreSlice(rank, options_.nproc) : std::vector<int>{};
    for (const int cpu : slice) CPU_SET(cpu, &cores);
    const pid_t pid = Spawn(options_.exe.c_str(), argv.data(), envp.data(), pgid_, self_,
                            pipes[0][1], pipes[1][1], pipes[2][1] > 2 ? pipes[2][1] : -1,
                            slice.empty() ? nullptr : &cores);
    for (auto& p : pipes) ::close(p[1]);
    Child& child = children_[static_cast<size_t>(rank)];
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    child.out = Stream{pipes[0][0], options_.out_fd, prefix, {}};
    child.err = Stream{pipes[1][0], options_.err_fd, prefix, {}};
    child.status.fd = pipes[2][0];
    child.status.last_beat_at = Clock::now();  // silence counts from the start
    if (pid < 0) {
      const std::string error = "cannot fork rank " + std::to_string(rank) + ": " + std::strerror(errno);
      child.out.Close();
      child.err.Close();
      child.status.Close();
      return error;
    }
    child.pid = pid;
    child.exit.pid = pid;
    if (pgid_ == 0) pgid_ = pid;
    ::setpgid(pid, pgid_);  // also in the parent: no race with the first kill
    return "";
  }

  // The pipes still open, as poll entries, and for each the call that reads it.
  std::vector<std::function<void()>> OpenStreams(std::vector<pollfd>* fds) {
    std::vector<std::function<void()>> pumps;
    for (auto& c : children_) {
      for (Stream* s : {&c.out, &c.err})
        if (s->fd >= 0) {
          fds->push_back({s->fd, POLLIN, 0});
          pumps.emplace_back([s] { s->Pump(); });
        }
      if (c.status.fd >= 0) {
        fds->push_back({c.status.fd, POLLIN, 0});
        pumps.emplace_back([&status = c.status] { status.Pump(); });
      }
    }
    return pumps;
  }
  void CloseStreams() {
    for (auto& c : children_) {
      c.out.Close();
      c.err.Close();
      c.status.Close();
    }
  }

  bool AllReaped() const {
    return std::all_of(children_.begin(), children_.end(),
                       [](const Child& c) { return c.pid <= 0 || c.reaped; });
  }

  // When the launcher itself did not run for a while, the ranks' heartbeats of that time
  // may still be unread: silence is counted again from now.
  void ForgiveLauncherStall() {
    const Clock::time_point now = Clock::now();
    if (last_round_at_ != Clock::time_point{} && now - last_round_at_ > kLauncherStall)
      for (auto& c : children_) c.status.last_beat_at = now;
    last_round_at_ = now;
  }

  void ReapExited() {
    for (Child& c : children_) {
      if (!c.alive()) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.reaped = true;
      c.reaped_at = Clock::now();
      c.exit.exited = WIFEXITED(status);
      c.exit.code = c.exit.exited ? WEXITSTATUS(status) : 0;
      c.exit.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      if (c.status.fd >= 0) c.status.Pump();  // its last words, if any are still unread
    }
  }

  // Whom to blame, once something failed or hung; stops everyone when decided.
  void Blame() {
    const Clock::time_point now = Clock::now();
    // 1. A rank that failed on its own (the earliest), or says it is about to.
    int own = -1;
    bool any_failed = false;
    for (size_t r = 0; r < children_.size(); ++r) {
      const Child& c = children_[r];
      any_failed = any_failed || c.failed();
      const bool failing = c.failed() || (c.alive() && c.status.failed);
      if (failing && c.failed_on_its_own() &&
          (own < 0 || c.failed_ns() < children_[static_cast<size_t>(own)].failed_ns()))
        own = static_cast<int>(r);
    }
    if (own >= 0 && (At(own).failed() || now - At(own).status.reported_at > kSilentBound)) {
      BlameFailure(own);  // reaped, or reported failing and still not gone
      return;
    }
    // 2. A rank silent for hang_bound: hung, whatever the others do.
    int silent = MostSilent(false);
    if (silent >= 0 && now - At(silent).status.last_beat_at > options_.hang_bound) {
      BlameHung(silent, fmt::format("no heartbeat for {:.1f} s",
                                    Seconds(now - At(silent).status.last_beat_at)),
                /*silent=*/true);
      return;
    }
    if (!any_failed || own >= 0) return;  // nothing yet, or the culprit's exit is on its way
    // 3. Only ranks that failed because of a peer: whom were they waiting for?
    if (blame_wait_since_ == Clock::time_point{}) blame_wait_since_ = now;
    const int waited = FirstPeerFailure();
    silent = MostSilent(true);  // a rank stuck before its first heartbeat counts here
    if (silent >= 0 && now - At(silent).status.last_beat_at > kSilentBound) {
      BlameHung(silent,
                fmt::format("no heartbeat for {:.1f} s; rank {} failed waiting for it",
                            Seconds(now - At(silent).status.last_beat_at), waited),
                /*silent=*/true);
      return;
    }
    if (now - blame_wait_since_ < kBlameWindow) return;
    const int behind = Behind();
    if (behind >= 0 && At(behind).alive() && !At(behind).status.failed) {
      const StatusChannel& late = At(behind).status;
      const int64_t since_ns = MonotonicNs() - late.milestone_ns;
      BlameHung(behind,
                fmt::format("stopped making progress ({}it passed {} milestones, rank {} {}); "
                            "rank {} failed waiting for it",
                            late.milestone_ns > 0 && since_ns >= 0
                                ? fmt::format("none for {:.1f} s: ", static_cast<double>(since_ns) * 1e-9)
                                : "",
                            late.milestones, waited, At(waited).status.milestones, waited),
                /*silent=*/false);
      return;
    }
    BlameFailure(behind >= 0 && At(behind).failed() ? behind : waited);
  }

  Child& At(int rank) { return children_[static_cast<size_t>(rank)]; }
  static double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  // The alive rank whose last heartbeat (or start, for `unwatched` ones that never sent
  // one) is oldest, or -1.
  int MostSilent(bool unwatched) {
    int silent = -1;
    for (size_t r = 0; r < children_.size(); ++r) {
      const auto& c = children_[r];
      if (!c.alive() || (c.status.beats == 0 && !unwatched) || c.status.failed) continue;
      if (silent < 0 || c.status.last_beat_at < At(silent).status.last_beat_at)
        silent = static_cast<int>(r);
    }
    return silent;
  }
  // The earliest of the ranks that failed (all of them because of a peer).
  int FirstPeerFailure() {
    int first = -1;
    for (size_t r = 0; r < children_.size(); ++r)
      if (children_[r].failed() &&
          (first < 0 || children_[r].failed_ns() < At(first).failed_ns()))
        first = static_cast<int>(r);
    return first;
  }
  // The one rank with fewer milestones than every other watched rank, or -1 (a tie, or
  // nobody reports milestones).
  int Behind() {
    int least = -1;
    bool unique = false;
    for (size_t r = 0; r < children_.size(); ++r) {
      const auto& c = children_[r];
      if (c.status.milestones < 0) continue;
      if (least < 0 || c.status.milestones < At(least).status.milestones) {
        least = static_cast<int>(r);
        unique = true;
      } else if (c.status.milestones == At(least).status.milestones) {
        unique = false;
      }
    }
    return unique ? least : -1;
  }

  void BlameFailure(int rank) {
    const Child& c = At(rank);
    result_.failed_rank = rank;
    result_.failure = "rank " + std::to_string(rank) + " (pid " + std::to_string(c.pid) + ") " +
                      (c.reaped ? c.exit.Describe() : "failed and does not exit") +
                      (c.status.why.empty() ? "" : ": " + c.status.why);
    result_.exit_code = !c.reaped ? 1 : c.exit.exited ? c.exit.code : 128 + c.exit.signal;
    StopAll(result_.failure);
  }
  // `silent`: it sent no heartbeat (what /proc says it is doing is added to the message).
  void BlameHung(int rank, const std::string& detail, bool silent) {
    Child& c = At(rank);
    const std::string state = silent ? ProcessState(c.pid) : "";
    c.exit.hung = true;
    ::kill(c.pid, SIGKILL);  // stopped or stuck: SIGTERM would not be handled
    result_.failed_rank = rank;
    result_.failure = "rank " + std::to_string(rank) + " (pid " + std::to_string(c.pid) +
                      ") hung: " + detail + (state.empty() ? "" : "; " + state);
    result_.exit_code = kExitHung;
    StopAll(result_.failure);
  }

  const LaunchOptions& options_;
  const pid_t self_ = ::getpid();
  std::vector<Child> children_;
  pid_t pgid_ = 0;
  LaunchResult result_;
  bool stopping_ = false, killed_ = false;
  Clock::time_point kill_at_{};
  Clock::time_point all_reaped_at_{};
  Clock::time_point last_round_at_{};
  Clock::time_point blame_wait_since_{};
};

}  // namespace

int UsableCores() {
  const std::vector<int> cores = AllowedCores();
  if (!cores.empty()) return static_cast<int>(cores.size());
  return std::max(1u, std::thread::hardware_concurrency());
}

std::vector<int> CoreSlice(int rank, int nproc) {
  const std::vector<int> cores = AllowedCores();
  if (nproc < 1 || rank < 0 || rank >= nproc || static_cast<size_t>(nproc) > cores.size()) return {};
  const size_t per_rank = cores.size() / static_cast<size_t>(nproc);
  const auto first = cores.begin() + static_cast<std::ptrdiff_t>(per_rank * static_cast<size_t>(rank));
  return {first, first + static_cast<std::ptrdiff_t>(per_rank)};
}

LaunchResult LaunchLocalRanks(const LaunchOptions& options) {
  if (options.nproc < 1) throw std::invalid_argument("launcher: nproc must be >= 1");
  if (options.exe.empty() || options.argv.empty())
    throw std::invalid_argument("launcher: no program to run");

  SignalScope signals;
  RankGroup ranks(options);
  const std::string start_error = ranks.StartAll();
  if (!start_error.empty()) ranks.StopAll(start_error);
  while (ranks.Supervise()) {
  }
  LaunchResult result = ranks.Finish();
  if (!start_error.empty()) throw std::runtime_error("launcher: " + start_error);
  return result;
}

std::vector<std::string> SelfArgv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  size_t start = 0;
  for (size_t nul; (nul = all.find('\0', start)) != std::string::npos; start = nul + 1)
    argv.push_back(all.substr(start, nul - start));
  return argv;
}

std::string SelfExe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

}  // namespace meshplan
