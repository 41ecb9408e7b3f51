// Collective micro-benchmarks (see collective_benchmarks.h).
#include "executor/calibration/collective_benchmarks.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "executor/calibration/timing.h"
#include "executor/comm/gloo_communicator.h"

namespace meshplan {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

std::vector<CollectiveSample> BenchmarkCollectives(Communicator& comm, const at::Device& device,
                                                   const std::vector<int64_t>& buffer_bytes,
                                                   int repeats) {
  const int n = comm.size();
  const auto options = at::TensorOptions().device(device).dtype(at::kFloat);
  std::vector<CollectiveSample> out;
  for (const int64_t bytes : buffer_bytes) {
    // Full buffers of `bytes`, rounded to a multiple of n fp32 elements.
    const int64_t numel = std::max<int64_t>(n, bytes / 4 / n * n);
    at::Tensor full = at::ones({numel}, options);
    at::Tensor shard = at::ones({numel / n}, options);
    const std::pair<CollectiveKind, std::function<void()>> ops[] = {
        {CollectiveKind::kAllReduce, [&] { comm.AllReduceSum(full); }},
        {CollectiveKind::kReduceScatter, [&] { comm.ReduceScatterSum(full, shard); }},
        {CollectiveKind::kAllGather, [&] { comm.AllGather(shard, full); }},
    };
    for (const auto& [kind, op] : ops) {
      op();  // warm-up (connections, allocator)
      SynchronizeDevice(device);
      std::vector<double> times;
      for (int r = 0; r < repeats; ++r) {
        comm.Barrier();
        const double start = Now();
        op();
        SynchronizeDevice(device);
        times.push_back(Now() - start);
      }
      full.fill_(1.0);  // keep the sums bounded
      CollectiveSample s;
      s.kind = kind;
      s.bytes = static_cast<double>(numel * 4);
      s.group_size = n;
      s.seconds = Median(times);
      out.push_back(s);
    }
  }
  return out;
}

std::vector<CollectiveSample> BenchmarkCollectivesInProcess(int ranks,
                                                            const std::vector<int64_t>& buffer_bytes,
                                                            int repeats) {
  if (ranks < 2) throw std::invalid_argument("collective benchmarks need at least 2 ranks");
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(std::chrono::seconds(60));
  std::vector<int> members(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) members[static_cast<size_t>(r)] = r;
  std::vector<std::vector<CollectiveSample>> results(static_cast<size_t>(ranks));
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        GlooCommunicator comm(store, r, members, "calibrate");
        results[static_cast<size_t>(r)] = BenchmarkCollectives(comm, at::kCPU, buffer_bytes, repeats);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r)
    if (!errors[static_cast<size_t>(r)].empty())
      throw std::runtime_error("collective benchmark, rank " + std::to_string(r) + ": " +
                               errors[static_cast<size_t>(r)]);
  return results[0];
}

}  // namespace meshplan
