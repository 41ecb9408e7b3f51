// The panels' pure helpers: memory segments, the search table's order, number spellings.
#include <catch2/catch.hpp>

#include "gui/memory_view.h"
#include "gui/palette.h"
#include "gui/search_view.h"
#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/units_format.h"

namespace meshplan {

TEST_CASE("memory segments stack to the breakdown's total, each in its own colour",
          "[gui][views]") {
  TrainingSpec training;
  training.global_batch = 64;
  training.seq_len = 4096;
  const auto plan_text = GENERATE(as<std::string>{}, "dp=8,zero=0", "dp=2,tp=4,sp=1,zero=3",
                                  "dp=1,tp=2,pp=4,recompute=full");
  const PlanCost cost = Estimate(LoadModel("llama2-7b"), LoadCluster("8xH100"), training,
                                 ParsePlanString(plan_text));
  const std::vector<MemorySegment> segments = MemorySegments(cost.memory);
  REQUIRE(segments.size() == kNumMemorySegments);
  double sum = 0;
  for (const MemorySegment& s : segments) sum += s.bytes;
  CHECK(sum == Approx(cost.memory.total_bytes).epsilon(1e-12));
  for (size_t i = 0; i < segments.size(); ++i)
    for (size_t j = i + 1; j < segments.size(); ++j) CHECK_FALSE(segments[i].color == segments[j].color);
  // No segment may look like the capacity line or the "does not fit" outline.
  for (const MemorySegment& s : segments) {
    CHECK_FALSE(s.color == kColorCapacityLine);
    CHECK_FALSE(s.color == kColorDoesNotFit);
  }
}

TEST_CASE("the memory axis leaves room above the capacity and the largest bar", "[gui][views]") {
  CHECK(MemoryAxisMax({10e9, 30e9}, 80e9) == Approx(88e9));
  CHECK(MemoryAxisMax({120e9, 30e9}, 80e9) == Approx(132e9));
  CHECK(MemoryAxisMax({}, 0) > 0);
}

TEST_CASE("search table order follows the clicked column, ties in search order",
          "[gui][views][search]") {
  std::vector<RankedPlan> rows(4);
  const double memory[] = {30e9, 10e9, 20e9, 10e9};
  const double speed[] = {4e5, 3e5, 2e5, 1e5};  // the search's order: fastest first
  for (int i = 0; i < 4; ++i) {
    rows[i].plan.dp = 8 >> i;
    rows[i].cost.memory.total_bytes = memory[i];
    rows[i].cost.tokens_per_s = speed[i];
  }
  CHECK(SortedOrder(rows, SearchColumn::kRank, true) == std::vector<size_t>{0, 1, 2, 3});
  CHECK(SortedOrder(rows, SearchColumn::kRank, false) == std::vector<size_t>{3, 2, 1, 0});
  CHECK(SortedOrder(rows, SearchColumn::kMemory, true) == std::vector<size_t>{1, 3, 2, 0});
  CHECK(SortedOrder(rows, SearchColumn::kMemory, false) == std::vector<size_t>{0, 2, 1, 3});
  CHECK(SortedOrder(rows, SearchColumn::kTokensPerS, true) == std::vector<size_t>{3, 2, 1, 0});
  // Plan strings sort as text: "dp=1" < "dp=2" < "dp=4" < "dp=8".
  CHECK(SortedOrder(rows, SearchColumn::kPlan, true) == std::vector<size_t>{3, 2, 1, 0});
  CHECK(CellText(rows[1], 1, SearchColumn::kRank) == "2");
  CHECK(CellText(rows[1], 1, SearchColumn::kMemory) == "9.31 GiB");  // 10e9 bytes
  CHECK(CellText(rows[0], 0, SearchColumn::kTokensPerS) == "400.0k");
  CHECK(CellText(rows[0], 0, SearchColumn::kPlan) == "dp=8");
  // The per-GPU rates (PlanCost), as the search table prints them.
  rows[0].cost.tokens_per_s_per_gpu = 12'345;
  rows[0].cost.model_flops_per_s_per_gpu = 412.34e12;
  CHECK(CellText(rows[0], 0, SearchColumn::kTokensPerSPerGpu) == "12.3k");
  CHECK(CellText(rows[0], 0, SearchColumn::kTflopsPerGpu) == "412.3");
  rows[1].cost.model_flops_per_s_per_gpu = 0.0512e12;  // a CPU
  CHECK(CellText(rows[1], 1, SearchColumn::kTflopsPerGpu) == "0.0512");
  CHECK(SortedOrder(rows, SearchColumn::kTflopsPerGpu, false).front() == 0);
  CHECK(std::string(ColumnTitle(SearchColumn::kTflopsPerGpu)) == "TFLOP/s/GPU");
}

TEST_CASE("number spellings", "[gui][views]") {
  // Memory in GiB (2^30 bytes), as PyTorch reports it: an 80 GiB card reads 80.0 GiB.
  CHECK(FormatGiB(24.9 * kBytesPerGiB) == "24.9 GiB");
  CHECK(FormatGiB(3.37 * kBytesPerGiB) == "3.37 GiB");
  CHECK(FormatGiB(80.0 * kBytesPerGiB) == "80.0 GiB");
  CHECK(FormatMiB(12.5 * kBytesPerMiB, 2) == "12.50 MiB");
  CHECK(FormatSeconds(3.514) == "3.51 s");
  CHECK(FormatSeconds(0.0089) == "8.9 ms");
  CHECK(FormatSeconds(35e-6) == "35 us");
  CHECK(FormatCount(6.738e9) == "6.74B");
  CHECK(FormatTokensPerS(74600) == "74.6k");
  CHECK(FormatPercent(0.4351) == "43.5%");
}

}  // namespace meshplan
