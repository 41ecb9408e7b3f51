// Least-squares fit of the cost model's rates (see calibration_fit.h).
#include "planner/measure/calibration_fit.h"

#include <Eigen/Dense>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <tuple>

namespace meshplan {
namespace {

// The unknowns, in column order: inverse rates (seconds per unit of work) and the overhead.
enum Column { kMatmul, kAttention, kMemory, kOverhead, kNumColumns };
constexpr std::array<const char*, kNumColumns> kColumnNames = {"matmul", "attention", "memory",
                                                               "kernel overhead"};

// The work each unknown is charged with, shapes applied (planner/cost/compute_work.h).
std::array<double, kNumColumns> Features(const ComputeWork& w, const ComputeRates& geometry) {
  return {ShapedMatmulFlops(w, geometry), ShapedAttentionFlops(w, geometry),
          w.memory_bytes + SerialGemmBytes(w, geometry), static_cast<double>(w.kernels)};
}

// min ||A x - b|| over x >= 0 (every column that is free), by an active set: solve over
// the free columns, fix the most negative one at 0, repeat (at most one round per column).
Eigen::VectorXd NonNegativeLeastSquares(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
                                        std::vector<bool> free) {
  Eigen::VectorXd x = Eigen::VectorXd::Zero(a.cols());
  for (Eigen::Index round = 0; round < a.cols(); ++round) {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index j = 0; j < a.cols(); ++j)
      if (free[static_cast<size_t>(j)]) cols.push_back(j);
    if (cols.empty()) break;
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(cols.size()));
    for (size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = a.col(cols[k]);
    const Eigen::VectorXd y = sub.colPivHouseholderQr().solve(b);
    x.setZero();
    Eigen::Index most_negative = -1;
    for (size_t k = 0; k < cols.size(); ++k) {
      x(cols[k]) = y(static_cast<Eigen::Index>(k));
      if (x(cols[k]) < 0 && (most_negative < 0 || x(cols[k]) < x(most_negative)))
        most_negative = cols[k];
    }
    if (most_negative < 0) return x;
    free[static_cast<size_t>(most_negative)] = false;
  }
  x.setZero();
  return x;
}

// Scales every column to a unit maximum (conditioning: FLOPs ~1e9 beside kernels ~10),
// solves the non-negative problem and undoes the scaling.
std::vector<double> SolveScaled(Eigen::MatrixXd a, const Eigen::VectorXd& b,
                                const std::vector<bool>& used) {
  std::vector<double> scale(static_cast<size_t>(a.cols()), 1.0);
  for (Eigen::Index j = 0; j < a.cols(); ++j) {
    if (!used[static_cast<size_t>(j)]) continue;
    scale[static_cast<size_t>(j)] = a.col(j).cwiseAbs().maxCoeff();
    a.col(j) /= scale[static_cast<size_t>(j)];
  }
  const Eigen::VectorXd x = NonNegativeLeastSquares(a, b, used);
  std::vector<double> out(scale.size());
  for (size_t j = 0; j < out.size(); ++j) out[j] = x(static_cast<Eigen::Index>(j)) / scale[j];
  return out;
}

}  // namespace

CalibrationFit FitComputeRates(const std::vector<CalibrationSample>& samples,
                               const ComputeRates& geometry) {
  if (samples.empty()) throw std::invalid_argument("calibration fit: no samples");
  const auto rows = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd a(rows, kNumColumns);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(rows);
  std::array<bool, kNumColumns> used{};
  for (Eigen::Index i = 0; i < rows; ++i) {
    const CalibrationSample& s = samples[static_cast<size_t>(i)];
    const auto f = Features(s.work, geometry);
    if (!(s.seconds > 0) || !std::isfinite(s.seconds))
      throw std::invalid_argument(fmt::format("calibration fit: sample '{}' has time {} s; "
                                              "expected a positive time", s.name, s.seconds));
    if (f[kMatmul] <= 0 && f[kAttention] <= 0 && f[kMemory] <= 0 && f[kOverhead] <= 0)
      throw std::invalid_argument("calibration fit: sample '" + s.name + "' has no work");
    if (s.weight < 0 || !std::isfinite(s.weight))
      throw std::invalid_argument(fmt::format("calibration fit: sample '{}' has weight {}; "
                                              "expected >= 0", s.name, s.weight));
    const double weight = s.weight > 0 ? s.weight : 1.0 / s.seconds;  // 1/t: relative error
    for (int j = 0; j < kNumColumns; ++j) {
      if (f[j] < 0)
        throw std::invalid_argument("calibration fit: sample '" + s.name + "' has negative " +
                                    kColumnNames[j] + " work");
      a(i, j) = f[j] * weight;
      used[j] = used[j] || f[j] > 0;
    }
    b(i) = s.seconds * weight;
  }
  const std::vector<double> inverse =
      SolveScaled(a, b, std::vector<bool>(used.begin(), used.end()));

  CalibrationFit fit;
  fit.rates = geometry;
  for (int j = kMatmul; j <= kMemory; ++j) {
    if (!used[static_cast<size_t>(j)]) continue;
    if (!(inverse[j] > 0))
      throw std::runtime_error(fmt::format(
          "calibration fit: the {} samples do not determine a rate (fitted seconds per unit "
          "{:.3g}); their time is explained by the other terms: benchmark larger {} work",
          kColumnNames[j], inverse[j], kColumnNames[j]));
  }
  fit.rates.matmul_flops_per_s = used[kMatmul] ? 1.0 / inverse[kMatmul] : 0;
  fit.rates.attention_flops_per_s = used[kAttention] ? 1.0 / inverse[kAttention] : 0;
  fit.rates.memory_Bps = used[kMemory] ? 1.0 / inverse[kMemory] : 0;
  fit.rates.kernel_overhead_s = inverse[kOverhead];

  double sum_sq = 0, weighted_sq = 0, weighted_norm = 0;
  for (const CalibrationSample& s : samples) {
    const double predicted = TimeOf(s.work, fit.rates).total();
    const double rel = (predicted - s.seconds) / s.seconds;
    const double w = s.weight > 0 ? s.weight : 1.0 / s.seconds;
    fit.predicted_s.push_back(predicted);
    sum_sq += rel * rel;
    weighted_sq += w * w * (predicted - s.seconds) * (predicted - s.seconds);
    weighted_norm += w * w * s.seconds * s.seconds;
    fit.max_relative_error = std::max(fit.max_relative_error, std::abs(rel));
  }
  fit.rms_relative_error = std::sqrt(sum_sq / static_cast<double>(samples.size()));
  fit.weighted_error = std::sqrt(weighted_sq / weighted_norm);
  return fit;
}

GpuSpec ApplyCalibration(const GpuSpec& base, const CalibrationFit& fit, const MeasuredPeaks& peaks,
                         Precision precision, std::vector<std::string>* warnings) {
  GpuSpec g = base;
  const ComputeRates& r = fit.rates;
  if (peaks.flops > 0) {
    const double peak = std::max({peaks.flops, r.matmul_flops_per_s, r.attention_flops_per_s});
    g.peak_flops_fp32 = peak;
    g.peak_flops_bf16 = peak;
  }
  if (peaks.bandwidth_Bps > 0) g.memory_bandwidth_Bps = std::max(peaks.bandwidth_Bps, r.memory_Bps);

  const auto efficiency = [&](double rate, double peak, const char* what, double keep) {
    if (rate <= 0) return keep;  // not fitted
    if (!(peak > 0)) throw std::invalid_argument(std::string("calibration: no peak for ") + what);
    const double e = rate / peak;
    if (e <= 1.0) return e;
    if (warnings != nullptr)
      warnings->push_back(fmt::format("{} rate {:.4g}/s exceeds the peak {:.4g}/s of '{}'; "
                                      "efficiency capped at 1 (is the peak right?)",
                                      what, rate, peak, base.name));
    return 1.0;
  };
  const double peak_flops = g.PeakFlops(precision);
  g.matmul_efficiency = efficiency(r.matmul_flops_per_s, peak_flops, "matmul", g.matmul_efficiency);
  // A GEMM rate measured on this machine replaces the public sweep the ceiling came from.
  if (r.matmul_flops_per_s > 0) g.matmul_ceiling_efficiency = 0;
  g.attention_efficiency =
      efficiency(r.attention_flops_per_s, peak_flops, "attention", g.attention_efficiency);
  g.memory_bandwidth_efficiency =
      efficiency(r.memory_Bps, g.memory_bandwidth_Bps, "memory", g.memory_bandwidth_efficiency);
  g.kernel_overhead_s = r.kernel_overhead_s;
  return g;
}

namespace {

// Latency per ring step and bandwidth that explain `samples` with the ring formula.
std::pair<double, double> FitRing(const std::vector<CollectiveSample>& samples) {
  const auto rows = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd a(rows, 2);  // columns: latency per step, seconds per byte sent
  Eigen::VectorXd b = Eigen::VectorXd::Ones(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const CollectiveSample& s = samples[static_cast<size_t>(i)];
    a(i, 0) = static_cast<double>(RingSteps(s.kind, s.group_size)) / s.seconds;
    a(i, 1) = BytesSentPerRank(s.kind, s.bytes, s.group_size) / s.seconds;
  }
  const std::vector<double> x = SolveScaled(a, b, {true, true});
  if (!(x[1] > 0))
    throw std::runtime_error("network fit: the samples do not determine a bandwidth (all "
                             "latency-bound?): benchmark larger buffers");
  return {x[0], 1.0 / x[1]};
}

}  // namespace

NetworkTier FitNetworkTier(const std::vector<CollectiveSample>& samples, const std::string& name) {
  if (samples.empty()) throw std::invalid_argument("network fit: no samples");
  std::vector<CollectiveSample> all_reduce, others;
  for (const CollectiveSample& s : samples) {
    if (s.group_size < 2 || !(s.seconds > 0) || !(s.bytes > 0))
      throw std::invalid_argument(fmt::format(
          "network fit: a {} sample of {} bytes over {} ranks in {} s; expected a group of at "
          "least 2, a positive size and a positive time", ToString(s.kind), s.bytes, s.group_size,
          s.seconds));
    (s.kind == CollectiveKind::kAllReduce ? all_reduce : others).push_back(s);
  }
  NetworkTier tier;
  tier.name = name;
  // The other collectives set the tier; all-reduce samples beside them its own figures.
  std::tie(tier.latency_s, tier.bandwidth_Bps) = FitRing(others.empty() ? all_reduce : others);
  if (!others.empty() && !all_reduce.empty())
    std::tie(tier.allreduce_latency_s, tier.allreduce_bandwidth_Bps) = FitRing(all_reduce);
  return tier;
}

}  // namespace meshplan
