// Advice when no plan fits: what would make one fit, found by re-running small
// searches with one thing changed (never a canned text).
//
// Tried, each on its own: lifting each pinned key (--only), more GPUs of the same
// kind (doubling, up to 64x or 65,536 GPUs), a shorter sequence (halving, down to
// 1/64), pure bf16 precision (when training in mixed or fp32), no memory headroom.
// Each suggestion carries the command-line change and the best plan that then fits.
// The exhaustive search already tried its recompute policies, every micro-batch and ZeRO
// stage; `levers` says which of them the smallest plan uses.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/search/search.h"

namespace meshplan {

struct FitSuggestion {
  std::string change;  // what to change, as flags: "--cluster 2xa40", "--seq 128"
  std::string why;     // one line: what it does and what the best plan then is
  RankedPlan best;     // the best plan under that change
  SearchResult search; // the search that found it (counts, for JSON)
};

struct FitAdvice {
  double usable_bytes = 0;             // GPU memory minus the headroom
  std::optional<RankedPlan> smallest;  // least memory per GPU of all valid plans
  std::vector<std::string> levers;     // memory savers the smallest plan already uses
  std::vector<FitSuggestion> suggestions;
  // Searches not run because they were larger than the candidates left of
  // kMaxAdviceCandidates, or than kMaxSearchCandidates (planner/limits.h).
  int skipped_searches = 0;
};

// `result` is the search that found nothing fitting (result.fitting == 0).
FitAdvice AdviseFit(const ModelSpec& model, const ClusterSpec& cluster,
                    const TrainingSpec& training, const SearchOptions& options,
                    const SearchResult& result);

}  // namespace meshplan
