#include "planner/search_advice.h"

#include <fmt/format.h>

#include "planner/config_loader.h"
#include "planner/cost_report.h"
#include "planner/input_error.h"
#include "planner/names.h"

namespace meshplan {
namespace {

constexpr int64_t kMaxSuggestedGpus = 65536;
constexpr int kMaxGrowth = 64;  // 2x, 4x, ... 64x GPUs; seq / 2 ... / 64

// A quiet, small search: only whether something fits and the best plan.
std::optional<SearchResult> TrySearch(const ModelSpec& model, const ClusterSpec& cluster,
                                      const TrainingSpec& training, SearchOptions options) {
  options.top_k = 1;
  options.probe.reset();
  options.progress = nullptr;
  SearchResult r = Search(model, cluster, training, options);
  if (r.fitting == 0) return std::nullopt;
  return r;
}

std::string Gb(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

std::string Describe(const RankedPlan& best) {
  return fmt::format("best plan {} uses {} per GPU, {} tokens/s", ToShortPlanString(best.plan),
                     Gb(best.cost.memory.total_bytes),
                     GroupDigits(static_cast<int64_t>(best.cost.tokens_per_s)));
}

// A cluster of `gpus` GPUs of the same kind, as the NxGPU shorthand builds it (so the
// suggestion is a command the user can run); the same node shape scaled when the GPU
// has no configs/hardware entry with a network block.
ClusterSpec MoreGpus(const ClusterSpec& cluster, int64_t gpus, std::string* flag) {
  const std::string shorthand = std::to_string(gpus) + "x" + cluster.gpu.name;
  try {
    ClusterSpec c = LoadCluster(shorthand);
    *flag = "--cluster " + shorthand;
    return c;
  } catch (const InputError&) {
    ClusterSpec c = cluster;
    c.gpus_per_node = std::min<int64_t>(gpus, std::max<int64_t>(cluster.gpus_per_node, 8));
    c.nodes = gpus / c.gpus_per_node;
    c.name = shorthand;
    *flag = "--cluster <a cluster file with " + std::to_string(c.nodes) + " nodes of " +
            std::to_string(c.gpus_per_node) + " " + cluster.gpu.name + ">";
    return c;
  }
}

}  // namespace

FitAdvice AdviseFit(const ModelSpec& model, const ClusterSpec& cluster,
                    const TrainingSpec& training, const SearchOptions& options,
                    const SearchResult& result) {
  FitAdvice advice;
  advice.usable_bytes =
      static_cast<double>(cluster.gpu.memory_bytes) * (1.0 - options.memory_headroom);
  advice.smallest = result.smallest;
  if (result.smallest) {
    const ParallelPlan& p = result.smallest->plan;
    if (p.zero_stage == 3) advice.levers.push_back("ZeRO-3 (parameters, gradients and optimizer sharded)");
    else if (p.zero_stage > 0) advice.levers.push_back("ZeRO-" + std::to_string(p.zero_stage));
    if (p.recompute != Recompute::kNone)
      advice.levers.push_back(std::string(ToString(p.recompute)) + " recompute");
    if (p.micro_batch == 1) advice.levers.push_back("micro-batch 1");
    if (p.tp > 1) advice.levers.push_back("tp=" + std::to_string(p.tp));
    if (p.pp > 1) advice.levers.push_back("pp=" + std::to_string(p.pp));
    if (p.cp > 1) advice.levers.push_back("cp=" + std::to_string(p.cp));
  }

  // Lift each pin.
  for (const std::string& key : options.space.pins.Keys()) {
    SearchOptions o = options;
    o.space.pins = options.space.pins.Without(key);
    if (auto r = TrySearch(model, cluster, training, o)) {
      const std::string rest = o.space.pins.ToString();
      advice.suggestions.push_back(
          {rest.empty() ? "drop --only" : "--only " + rest,
           "let the search choose " + key + ": " + Describe(r->top.front()), r->top.front(), *r});
    }
  }

  // More GPUs of the same kind.
  for (int growth = 2; growth <= kMaxGrowth; growth *= 2) {
    const int64_t gpus = cluster.world_size() * growth;
    if (gpus > kMaxSuggestedGpus) break;
    std::string flag;
    ClusterSpec bigger;
    try {
      bigger = MoreGpus(cluster, gpus, &flag);
    } catch (const InputError&) {
      continue;
    }
    if (auto r = TrySearch(model, bigger, training, options)) {
      advice.suggestions.push_back(
          {flag, fmt::format("{} GPUs instead of {}: {}", gpus, cluster.world_size(),
                             Describe(r->top.front())),
           r->top.front(), *r});
      break;
    }
  }

  // A shorter sequence.
  for (int shrink = 2; shrink <= kMaxGrowth && training.seq_len / shrink >= 1; shrink *= 2) {
    TrainingSpec shorter = training;
    shorter.seq_len = training.seq_len / shrink;
    if (auto r = TrySearch(model, cluster, shorter, options)) {
      advice.suggestions.push_back(
          {"--seq " + std::to_string(shorter.seq_len),
           fmt::format("sequences of {} tokens instead of {}: {}", shorter.seq_len,
                       training.seq_len, Describe(r->top.front())),
           r->top.front(), *r});
      break;
    }
  }

  // Pure bf16 (the blog's regime: 8 bytes of model state per parameter instead of 16).
  if (training.precision != Precision::kBf16) {
    TrainingSpec bf16 = training;
    bf16.precision = Precision::kBf16;
    if (auto r = TrySearch(model, cluster, bf16, options))
      advice.suggestions.push_back(
          {"--precision bf16",
           std::string("pure bf16 params, grads and Adam states instead of ") +
               ToString(training.precision) + ": " + Describe(r->top.front()),
           r->top.front(), *r});
  }

  // No headroom.
  if (options.memory_headroom > 0) {
    SearchOptions o = options;
    o.memory_headroom = 0;
    if (auto r = TrySearch(model, cluster, training, o))
      advice.suggestions.push_back(
          {"--headroom 0",
           fmt::format("use all {} of the GPU (no safety margin; risky): {}",
                       Gb(static_cast<double>(cluster.gpu.memory_bytes)),
                       Describe(r->top.front())),
           r->top.front(), *r});
  }
  return advice;
}

}  // namespace meshplan
