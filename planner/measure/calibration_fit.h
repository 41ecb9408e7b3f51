// Calibration fit: timed micro-benchmarks -> the cost model's sustained rates -> a GpuSpec.
//
// Each CalibrationSample is one timed benchmark with its work counted the way the cost
// model counts it (planner/cost/compute_work.h ComputeWork: matmul and attention kernels
// with their shapes, memory-bound bytes, launched kernels). The cost model times work as
//   t = shaped matmul FLOPs / R_mm + shaped attention FLOPs / R_attn
//       + (memory_bytes + serial GEMM bytes) / R_mem + kernels * c
// (serial GEMM bytes: a CPU profile's GEMM operands, which its BLAS streams on top of the
// compute; 0 on a GPU: compute_work.h SerialGemmBytes)
// (TimeOf; "shaped": tile / wave quantized, k overhead added, the compute side of each
// GEMM's roofline), linear in (1/R_mm, 1/R_attn, 1/R_mem, c) for a fixed kernel geometry
// (the GPU's KernelShape, not fitted here). FitComputeRates
// solves that for the samples by weighted least squares, min sum (weight * (t_pred - t))^2,
// with Eigen, under the constraint that every unknown is >= 0 (a negative overhead is
// fixed at 0 and the rest refitted). The default weight 1/t fits the RELATIVE error of
// every sample alike; the calibration instead weights each sample by its share of a
// training step (how often the step runs it / the step's time), so the fit minimises the
// error of step times, where one rate per class must serve kernels that reach different
// fractions of it.
// ApplyCalibration turns the fitted rates into the GpuSpec fields: efficiency = rate /
// peak, where the peak is the data sheet's (GPU) or the best rate measured (CPU profile).
// Pure functions; no LibTorch (the timing lives in executor/calibration/).
#pragma once

#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/cost/collective_time.h"
#include "planner/cost/step_work.h"
#include "planner/hardware_spec.h"
#include "planner/training_spec.h"

namespace meshplan {

struct CalibrationSample {
  std::string name;     // "linear_fwd w_up N=512", "block_memory_bwd 2x128", ...
  ComputeWork work;     // as the cost model counts it
  double seconds = 0;   // measured (median over repeats)
  double weight = 0;    // weight of its error in the fit, 1/s; 0: 1 / seconds (relative)
};

struct CalibrationFit {
  // Sustained rates; a class without any sample keeps 0 (not fitted).
  ComputeRates rates;
  std::vector<double> predicted_s;  // per sample, TimeOf(work, rates)
  double weighted_error = 0;        // sqrt(sum (w (predicted - measured))^2 / sum (w measured)^2):
                                    // with step-share weights, the error of the step times
  double rms_relative_error = 0;    // sqrt(mean(((predicted - measured) / measured)^2))
  double max_relative_error = 0;    // max |predicted - measured| / measured
};

// Throws std::invalid_argument when a sample has no work or a non-positive time, and
// std::runtime_error when the samples cannot determine a rate (e.g. its fitted inverse
// is not positive: the class's work does not explain any of the measured time).
// `geometry`: the kernel geometry and element size (RatesFor of the base GpuSpec); its
// rates are ignored, fit.rates carries its geometry and the fitted rates.
CalibrationFit FitComputeRates(const std::vector<CalibrationSample>& samples,
                               const ComputeRates& geometry = {});

// Peaks measured on the device itself (a CPU has no data sheet figure that its
// kernels can be held against); 0 = keep the base GpuSpec's data-sheet peak.
struct MeasuredPeaks {
  double flops = 0;          // best matmul FLOP/s seen (the largest square GEMM)
  double bandwidth_Bps = 0;  // best copy bandwidth seen (bytes read + written per second)
};

// The base spec with the fit applied for `precision`:
//  * measured peaks (CPU): peak_flops_fp32 = peak_flops_bf16 = max(peaks.flops, fitted
//    matmul and attention rates) (a CPU runs 16-bit matmuls no faster than fp32 ones),
//    memory_bandwidth_Bps = max(peaks.bandwidth_Bps, fitted memory rate);
//  * efficiencies = fitted rate / peak (the precision's peak), kernel_overhead_s = c.
// A fitted rate above a data-sheet peak (efficiency > 1, impossible) is capped at 1 and
// reported in *warnings. Classes that were not fitted keep the base's efficiency.
GpuSpec ApplyCalibration(const GpuSpec& base, const CalibrationFit& fit, const MeasuredPeaks& peaks,
                         Precision precision, std::vector<std::string>* warnings);

// One timed collective over `group_size` ranks: `bytes` is the full buffer (planner/
// collective_time.h convention).
struct CollectiveSample {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  double bytes = 0;
  int64_t group_size = 2;
  double seconds = 0;
  std::vector<double> round_seconds;  // the timed rounds `seconds` is the median of (may be empty)
};

// The tier that explains the samples with the cost model's ring formula (RingTime,
// planner/cost/collective_time.h)
//   t = RingSteps(kind, n) * latency_s + BytesSentPerRank(kind, bytes, n) / bandwidth_Bps
// (least squares on the relative error, latency >= 0). All-reduce samples beside samples of
// other kinds are fitted on their own, as the tier's all-reduce figures (NetworkTier: Gloo
// runs its own all-reduce algorithm). Throws std::invalid_argument on a sample of a group of
// one or a non-positive time, std::runtime_error when the bandwidth is not determined (every
// sample latency-bound: benchmark larger buffers).
NetworkTier FitNetworkTier(const std::vector<CollectiveSample>& samples, const std::string& name);

}  // namespace meshplan
