// RankStatus: the rank's end of the launcher's status pipe (heartbeats, progress, and why
// the rank failed), so the launcher can tell a hung rank from a waiting one and name the
// rank that failed first on its own.
//
// `meshplan run --nproc N` (executor/launch/launcher.h) gives every rank a pipe and its file
// descriptor in $MESHPLAN_STATUS_FD. Without it (torchrun, srun, tests) every call is a no-op.
// Lines written (each one write(2) of less than PIPE_BUF bytes, so never interleaved):
//   "beat <milestones> <ns>\n"   every kHeartbeatPeriod from a thread of its own: the rank
//                                is alive; it has passed <milestones> milestones, the last at
//                                <ns> (CLOCK_MONOTONIC, comparable across local processes).
//   "fail own|peer <ns> <why>\n" the rank is about to exit non-zero: on its own (bad input,
//                                a crash of its own) or because a peer failed (a collective
//                                broke or timed out, another rank refused its snapshot).
// Milestones are the same sequence on every rank (mesh joined, state ready, each step's
// start and end), so the rank with the fewest is the one the others wait for.
// Thread-safe. The heartbeat thread stops when the object is destroyed; writes never block
// (a full pipe drops the line) and a closed pipe is ignored.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "executor/launch/rank_env.h"

namespace meshplan {

inline constexpr const char* kStatusFdVariable = "MESHPLAN_STATUS_FD";
inline constexpr std::chrono::milliseconds kHeartbeatPeriod{500};

enum class FailureKind { kOwn, kPeer };

class RankStatus {
 public:
  // Reads $MESHPLAN_STATUS_FD through `lookup`; starts the heartbeat when it names a pipe.
  explicit RankStatus(const EnvLookup& lookup = ProcessEnv());
  ~RankStatus();
  RankStatus(const RankStatus&) = delete;
  RankStatus& operator=(const RankStatus&) = delete;

  bool active() const { return fd_ >= 0; }
  void Milestone();  // one more milestone passed, now
  // `why` is flattened to one line and cut to fit one atomic write.
  void ReportFailure(FailureKind kind, const std::string& why);

 private:
  void Beat();
  void Write(const std::string& line) const;

  int fd_ = -1;
  std::atomic<int64_t> milestones_{0};
  std::atomic<int64_t> milestone_ns_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

// CLOCK_MONOTONIC now, in nanoseconds (what the status lines carry).
int64_t MonotonicNs();

}  // namespace meshplan
