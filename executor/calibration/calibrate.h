// RunCalibration: what `meshplan calibrate` does, as a library call.
//
// Runs the micro-benchmarks of executor/calibration/micro_benchmarks.h on one device for
// the shapes of a model, fits the cost model's rates (planner/measure/calibration_fit.h), and
// returns the calibrated GpuSpec beside every sample (measured and fitted) and a few
// whole-block checks (not fitted: how well the fitted rates add up to a real block).
// CPU: the profile describes ONE process with `threads` intra-op threads, so a profile for
// N ranks on one machine is calibrated with --threads cores/N; peaks are measured. CUDA:
// peaks come from the base hardware file (data sheet); only efficiencies and the kernel
// overhead are fitted.
// Throws std::runtime_error when the device is not available, InputError on bad options.
// Threads per rank and memory share: docs/executor_internals.md#calibration.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "executor/calibration/micro_benchmarks.h"
#include "planner/cluster_spec.h"
#include "planner/hardware_spec.h"
#include "planner/measure/calibration_fit.h"
#include "planner/model_spec.h"
#include "planner/training_spec.h"

namespace meshplan {

struct CalibrationOptions {
  std::string device = "cpu";              // cpu | cuda
  Precision precision = Precision::kFp32;  // CPU: fp32 only; CUDA: bf16 or mixed (bf16 matmuls)
  ModelSpec model;                         // whose shapes are benchmarked
  std::vector<BenchShape> shapes;          // empty: DefaultCalibrationShapes
  bool quick = false;                      // fewer shapes and repeats (CI: a few seconds)
  int threads = 0;                         // CPU intra-op threads (0: LibTorch's default)
  GpuSpec base;                            // name, memory and (CUDA) data-sheet peaks
  // Rank processes for the collective benchmarks (CPU, Gloo; < 2: none). They are copies of
  // this executable, which must run them (executor/calibration/collective_benchmarks.h).
  int collective_ranks = 0;
};

struct CalibrationResult {
  GpuSpec gpu;                              // the calibrated spec (source line included)
  std::optional<NetworkTier> network;       // measured when collective_ranks >= 2
  std::vector<CollectiveSample> collective_samples;  // what `network` is fitted to
  CalibrationFit fit;
  MeasuredPeaks peaks;
  std::vector<CalibrationSample> samples;   // fitted, in fit order (fit.predicted_s)
  std::vector<CalibrationSample> checks;    // whole blocks, not fitted
  std::vector<double> check_predicted_s;    // TimeOf(check.work, fit.rates)
  std::vector<std::string> warnings;
  std::string host;
  std::string date;                         // YYYY-MM-DD (UTC)
  std::string device_name;                  // "cpu (N threads)" or the CUDA device name
  int threads = 0;
  double seconds = 0;                       // wall time of the whole calibration
};

std::vector<BenchShape> DefaultCalibrationShapes(const std::string& device, const ModelSpec& model,
                                                 bool quick);

CalibrationResult RunCalibration(const CalibrationOptions& options);

}  // namespace meshplan
