// The rank's end of the status pipe (see rank_status.h).
#include "executor/launch/rank_status.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

namespace meshplan {
namespace {

// A descriptor number from the environment, if it is an open pipe or FIFO.
int StatusFd(const EnvLookup& lookup) {
  const char* text = lookup(kStatusFdVariable);
  if (text == nullptr || *text == '\0') return -1;
  int fd = -1;
  const char* end = text + std::strlen(text);
  if (std::from_chars(text, end, fd).ptr != end || fd < 3) return -1;  // never stdio
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return -1;  // a stale variable
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return -1;
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);  // a stuck launcher never blocks the rank
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);          // not inherited by anything the rank starts
  return fd;
}

}  // namespace

int64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

RankStatus::RankStatus(const EnvLookup& lookup) : fd_(StatusFd(lookup)) {
  milestone_ns_ = MonotonicNs();
  if (fd_ < 0) return;
  thread_ = std::thread([this] {
    // A write to a pipe whose reader is gone raises SIGPIPE in the writing thread: blocked
    // here, the write fails with EPIPE instead (the launcher is gone; the rank dies with it).
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      lock.unlock();
      Beat();
      lock.lock();
      if (cv_.wait_for(lock, kHeartbeatPeriod, [this] { return stopping_; })) return;
    }
  });
}

RankStatus::~RankStatus() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RankStatus::Milestone() {
  milestone_ns_ = MonotonicNs();
  ++milestones_;
}

void RankStatus::Beat() {
  Write("beat " + std::to_string(milestones_.load()) + " " + std::to_string(milestone_ns_.load()) +
        "\n");
}

void RankStatus::ReportFailure(FailureKind kind, const std::string& why) {
  if (fd_ < 0) return;
  std::string line = std::string("fail ") + (kind == FailureKind::kOwn ? "own " : "peer ") +
                     std::to_string(MonotonicNs()) + " ";
  for (char c : why) line += (c == '\n' || c == '\r') ? ' ' : c;
  if (line.size() > PIPE_BUF - 1) line.resize(PIPE_BUF - 1);
  Write(line + "\n");
}

void RankStatus::Write(const std::string& line) const {
  if (fd_ < 0) return;
  // One write of < PIPE_BUF bytes: whole or not at all (a full pipe drops the line).
  ssize_t n;
  do n = ::write(fd_, line.data(), line.size());
  while (n < 0 && errno == EINTR);
}

}  // namespace meshplan
