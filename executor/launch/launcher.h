// Launcher: start N local rank processes of one command and supervise them (what
// `meshplan run PLAN --nproc N` does before any rank trains; like torchrun on one node).
// Every rank is `exe argv[1..]` with the variables of executor/launch/rank_env.h set (the
// caller hosts the store), and OMP_NUM_THREADS = threads_per_rank (default cores / N) unless
// already set; with
// bind_cores and N <= cores, rank r runs on its own cores (CoreSlice). Each line a
// rank writes is copied to out_fd / err_fd prefixed with "[rank R] ". When a rank exits
// non-zero or is killed, or the launcher gets SIGINT / SIGTERM / SIGHUP, every other rank
// gets SIGTERM (and SIGCONT, so a stopped rank receives it), then SIGKILL after stop_grace;
// no rank outlives the launcher.
// Hangs: every rank also gets a status pipe (executor/launch/rank_status.h). A rank that has
// sent a heartbeat and then sends none for hang_bound while it is alive (stopped by SIGSTOP,
// frozen, stuck in the kernel) is declared hung: it is killed, the others are stopped, and
// the result names it. A program that never writes to the pipe (a shell) is not watched.
// Blame: the rank named is the one that failed first on its own; a rank that reported
// failing because of a peer (a collective broke or timed out) is named only when no rank
// failed on its own, none went silent, and none is behind the others in its milestones.
// The call returns when every rank has been reaped; it is not re-entrant (it installs
// process-wide signal handlers for its duration and restores them).
// Environment and supervision in detail: docs/executor_internals.md#launcher.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace meshplan {

struct LaunchOptions {
  int nproc = 1;
  std::string exe;                // executable path (execv'd as is)
  std::vector<std::string> argv;  // argv of each rank, argv[0] included
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // the rendezvous store, hosted by the caller
  std::vector<std::pair<std::string, std::string>> extra_env;  // set in every rank
  int threads_per_rank = 0;  // each rank's OMP_NUM_THREADS; 0: usable cores / nproc (at least 1)
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};
  // A watched rank silent this long while alive is hung (heartbeats come every 0.5 s).
  std::chrono::milliseconds hang_bound{std::chrono::seconds(10)};
  // Rank r's threads (compute and communication alike) run on CoreSlice(r) only, as
  // mpirun's --bind-to core does. For ranks that compute on the cores (CPU ranks): each
  // rank's communication threads then wake beside its own compute, not on a peer's core
  // (docs/validation/cpu_ranks.md, item 5). Ignored when N > the launcher's cores.
  bool bind_cores = false;
  int out_fd = 1;  // where ranks' prefixed stdout goes
  int err_fd = 2;  // where ranks' prefixed stderr and the launcher's messages go
};

struct RankExit {
  pid_t pid = 0;
  bool exited = false;  // exited normally with `code`; otherwise killed by `signal`
  int code = 0;
  int signal = 0;
  bool stopped_by_launcher = false;  // got SIGTERM/SIGKILL from us after another failure
  bool hung = false;                 // declared hung by us (silent, or behind its waiting
                                     // peers) and killed
  std::string reported;              // why it failed, as it told us on its status pipe
  std::string Describe() const;      // "exited with code 3", "was killed by signal 9 (Killed)"
};

// The exit code of a launch that stopped a hung rank (as timeout(1) uses).
inline constexpr int kExitHung = 124;

struct LaunchResult {
  int exit_code = 0;     // 0 when every rank succeeded; else see below
  int failed_rank = -1;  // the rank blamed (-1: none, or interrupted)
  std::string failure;   // "rank 1 (pid 4242) exited with code 3[: why]" ("" on success)
  bool interrupted = false;    // the launcher itself got SIGINT/SIGTERM/SIGHUP
  std::vector<RankExit> ranks;  // indexed by rank
};

// Starts the ranks and waits for all of them. exit_code: 0 on success; the blamed rank's
// exit code (or 128 + signal when it was killed, kExitHung when it hung); 128 + signal
// when the launcher was interrupted. Throws std::runtime_error when a rank cannot be
// started (the ranks already started are stopped first).
LaunchResult LaunchLocalRanks(const LaunchOptions& options);

// The cores of rank `rank` of `nproc` under bind_cores: the launcher's usable cores (its
// affinity, in order) cut into nproc equal slices, the remainder left out; empty when
// nproc exceeds them.
std::vector<int> CoreSlice(int rank, int nproc);

// The cores this process may run on (its affinity mask; the machine's when unreadable), >= 1.
int UsableCores();

// This process's executable (/proc/self/exe) and command line (/proc/self/cmdline, argv[0]
// included): what a command passes as LaunchOptions::exe / argv to start copies of itself.
std::string SelfExe();
std::vector<std::string> SelfArgv();

}  // namespace meshplan
