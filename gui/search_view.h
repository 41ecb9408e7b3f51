// What the Search panel shows of a SearchResult: its table columns and their order.
// Pure functions; no ImGui.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "planner/search/pareto.h"

namespace meshplan {

// The table's columns, left to right.
// kTokensPerSPerGpu and kTflopsPerGpu: the per-GPU rates the frameworks log (PlanCost).
enum class SearchColumn { kRank, kMemory, kTokensPerS, kTokensPerSPerGpu, kTflopsPerGpu, kMfu,
                          kStepTime, kExposedComm, kBubble, kPlan };
inline constexpr int kNumSearchColumns = 10;
const char* ColumnTitle(SearchColumn column);  // "#", "mem/GPU", ...
// A row's cell in `column`, as the table shows it ("24.9 GB", "74.6k", "dp=2,tp=4").
std::string CellText(const RankedPlan& row, size_t rank_index, SearchColumn column);

// Indices into `rows` sorted by `column` (ties: the search's rank, i.e. the index).
// kRank is the search's order (tokens/s descending, then ordinal); kPlan sorts by
// the plan string.
std::vector<size_t> SortedOrder(const std::vector<RankedPlan>& rows, SearchColumn column,
                                bool ascending);

}  // namespace meshplan
