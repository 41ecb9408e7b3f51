// Collective micro-benchmarks (see collective_benchmarks.h).
#include "executor/calibration/collective_benchmarks.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "executor/calibration/timing.h"
#include "executor/comm/gloo_communicator.h"
#include "executor/comm/rendezvous.h"
#include "executor/launch/launcher.h"
#include "executor/launch/rank_env.h"
#include "executor/steady_clock.h"
#include "planner/atomic_file.h"

namespace meshplan {
namespace {


double Median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// The compute between two collectives (CollectiveBenchmarkPlan::chunk_sides): by default
// fp32 matmuls of 128^3 to 512^3 (4 to 268 MFLOP, about 0.04 to 2.4 ms at the 0.1 TFLOP/s of
// one core of a 2020s x86 CPU). A run's collectives follow compute of every length in that
// range (a norm between two TP collectives, a layer's GEMMs), and on CPU ranks what a
// collective costs depends on it (docs/validation/cpu_ranks.md, item 6): the sample is the
// mean over the range.
constexpr CollectiveKind kKinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                                     CollectiveKind::kAllGather};

nlohmann::json SamplesToJson(const std::vector<CollectiveSample>& samples) {
  nlohmann::json out = nlohmann::json::array();
  for (const CollectiveSample& s : samples)
    out.push_back({{"kind", ToString(s.kind)}, {"bytes", s.bytes}, {"group_size", s.group_size},
                   {"seconds", s.seconds}, {"round_seconds", s.round_seconds}});
  return out;
}

std::vector<CollectiveSample> SamplesFromJson(const nlohmann::json& json) {
  std::vector<CollectiveSample> samples;
  for (const nlohmann::json& j : json) {
    CollectiveSample s;
    const std::string kind = j.at("kind").get<std::string>();
    const auto* found = std::find_if(std::begin(kKinds), std::end(kKinds),
                                     [&](CollectiveKind k) { return kind == ToString(k); });
    if (found == std::end(kKinds)) throw std::runtime_error("collective benchmark: unknown kind " + kind);
    s.kind = *found;
    s.bytes = j.at("bytes").get<double>();
    s.group_size = j.at("group_size").get<int64_t>();
    s.seconds = j.at("seconds").get<double>();
    s.round_seconds = j.at("round_seconds").get<std::vector<double>>();
    samples.push_back(s);
  }
  return samples;
}

}  // namespace

CollectiveBenchmarkPlan DefaultCollectiveBenchmark(bool quick) {
  CollectiveBenchmarkPlan plan;
  plan.buffer_bytes = quick ? std::vector<int64_t>{1 << 14, 1 << 20, 1 << 23}
                            : std::vector<int64_t>{1 << 12, 1 << 16, 1 << 20, 1 << 22, 1 << 24};
  plan.repeats = quick ? 25 : 40;  // fewer leave the per-collective cost to noise; whole
                                   // turns of the chunk sizes
  plan.rounds = quick ? 3 : 5;
  return plan;
}

std::vector<CollectiveSample> BenchmarkCollectives(Communicator& comm, const at::Device& device,
                                                   const CollectiveBenchmarkPlan& plan) {
  const int n = comm.size();
  const auto options = at::TensorOptions().device(device).dtype(at::kFloat);
  if (plan.chunk_sides.empty() || plan.buffer_bytes.empty() || plan.repeats < 1 || plan.rounds < 1)
    throw std::invalid_argument("collective benchmark: the plan needs chunk sides, buffer sizes, "
                                "repeats and rounds");
  std::vector<at::Tensor> a, b, c;  // one (a, b, c = a b) per chunk size
  for (const int64_t side : plan.chunk_sides) {
    a.push_back(at::ones({side, side}, options));
    b.push_back(at::ones({side, side}, options));
    c.push_back(at::empty({side, side}, options));
  }
  const auto chunk = [&](size_t i) { at::mm_out(c[i], a[i], b[i]); };
  // Seconds of `repeats` chunks (the sizes in turn), each followed by `op` when there is one.
  const auto loop = [&](const std::function<void()>& op) {
    comm.Barrier();
    const double start = SteadySeconds();
    for (int r = 0; r < plan.repeats; ++r) {
      chunk(static_cast<size_t>(r) % plan.chunk_sides.size());
      if (op) op();
    }
    SynchronizeDevice(device);
    return SteadySeconds() - start;
  };

  std::vector<CollectiveSample> out;
  for (const int64_t bytes : plan.buffer_bytes) {
    // Full buffers of `bytes`, rounded to a multiple of n fp32 elements.
    const int64_t numel = std::max<int64_t>(n, bytes / 4 / n * n);
    at::Tensor full = at::ones({numel}, options);
    at::Tensor shard = at::ones({numel / n}, options);
    for (const CollectiveKind kind : kKinds) {
      const std::function<void()> op = [&, kind] {
        if (kind == CollectiveKind::kAllReduce) comm.AllReduceSum(full);
        if (kind == CollectiveKind::kReduceScatter) comm.ReduceScatterSum(full, shard);
        if (kind == CollectiveKind::kAllGather) comm.AllGather(shard, full);
      };
      op();  // warm-up (connections, allocator)
      SynchronizeDevice(device);
      std::vector<double> per_op;
      for (int round = 0; round < plan.rounds; ++round) {
        const double with_op = loop(op);
        const double without = loop({});
        per_op.push_back(std::max(1e-7, (with_op - without) / plan.repeats));
      }
      full.fill_(1.0);  // keep the sums bounded
      CollectiveSample s;
      s.kind = kind;
      s.bytes = static_cast<double>(numel * 4);
      s.group_size = n;
      s.seconds = Median(per_op);
      s.round_seconds = per_op;
      out.push_back(s);
    }
  }
  return out;
}

bool IsCollectiveBenchmarkRank() { return std::getenv(kCollectiveRankEnv) != nullptr; }

std::vector<CollectiveSample> BenchmarkCollectivesInRanks(int ranks, std::chrono::milliseconds timeout) {
  if (ranks < 2) throw std::invalid_argument("collective benchmarks need at least 2 ranks");
  const std::filesystem::path samples_file =
      std::filesystem::temp_directory_path() /
      fmt::format("meshplan_collectives_{}.json", static_cast<long>(::getpid()));
  StoreServer store("127.0.0.1", 0, timeout);
  LaunchOptions launch;
  launch.nproc = ranks;
  launch.exe = SelfExe();
  launch.argv = SelfArgv();
  launch.master_port = store.port();
  launch.bind_cores = true;  // CPU ranks, bound as `meshplan run` binds them
  launch.extra_env = {{kCollectiveRankEnv, samples_file.string()}};
  const LaunchResult result = LaunchLocalRanks(launch);
  std::ifstream in(samples_file);
  std::error_code ignored;
  if (result.exit_code != 0 || !in) {
    std::filesystem::remove(samples_file, ignored);
    throw std::runtime_error("collective benchmark ranks: " +
                             (result.exit_code != 0 ? result.failure : "rank 0 wrote no samples"));
  }
  const nlohmann::json json = nlohmann::json::parse(in);
  std::filesystem::remove(samples_file, ignored);
  return SamplesFromJson(json);
}

void RunCollectiveBenchmarkRank(const CollectiveBenchmarkPlan& plan, std::chrono::milliseconds timeout) {
  const char* samples_file = std::getenv(kCollectiveRankEnv);
  const std::optional<RankEnv> env = ReadRankEnv();
  if (samples_file == nullptr || !env)
    throw std::runtime_error(std::string("a collective benchmark rank needs ") + kCollectiveRankEnv +
                             " and the rank variables of its launcher");
  auto store = ConnectRendezvousStore(*env, timeout);
  std::vector<int> members(static_cast<size_t>(env->world_size));
  std::iota(members.begin(), members.end(), 0);
  GlooCommunicator comm(store, env->rank, members, "calibrate", GlooOptionsForRank(*env, timeout));
  const std::vector<CollectiveSample> samples = BenchmarkCollectives(comm, at::kCPU, plan);
  if (env->rank == 0) WriteFileAtomically(samples_file, SamplesToJson(samples).dump(2) + "\n");
}

}  // namespace meshplan
