// StartWorkers: a pool's threads, started as far as the system allows.
//
// A thread the system refuses (a limit on threads or processes, an address-space cap too
// small for another stack) throws std::system_error from std::thread's constructor; left
// alone, that ends the process (std::terminate). StartWorkers instead stops at the first
// refusal and says how many it started: the pools here take their work from a shared
// counter, so fewer threads only take longer, and the caller runs the rest itself.
#pragma once

#include <system_error>
#include <thread>
#include <vector>

namespace meshplan {

// Appends threads running work(t) for t = first, first + 1, ... up to `count` of them to
// `threads`; returns how many started (0 to count).
template <typename Work>
int StartWorkers(std::vector<std::thread>& threads, int first, int count, const Work& work) {
  threads.reserve(threads.size() + static_cast<size_t>(count > 0 ? count : 0));
  for (int i = 0; i < count; ++i) {
    try {
      threads.emplace_back(work, first + i);
    } catch (const std::system_error&) {
      return i;
    }
  }
  return count;
}

}  // namespace meshplan
