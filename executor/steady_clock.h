// SteadySeconds: the steady clock as seconds (a double), for timing intervals on the host:
// calibration's benchmarks and the timed comm log take differences of it.
#pragma once

#include <chrono>

namespace meshplan {

inline double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace meshplan
