#include "planner/validate/error_band.h"

#include <fmt/format.h>

#include <cmath>

#include "planner/input_error.h"
#include "planner/validate/published_runs.h"

namespace meshplan {
namespace {

bool IsTimeFigure(PublishedFigure figure) {
  return figure != PublishedFigure::kActivationMemory;
}

}  // namespace

std::string GpuGeneration(const std::string& gpu_name) {
  return gpu_name.substr(0, gpu_name.find('-'));
}

ErrorBand ErrorBandOf(const ValidationReport& report, const std::string& framework,
                      const std::string& generation) {
  ErrorBand band{framework, generation, 0, 0};
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
    return ErrorBandOf(PredictPublishedRuns(LoadPublishedRuns(DefaultPublishedRunsPath())),
                       framework.name, generation);
  } catch (const InputError&) {
    return {framework.name, generation, 0, 0};  // no runs file to measure the band by
  }
}

std::string DescribeBand(const ErrorBand& band) {
  if (band.runs == 0)
    return fmt::format("no published run of {} on {} backs this prediction", band.framework,
                       band.generation);
  return fmt::format("+-{:.0f}%: {} on {}, {} published run{}", band.mape_pct, band.framework,
                     band.generation, band.runs, band.runs == 1 ? "" : "s");
}

nlohmann::json ErrorBandToJson(const ErrorBand& band) {
  return {{"framework", band.framework}, {"generation", band.generation}, {"runs", band.runs},
          {"mape_pct", band.mape_pct}};
}

}  // namespace meshplan
