#include "gui/search_view.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "planner/units_format.h"

namespace meshplan {
namespace {

// The number a column sorts by (kPlan is handled apart).
double SortKey(const RankedPlan& row, SearchColumn column, size_t index) {
  switch (column) {
    case SearchColumn::kRank: return static_cast<double>(index);
    case SearchColumn::kMemory: return row.cost.memory.total_bytes;
    case SearchColumn::kTokensPerS: return row.cost.tokens_per_s;
    case SearchColumn::kTokensPerSPerGpu: return row.cost.tokens_per_s_per_gpu;
    case SearchColumn::kTflopsPerGpu: return row.cost.model_flops_per_s_per_gpu;
    case SearchColumn::kMfu: return row.cost.mfu;
    case SearchColumn::kStepTime: return row.cost.time.total_s;
    case SearchColumn::kExposedComm: return row.cost.time.exposed_comm_s.sum();
    case SearchColumn::kBubble: return row.cost.time.bubble_s;
    case SearchColumn::kPlan: break;
  }
  return 0;
}

}  // namespace

const char* ColumnTitle(SearchColumn column) {
  switch (column) {
    case SearchColumn::kRank: return "#";
    case SearchColumn::kPlan: return "plan";
    case SearchColumn::kMemory: return "mem/GPU";
    case SearchColumn::kTokensPerS: return "tokens/s";
    case SearchColumn::kTokensPerSPerGpu: return "tok/s/GPU";
    case SearchColumn::kTflopsPerGpu: return "TFLOP/s/GPU";
    case SearchColumn::kMfu: return "MFU";
    case SearchColumn::kStepTime: return "step";
    case SearchColumn::kExposedComm: return "exp. comm";
    case SearchColumn::kBubble: return "bubble";
  }
  return "?";
}

std::string CellText(const RankedPlan& row, size_t rank_index, SearchColumn column) {
  const PlanCost& c = row.cost;
  switch (column) {
    case SearchColumn::kRank: return std::to_string(rank_index + 1);
    case SearchColumn::kMemory: return FormatGiB(c.memory.total_bytes);
    case SearchColumn::kTokensPerS: return FormatTokensPerS(c.tokens_per_s);
    case SearchColumn::kTokensPerSPerGpu: return FormatTokensPerS(c.tokens_per_s_per_gpu);
    case SearchColumn::kTflopsPerGpu: return FormatTflops(c.model_flops_per_s_per_gpu);
    case SearchColumn::kMfu: return FormatPercent(c.mfu);
    case SearchColumn::kStepTime: return FormatSeconds(c.time.total_s);
    case SearchColumn::kExposedComm: return FormatSeconds(c.time.exposed_comm_s.sum());
    case SearchColumn::kBubble: return FormatSeconds(c.time.bubble_s);
    case SearchColumn::kPlan: return ToShortPlanString(row.plan);
  }
  return "";
}

std::vector<size_t> SortedOrder(const std::vector<RankedPlan>& rows, SearchColumn column,
                                bool ascending) {
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (column == SearchColumn::kPlan) {
    std::vector<std::string> names(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) names[i] = ToShortPlanString(rows[i].plan);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return ascending ? names[a] < names[b] : names[b] < names[a];
    });
    return order;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double ka = SortKey(rows[a], column, a), kb = SortKey(rows[b], column, b);
    return ascending ? ka < kb : kb < ka;
  });
  return order;
}

}  // namespace meshplan
