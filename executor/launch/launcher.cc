#include "executor/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <thread>

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

struct Child {
  pid_t pid = -1;
  Stream out, err;
  bool reaped = false;
  RankExit exit;
  // When its output pipes closed: a process closes them as it exits, so among ranks
  // reaped in the same sweep the earliest one is the one that died first.
  Clock::time_point ended_at() const { return std::min(out.closed_at, err.closed_at); }
};

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

int UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

bool HasEnv(const char* name) { return std::getenv(name) != nullptr; }

// Forks one rank. Between fork and exec only async-signal-safe calls (the parent
// may have threads): everything the child needs is prepared before.
pid_t Spawn(const char* exe, char* const* argv, char* const* envp, pid_t pgid, pid_t parent,
            int out_write, int err_write) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child.
  ::setpgid(0, pgid);                   // pgid 0: lead a new group
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);   // die with the launcher
  if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl
  ::dup2(out_write, STDOUT_FILENO);
  ::dup2(err_write, STDERR_FILENO);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);  // an ignored disposition would survive exec
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

// The ranks of one launch: started, watched, and stopped together (the first failure, or a
// stop signal to the launcher, stops every rank: SIGTERM to the process group, SIGKILL after
// the grace period). One poll interval of supervision per Supervise() call.
class RankGroup {
 public:
  explicit RankGroup(const LaunchOptions& options)
      : options_(options), children_(static_cast<size_t>(options.nproc)) {
    result_.ranks.resize(children_.size());
  }

  // Starts every rank in order; on the first failure returns why (the ranks already
  // started keep running until StopAll), else "".
  std::string StartAll() {
    const std::string omp_threads = std::to_string(std::max(1, UsableCores() / options_.nproc));
    std::vector<std::string> argv_strings = options_.argv;
    std::vector<char*> argv = CStrings(argv_strings);
    for (int rank = 0; rank < options_.nproc; ++rank) {
      const std::string error = StartRank(rank, argv, omp_threads);
      if (!error.empty()) return error;
    }
    return "";
  }

  // Asks every running rank to stop (once): SIGTERM now, SIGKILL after options.stop_grace.
  void StopAll(const std::string& why) {
    if (stopping_) return;
    stopping_ = true;
    kill_at_ = Clock::now() + options_.stop_grace;
    bool any = false;
    for (auto& c : children_)
      if (c.pid > 0 && !c.reaped) c.exit.stopped_by_launcher = any = true;
    if (any) {
      WriteAll(options_.err_fd, "[launcher] " + why + "; stopping the other ranks\n");
      if (pgid_ > 0) ::killpg(pgid_, SIGTERM);
    }
  }

  // One round: forward output, reap, stop everyone at the first failure or a stop signal,
  // escalate to SIGKILL past the grace period. False once every rank is reaped and its
  // output drained.
  bool Supervise() {
    std::vector<pollfd> fds;
    std::vector<Stream*> streams = OpenStreams(&fds);
    if (AllReaped()) {
      if (fds.empty()) return false;
      if (all_reaped_at_ == Clock::time_point{}) all_reaped_at_ = Clock::now();
      if (Clock::now() - all_reaped_at_ > kDrainBound) {
        for (Stream* s : streams) s->Close();  // a stray descendant holds the pipe
        return false;
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(kPollInterval.count()));
    if (ready > 0)
      for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents != 0) streams[i]->Pump();
    const int first_failed = ReapExited();
    if (first_failed >= 0 && !stopping_) {
      const Child& c = children_[static_cast<size_t>(first_failed)];
      result_.failed_rank = first_failed;
      result_.failure = "rank " + std::to_string(first_failed) + " (pid " + std::to_string(c.pid) +
                        ") " + c.exit.Describe();
      result_.exit_code = c.exit.exited ? c.exit.code : 128 + c.exit.signal;
      StopAll(result_.failure);
    }
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
    for (size_t rank = 0; rank < children_.size(); ++rank) result_.ranks[rank] = children_[rank].exit;
    return result_;
  }

 private:
  // Forks rank `rank` with its environment and output pipes; "" or why it could not.
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
    };
    if (!HasEnv("OMP_NUM_THREADS")) vars.emplace_back("OMP_NUM_THREADS", omp_threads);
    for (const auto& kv : options_.extra_env) vars.push_back(kv);
    std::vector<std::string> env_strings = BuildEnv(vars);
    std::vector<char*> envp = CStrings(env_strings);

    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) return "cannot create pipes for rank " + std::to_string(rank);
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      ::close(out_pipe[0]);
      ::close(out_pipe[1]);
      return "cannot create pipes for rank " + std::to_string(rank);
    }
    const pid_t pid = Spawn(options_.exe.c_str(), argv.data(), envp.data(), pgid_, self_,
                            out_pipe[1], err_pipe[1]);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    Child& child = children_[static_cast<size_t>(rank)];
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    child.out = Stream{out_pipe[0], options_.out_fd, prefix, {}};
    child.err = Stream{err_pipe[0], options_.err_fd, prefix, {}};
    if (pid < 0) {
      const std::string error = "cannot fork rank " + std::to_string(rank) + ": " + std::strerror(errno);
      child.out.Close();
      child.err.Close();
      return error;
    }
    child.pid = pid;
    child.exit.pid = pid;
    if (pgid_ == 0) pgid_ = pid;
    ::setpgid(pid, pgid_);  // also in the parent: no race with the first kill
    return "";
  }

  // The rank output pipes still open, as poll entries (same order as the returned streams).
  std::vector<Stream*> OpenStreams(std::vector<pollfd>* fds) {
    std::vector<Stream*> streams;
    for (auto& c : children_)
      for (Stream* s : {&c.out, &c.err})
        if (s->fd >= 0) {
          fds->push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
    return streams;
  }

  bool AllReaped() const {
    return std::all_of(children_.begin(), children_.end(),
                       [](const Child& c) { return c.pid <= 0 || c.reaped; });
  }

  // Reaps the ranks that exited; returns the one that failed first of those that failed
  // now (by when its pipes closed), or -1.
  int ReapExited() {
    int first_failed = -1;
    for (size_t rank = 0; rank < children_.size(); ++rank) {
      Child& c = children_[rank];
      if (c.pid <= 0 || c.reaped) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.reaped = true;
      c.exit.exited = WIFEXITED(status);
      c.exit.code = c.exit.exited ? WEXITSTATUS(status) : 0;
      c.exit.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      const bool failed = !c.exit.exited || c.exit.code != 0;
      if (failed && (first_failed < 0 ||
                     c.ended_at() < children_[static_cast<size_t>(first_failed)].ended_at()))
        first_failed = static_cast<int>(rank);
    }
    return first_failed;
  }

  const LaunchOptions& options_;
  const pid_t self_ = ::getpid();
  std::vector<Child> children_;
  pid_t pgid_ = 0;
  LaunchResult result_;
  bool stopping_ = false, killed_ = false;
  Clock::time_point kill_at_{};
  Clock::time_point all_reaped_at_{};
};

}  // namespace

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

}  // namespace meshplan
