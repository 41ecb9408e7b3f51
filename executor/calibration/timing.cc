// Median timing of micro-benchmark calls (see timing.h).
#include "executor/calibration/timing.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "executor/device/training_device.h"
#include "executor/steady_clock.h"

namespace meshplan {

int64_t DefaultFlushBytes() {
  const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  const int64_t flush = 8 * static_cast<int64_t>(l2 > 0 ? l2 : 1 << 20);
  return std::clamp<int64_t>(flush, int64_t{8} << 20, int64_t{64} << 20);
}

void Touch(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors)
    if (t.defined()) (void)t.sum().item<double>();
}

void FlushCaches(int64_t bytes) {
  if (bytes <= 0) return;
  at::empty({bytes / 4}, at::kFloat).fill_(1.0);
}

double MedianSeconds(const std::function<void()>& fn, const at::Device& device,
                     const TimingOptions& options, const std::function<void()>& before) {
  if (before) before();
  fn();  // warm-up: allocator caches, lazy initialisation, first-touch of pages
  SynchronizeDevice(device);
  if (before) before();
  double start = SteadySeconds();
  fn();
  SynchronizeDevice(device);
  const double first = std::max(SteadySeconds() - start, 1e-9);

  int batch = 1;
  if (device.is_cuda() && first < options.min_batch_s)
    batch = static_cast<int>(std::ceil(options.min_batch_s / first));
  int repeats = std::clamp(static_cast<int>(options.min_total_s / (first * batch)),
                           options.min_repeats, options.max_repeats);
  if (options.flush_bytes > 0) repeats = std::min(repeats, std::max(options.min_repeats, 25));
  std::vector<double> times;
  times.reserve(static_cast<size_t>(repeats));
  for (int r = 0; r < repeats; ++r) {
    if (!device.is_cuda()) FlushCaches(options.flush_bytes);
    if (before) before();
    start = SteadySeconds();
    for (int b = 0; b < batch; ++b) fn();
    SynchronizeDevice(device);
    times.push_back((SteadySeconds() - start) / batch);
  }
  const auto mid = times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2);
  std::nth_element(times.begin(), mid, times.end());
  return *mid;
}

}  // namespace meshplan
