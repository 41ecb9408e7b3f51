#include "planner/search/search_advice.h"

#include <fmt/format.h>

#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/input_error.h"
#include "planner/limits.h"
#include "planner/names.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

constexpr int64_t kMaxSuggestedGpus = 65536;
constexpr int kMaxGrowth = 64;  // 2x, 4x, ... 64x GPUs; seq / 2 ... / 64

// The search that found nothing fitting: what each suggestion changes one thing of.
struct Baseline {
  const ModelSpec& model;
  const ClusterSpec& cluster;
  const TrainingSpec& training;
  const SearchOptions& options;
  int64_t* candidates_left;  // of kMaxAdviceCandidates, for all the searches together
  int* skipped;              // searches not run: larger than the candidates left
};

// A quiet, small search: only whether something fits and the best plan. A search larger
// than the candidates left (kMaxAdviceCandidates in all, planner/limits.h) is not run.
std::optional<SearchResult> TrySearch(const Baseline& base, const ClusterSpec& cluster,
                                      const TrainingSpec& training, SearchOptions options) {
  if (*base.candidates_left <= 0) {
    ++*base.skipped;
    return std::nullopt;
  }
  options.top_k = 1;
  options.probe.reset();
  options.progress = nullptr;
  options.dump = nullptr;  // the dump is the asked search's alone
  options.max_candidates = std::min(options.max_candidates, *base.candidates_left);
  SearchResult r;
  try {
    r = Search(base.model, cluster, training, options);
  } catch (const InputError&) {  // more candidates than left: this suggestion is not tried
    ++*base.skipped;
    return std::nullopt;
  }
  *base.candidates_left -= r.candidates;
  if (r.fitting == 0) return std::nullopt;
  return r;
}

std::string Describe(const RankedPlan& best) {
  return fmt::format("best plan {} uses {} per GPU, {} tokens/s", ToShortPlanString(best.plan),
                     FormatGiB(best.cost.memory.total_bytes, 1),
                     GroupDigits(static_cast<int64_t>(best.cost.tokens_per_s)));
}

// The suggestion `change` from a search that fits: `why`, then its best plan.
FitSuggestion Suggestion(std::string change, const std::string& why, SearchResult search) {
  RankedPlan best = search.top.front();
  std::string text = why + ": " + Describe(best);
  return {std::move(change), std::move(text), std::move(best), std::move(search)};
}

// The memory savers `p` already uses, in words.
std::vector<std::string> LeversUsed(const ParallelPlan& p) {
  std::vector<std::string> levers;
  if (p.zero_stage == 3) levers.push_back("ZeRO-3 (parameters, gradients and optimizer sharded)");
  else if (p.zero_stage > 0) levers.push_back("ZeRO-" + std::to_string(p.zero_stage));
  if (p.recompute != Recompute::kNone)
    levers.push_back(ToString(p.recompute) + " recompute");
  if (p.micro_batch == 1) levers.push_back("micro-batch 1");
  if (p.tp > 1) levers.push_back("tp=" + std::to_string(p.tp));
  if (p.pp > 1) levers.push_back("pp=" + std::to_string(p.pp));
  if (p.cp > 1) levers.push_back("cp=" + std::to_string(p.cp));
  if (p.ep > 1) levers.push_back("ep=" + std::to_string(p.ep) + " (routed experts split)");
  return levers;
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

// Each pinned key (--only) lifted on its own, every one that then fits.
std::vector<FitSuggestion> SuggestLiftingPins(const Baseline& base) {
  std::vector<FitSuggestion> out;
  for (const std::string& key : base.options.space.pins.Keys()) {
    SearchOptions o = base.options;
    o.space.pins = base.options.space.pins.Without(key);
    if (auto r = TrySearch(base, base.cluster, base.training, o)) {
      const std::string rest = o.space.pins.ToString();
      out.push_back(Suggestion(rest.empty() ? "drop --only" : "--only " + rest,
                               "let the search choose " + key, std::move(*r)));
    }
  }
  return out;
}

// The fewest more GPUs of the same kind (doubling) with which a plan fits.
std::optional<FitSuggestion> SuggestMoreGpus(const Baseline& base) {
  const int64_t world = base.cluster.world_size();
  for (int growth = 2; growth <= kMaxGrowth; growth *= 2) {
    const int64_t gpus = world * growth;
    if (gpus > kMaxSuggestedGpus) break;
    std::string flag;
    ClusterSpec bigger;
    try {
      bigger = MoreGpus(base.cluster, gpus, &flag);
    } catch (const InputError&) {
      continue;
    }
    if (auto r = TrySearch(base, bigger, base.training, base.options))
      return Suggestion(flag, fmt::format("{} GPUs instead of {}", gpus, world), std::move(*r));
  }
  return std::nullopt;
}

// The longest shorter sequence (halving) with which a plan fits.
std::optional<FitSuggestion> SuggestShorterSequence(const Baseline& base) {
  const int64_t seq = base.training.seq_len;
  for (int shrink = 2; shrink <= kMaxGrowth && seq / shrink >= 1; shrink *= 2) {
    TrainingSpec shorter = base.training;
    shorter.seq_len = seq / shrink;
    if (auto r = TrySearch(base, base.cluster, shorter, base.options))
      return Suggestion("--seq " + std::to_string(shorter.seq_len),
                        fmt::format("sequences of {} tokens instead of {}", shorter.seq_len, seq),
                        std::move(*r));
  }
  return std::nullopt;
}

// Pure bf16 (the blog's regime: 8 bytes of model state per parameter instead of 16).
std::optional<FitSuggestion> SuggestBf16(const Baseline& base) {
  if (base.training.precision == Precision::kBf16) return std::nullopt;
  TrainingSpec bf16 = base.training;
  bf16.precision = Precision::kBf16;
  auto r = TrySearch(base, base.cluster, bf16, base.options);
  if (!r) return std::nullopt;
  return Suggestion("--precision bf16",
                    std::string("pure bf16 params, grads and Adam states instead of ") +
                        ToString(base.training.precision),
                    std::move(*r));
}

// All of the GPU's memory, no headroom.
std::optional<FitSuggestion> SuggestNoHeadroom(const Baseline& base) {
  if (base.options.memory_headroom <= 0) return std::nullopt;
  SearchOptions o = base.options;
  o.memory_headroom = 0;
  auto r = TrySearch(base, base.cluster, base.training, o);
  if (!r) return std::nullopt;
  return Suggestion("--headroom 0",
                    fmt::format("use all {} of the GPU (no safety margin; risky)",
                                FormatGiB(static_cast<double>(base.cluster.gpu.memory_bytes), 1)),
                    std::move(*r));
}

}  // namespace

FitAdvice AdviseFit(const ModelSpec& model, const ClusterSpec& cluster,
                    const TrainingSpec& training, const SearchOptions& options,
                    const SearchResult& result) {
  int64_t candidates_left = kMaxAdviceCandidates;
  FitAdvice advice;
  const Baseline base{model, cluster, training, options, &candidates_left,
                      &advice.skipped_searches};
  advice.usable_bytes = UsableBytes(cluster.gpu, options.memory_headroom);
  advice.smallest = result.smallest;
  if (result.smallest) advice.levers = LeversUsed(result.smallest->plan);
  // Each suggestion changes one thing; the order is the order they are printed in.
  advice.suggestions = SuggestLiftingPins(base);
  for (auto suggest : {SuggestMoreGpus, SuggestShorterSequence, SuggestBf16, SuggestNoHeadroom})
    if (std::optional<FitSuggestion> s = suggest(base)) advice.suggestions.push_back(std::move(*s));
  return advice;
}

}  // namespace meshplan
