#include "simulator/rerank.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "planner/worker_threads.h"

namespace meshplan {

std::vector<SimulatedPlan> RerankBySimulation(const ModelSpec& model, const ClusterSpec& cluster,
                                              const TrainingSpec& training,
                                              const std::vector<RankedPlan>& plans, int threads) {
  std::vector<SimulatedPlan> out(plans.size());
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t i = next++; i < plans.size(); i = next++) try {
      SimulatedPlan& p = out[i];
      p.analytic = plans[i];
      p.analytic_rank = static_cast<int>(i) + 1;
      p.not_simulated = NotSimulated(plans[i].plan);
      if (p.not_simulated.empty()) {
        const SimResult sim = Simulate(model, cluster, training, plans[i].plan, {.timeline = false});
        p.simulated = sim.time;
        p.slowest_stage = sim.slowest_stage;
      } else {
        p.simulated = plans[i].cost.time;
      }
      if (p.simulated.total_s > 0)
        p.tokens_per_s = static_cast<double>(training.tokens_per_step()) / p.simulated.total_s;
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  unsigned n = threads > 0 ? static_cast<unsigned>(threads) : std::thread::hardware_concurrency();
  n = std::max(1u, std::min<unsigned>(n, static_cast<unsigned>(plans.size())));
  std::vector<std::thread> pool;  // as many as the system starts (planner/worker_threads.h)
  StartWorkers(pool, 1, static_cast<int>(n) - 1, [&work](int) { work(); });
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  std::stable_sort(out.begin(), out.end(), [](const SimulatedPlan& a, const SimulatedPlan& b) {
    return a.simulated.total_s < b.simulated.total_s;
  });
  return out;
}

}  // namespace meshplan
