// Step timing: wall clock on CPU, CUDA events on a GPU (see step_timer.h).
#include "executor/device/step_timer.h"

#include "executor/device/training_device.h"
#include "planner/measure/measurement.h"

namespace meshplan {

StepTimer::StepTimer(at::Device device) : device_(device) {
  if (device_.is_cuda() && BuiltWithCudaRuntime()) events_ = std::make_unique<CudaInterval>();
}

void StepTimer::Start() {
  if (events_) return events_->Start();
  SynchronizeDevice(device_);
  start_ = std::chrono::steady_clock::now();
}

double StepTimer::Stop() {
  double seconds = 0;
  if (events_) {
    seconds = events_->Stop();
  } else {
    SynchronizeDevice(device_);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  times_s_.push_back(seconds);
  return seconds;
}

double StepTimer::MedianAfterWarmup(int64_t warmup) const {
  return meshplan::MedianAfterWarmup(times_s_, warmup);
}

}  // namespace meshplan
