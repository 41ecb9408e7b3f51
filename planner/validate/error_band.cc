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

// The band of `framework` from `runs`, the rows of the frameworks built on it, each
// predicted under `framework`.
ErrorBand BuiltOnBand(const FrameworkSpec& framework, const std::string& generation,
                      PublishedRuns runs) {
  std::vector<std::string> builders;
  for (const PublishedTable& table : runs.tables)
    for (const PublishedRow& row : table.rows) builders.push_back(row.framework);
  std::sort(builders.begin(), builders.end());
  builders.erase(std::unique(builders.begin(), builders.end()), builders.end());
  if (builders.empty()) return {framework.name, generation, 0, 0, ""};
  PredictUnder(framework, &runs);
  ErrorBand band = ErrorBandOf(PredictPublishedRuns(runs), framework.name, generation);
  band.runs_of = fmt::format("{}", fmt::join(builders, ", "));
  return band;
}

}  // namespace

std::string GpuGeneration(const std::string& gpu_name) {
  return gpu_name.substr(0, gpu_name.find('-'));
}

ErrorBand ErrorBandOf(const ValidationReport& report, const std::string& framework,
                      const std::string& generation) {
  ErrorBand band{framework, generation, 0, 0, ""};
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
    return BuiltOnBand(framework, generation,
                       RowsOn(std::move(runs), generation, [&](const PublishedRow& row) {
                         return row.setup.training.framework.built_on == framework.name;
                       }));
  } catch (const InputError&) {
    return {framework.name, generation, 0, 0, ""};  // no runs file to measure the band by
  }
}

std::string DescribeBand(const ErrorBand& band) {
  if (band.runs == 0)
    return fmt::format("no published run of {} on {} backs this prediction", band.framework,
                       band.generation);
  const std::string of = band.runs_of.empty() ? "" : fmt::format(
      " of {} (built on {})", band.runs_of, band.framework);
  return fmt::format("+-{:.0f}%: {} on {}, {} published run{}{}", band.mape_pct, band.framework,
                     band.generation, band.runs, band.runs == 1 ? "" : "s", of);
}

nlohmann::json ErrorBandToJson(const ErrorBand& band) {
  return {{"framework", band.framework}, {"generation", band.generation}, {"runs", band.runs},
          {"mape_pct", band.mape_pct}, {"runs_of", band.runs_of}};
}

}  // namespace meshplan
