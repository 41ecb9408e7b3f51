// StepTimer: wall time of each training step, and the median after warm-up.
//
// Start() / Stop() bracket one step; the caller synchronises the device before Stop()
// (on CPU every op is synchronous; on CUDA the trainer synchronises the stream). Not
// thread-safe: one timer per rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace meshplan {

class StepTimer {
 public:
  void Start();
  double Stop();  // seconds of the step just finished (also appended to times_s())
  const std::vector<double>& times_s() const { return times_s_; }
  double MedianAfterWarmup(int64_t warmup) const;  // 0 when no step is left after warm-up

 private:
  std::chrono::steady_clock::time_point start_;
  std::vector<double> times_s_;
};

}  // namespace meshplan
