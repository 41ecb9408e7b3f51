// Wall-clock step timing (see step_timer.h).
#include "executor/step_timer.h"

#include "planner/measurement.h"

namespace meshplan {

void StepTimer::Start() { start_ = std::chrono::steady_clock::now(); }

double StepTimer::Stop() {
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
  times_s_.push_back(elapsed.count());
  return elapsed.count();
}

double StepTimer::MedianAfterWarmup(int64_t warmup) const {
  return meshplan::MedianAfterWarmup(times_s_, warmup);
}

}  // namespace meshplan
