// StepTimer: the time of each training step, and the median after warm-up.
//
// Start() / Stop() bracket one step. On CPU: wall time (every op is synchronous). On CUDA:
// device time between two CUDA events on the compute stream (executor/device/cuda_device.h
// CudaInterval; Stop() waits for the step's last kernel), or, in a build without the CUDA
// runtime, wall time between two device synchronisations. Not thread-safe: one timer per
// rank.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "executor/device/cuda_device.h"

namespace meshplan {

class StepTimer {
 public:
  // device: where the steps run (CUDA: the calling thread's current device).
  explicit StepTimer(at::Device device = at::kCPU);
  void Start();
  double Stop();  // seconds of the step just finished (also appended to times_s())
  const std::vector<double>& times_s() const { return times_s_; }
  double MedianAfterWarmup(int64_t warmup) const;  // 0 when no step is left after warm-up

 private:
  at::Device device_;
  std::unique_ptr<CudaInterval> events_;  // CUDA with the runtime
  std::chrono::steady_clock::time_point start_;
  std::vector<double> times_s_;
};

}  // namespace meshplan
