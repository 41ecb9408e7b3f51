// ErrorBand: how far `meshplan validate` finds the step-time predictions for one framework on
// one GPU generation from the published runs it reproduces, to print beside a prediction
// ("12.99 s, +-7%: megatron-core on h100, 12 published runs"), or that no run backs it.
//
// The band is the mean |error| of the rows whose figure is a time or a throughput
// (step_time_s, tflops_per_gpu, tokens_per_s_per_gpu), not memory. A generation is the GPU
// name up to its first '-' (h100-sxm and h100-pcie are h100). Nothing is fitted: the band
// only reports what validate measured. A profile that no published run used (megatron-core)
// borrows the runs of the frameworks built on it (FrameworkSpec::built_on: nemo) and of its
// earlier versions (FrameworkSpec::version_of: torchtitan-2024-04), predicted under the
// profile itself, as `validate --framework` would, and the band says whose runs.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "planner/framework_spec.h"
#include "planner/hardware_spec.h"
#include "planner/validate/validation.h"

namespace meshplan {

struct ErrorBand {
  std::string framework;   // the profile's name
  std::string generation;  // "h100"
  int64_t runs = 0;        // published runs behind the band (0: none)
  double mape_pct = 0;     // their mean |error|, percent
  std::string runs_of;     // "": the framework's own runs; else the frameworks built on it
                           // or its earlier versions whose runs were predicted under it ("nemo")
  std::string relation;    // what runs_of are to it: "built on" | "an earlier version of"
};

std::string GpuGeneration(const std::string& gpu_name);  // "h100-sxm" -> "h100"
ErrorBand ErrorBandOf(const ValidationReport& report, const std::string& framework,
                      const std::string& generation);
// The band from the project's own published runs (DefaultPublishedRunsPath()); a runs file
// that cannot be read gives a band of 0 runs.
ErrorBand ErrorBandFor(const FrameworkSpec& framework, const GpuSpec& gpu);
// "+-7%: megatron-core on h100, 12 published runs" | "+-9%: megatron-core on h100, 9 published
// runs of nemo (built on megatron-core)" | "+-8%: torchtitan on a100, 8 published runs of
// torchtitan-2024-04 (an earlier version of torchtitan)" | "no published run of torchtitan on h100 backs this
// prediction".
std::string DescribeBand(const ErrorBand& band);
// framework, generation, runs, mape_pct, runs_of ("" for the framework's own).
nlohmann::json ErrorBandToJson(const ErrorBand& band);

}  // namespace meshplan
