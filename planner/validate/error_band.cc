#include "planner/validate/error_band.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "planner/input_error.h"
#include "planner/validate/published_runs.h"

namespace meshplan {
namespace {

bool IsTimeFigure(PublishedFigure figure) {
  return figure != PublishedFigure::kActivationMemory;
}

// `runs` with only the rows on `generation` that `keep` accepts (a skipped row never counts):
// the band predicts no row it would not count.
template <typename Keep>
PublishedRuns RowsOn(PublishedRuns runs, const std::string& generation, const Keep& keep) {
  for (PublishedTable& table : runs.tables)
    std::erase_if(table.rows, [&](const PublishedRow& row) {
      return row.skipped() || GpuGeneration(row.setup.cluster.gpu.name) != generation || !keep(row);
    });
  return runs;
}

// What `lender`'s runs are to `framework` when its band borrows them ("" when it does not).
const char* RelationOf(const FrameworkSpec& lender, const std::string& framework) {
  if (lender.built_on == framework) return "built on";
  if (lender.version_of == framework) return "an earlier version of";
  return "";
}

// The band of `framework` from `runs`, the rows of the frameworks built on it or of its
// earlier versions, each predicted under `framework`.
ErrorBand BorrowedBand(const FrameworkSpec& framework, const std::string& generation,
                      PublishedRuns runs) {
  std::vector<std::string> lenders;
  std::string relation;
  for (const PublishedTable& table : runs.tables)
    for (const PublishedRow& row : table.rows) {
      lenders.push_back(row.framework);
      const std::string of = RelationOf(row.setup.training.framework, framework.name);
      relation = relation.empty() || relation == of ? of : "built on or earlier versions of";
    }
  std::sort(lenders.begin(), lenders.end());
  lenders.erase(std::unique(lenders.begin(), lenders.end()), lenders.end());
  if (lenders.empty()) return {framework.name, generation, 0, 0, "", ""};
  PredictUnder(framework, &runs);
  ErrorBand band = ErrorBandOf(PredictPublishedRuns(runs), framework.name, generation);
  band.runs_of = fmt::format("{}", fmt::join(lenders, ", "));
  band.relation = relation;
  return band;
}

}  // namespace

std::string GpuGeneration(const std::string& gpu_name) {
  return gpu_name.substr(0, gpu_name.find('-'));
}

ErrorBand ErrorBandOf(const ValidationReport& report, const std::string& framework,
                      const std::string& generation) {
  ErrorBand band{framework, generation, 0, 0, "", ""};
  double sum = 0;
  for (const ValidatedTable& table : report.tables) {
    if (!IsTimeFigure(table.figure)) continue;
    for (const ValidatedRow& row : table.rows) {
      if (!row.has_published || row.framework != framework ||
          GpuGeneration(row.gpu) != generation)
        continue;
      sum += std::abs(row.error_pct);
      ++band.runs;
    }
  }
  if (band.runs > 0) band.mape_pct = sum / static_cast<double>(band.runs);
  return band;
}

ErrorBand ErrorBandFor(const FrameworkSpec& framework, const GpuSpec& gpu) {
  const std::string generation = GpuGeneration(gpu.name);
  try {
    PublishedRuns runs = LoadPublishedRuns(DefaultPublishedRunsPath());
    const ErrorBand own = ErrorBandOf(
        PredictPublishedRuns(RowsOn(runs, generation, [&](const PublishedRow& row) {
          return row.framework == framework.name;
        })),
        framework.name, generation);
    if (own.runs > 0) return own;
    return BorrowedBand(framework, generation,
                        RowsOn(std::move(runs), generation, [&](const PublishedRow& row) {
                          return *RelationOf(row.setup.training.framework, framework.name) != 0;
                        }));
  } catch (const InputError&) {
    return {framework.name, generation, 0, 0, "", ""};  // no runs file to measure the band by
  }
}

std::string DescribeBand(const ErrorBand& band) {
  if (band.runs == 0)
    return fmt::format("no published run of {} on {} backs this prediction", band.framework,
                       band.generation);
  const std::string of = band.runs_of.empty() ? "" : fmt::format(
      " of {} ({} {})", band.runs_of, band.relation, band.framework);
  return fmt::format("+-{:.0f}%: {} on {}, {} published run{}{}", band.mape_pct, band.framework,
                     band.generation, band.runs, band.runs == 1 ? "" : "s", of);
}

nlohmann::json ErrorBandToJson(const ErrorBand& band) {
  return {{"framework", band.framework}, {"generation", band.generation}, {"runs", band.runs},
          {"mape_pct", band.mape_pct}, {"runs_of", band.runs_of}, {"relation", band.relation}};
}

}  // namespace meshplan
