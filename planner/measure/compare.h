// Compare: the cost model's prediction beside what `meshplan run` measured, figure
// by figure, with the error in percent. What `meshplan compare` prints.
//
// Figures: the peak memory of every rank against the detailed memory model of its
// pipeline stage (EstimateStageMemory; with offload the device's peak), for a plan that
// offloads also its host memory (MemoryBreakdown::host_total_bytes() against
// RankMeasurement::host_optimizer_bytes; "nothing measured" in files without it), the
// median step time and tokens/s against
// Estimate(), and the same rate per GPU: tokens/s per GPU and model TFLOP/s per GPU (the
// model FLOPs of the step over the measured time; derived from tokens/s, so they carry its
// error and are never counted twice as failures). error_pct = (predicted - measured) / measured * 100 (positive: the
// model over-predicts). A figure is checked against the tolerance only when a real
// prediction exists: step time and tokens/s need the plan's hardware to describe the
// device that ran (a CPU run needs a CPU profile, named "cpu...", as `meshplan
// calibrate` writes); otherwise the figure is listed as "no prediction" with the
// reason and never fails. Memory is counted on every device.
// A measurement of emulated ranks (`meshplan run --emulate-rank`, Measurement::emulated_comm)
// has the peak memory of those ranks only, and one time figure: the step beside the
// prediction of its compute, optimizer and (communication "model") exposed communication,
// without the pipeline bubble, its name and note saying how communication was emulated.
// ComparePlan throws InputError when the measurement is not of this plan (model,
// plan, world size, batch, sequence or precision differ). Pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "planner/config/config_loader.h"
#include "planner/measure/measurement.h"

namespace meshplan {

enum class FigureStatus {
  kWithin,        // |error| <= tolerance
  kOutside,       // |error| > tolerance: `compare` exits 1
  kNoPrediction,  // nothing calibrated to compare with (see note)
};
const char* ToString(FigureStatus status);  // within | outside | no prediction

struct FigureComparison {
  std::string figure;  // "peak memory rank 1 (stage 0)", "host memory rank 1 (stage 0)",
                       // "step time", "tokens/s", "tokens/s per GPU", "model TFLOP/s per GPU"
  std::string unit;    // "bytes" | "s" | "tokens/s" | "FLOP/s" (shown in TFLOP/s)
  double predicted = 0;
  double measured = 0;
  double error_pct = 0;  // (predicted - measured) / measured * 100; 0 without a prediction
  FigureStatus status = FigureStatus::kNoPrediction;
  std::string note;  // why there is no prediction
  bool derived = false;  // another figure in other units (per GPU): never a failure of its
                         // own; JSON "derived": true
};

struct Comparison {
  double tolerance_pct = 0;
  std::string device;  // what ran (Measurement environment)
  std::string hardware;  // what the plan predicts for (GpuSpec::name)
  std::string framework;  // CompareLoggedRun: the profile predicted under (FrameworkLabel)
  std::vector<FigureComparison> figures;

  // "step time: error +23.4% exceeds 10%" for every figure outside the tolerance.
  std::vector<std::string> Failures() const;
};

// True when `gpu` describes `device` ("cpu" or a CUDA device name): a CPU profile
// for the CPU, else the GPU's family name (the part of gpu.name before the first
// '-', e.g. "h100") inside the device name, case-insensitively.
bool HardwareDescribesDevice(const GpuSpec& gpu, const std::string& device);

Comparison ComparePlan(const PlanFile& plan_file, const Measurement& measured,
                       double tolerance_pct, const std::string& measured_source = "measured.json");

// A framework's run of the plan, read from its log (planner/measure/framework_log/
// framework_log.h): the prediction is made under `framework`. Memory: each rank the log
// reports, at its pipeline stage with pp outermost (LoggedRankStage); its max allocated
// against the detailed model's tensors and workspaces, its max reserved against those plus
// the caching allocator's unused share (the runtime lines but the CUDA context and NCCL's
// buffers; docs/framework_logs.md "What is compared"); a figure the log does not give is
// left out. Time as ComparePlan. InputError (file = log_source) for a rank outside the plan.
Comparison CompareLoggedRun(const PlanFile& plan_file, const FrameworkSpec& framework,
                            const Measurement& measured, double tolerance_pct,
                            const std::string& log_source);
// The pipeline stage of `rank` in Megatron-Core's default order (tp-cp-ep-dp-pp) and
// torchtitan's mesh (pp outermost): rank / (world_size / pp).
int64_t LoggedRankStage(const ParallelPlan& plan, int64_t rank);

nlohmann::json ComparisonToJson(const Comparison& comparison);
std::string FormatComparisonTable(const Comparison& comparison);

}  // namespace meshplan
