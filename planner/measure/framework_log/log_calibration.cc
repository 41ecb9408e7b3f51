#include "planner/measure/framework_log/log_calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/input_error.h"

namespace meshplan {
namespace {

constexpr double kMinScale = 0.01, kMaxScale = 10;

// The fitted factors of `c`, in the order compute, bandwidth.
std::vector<double*> Fitted(FrameworkCalibration* c) {
  std::vector<double*> out;
  if (c->fit_compute) out.push_back(&c->compute_scale);
  if (c->fit_bandwidth) out.push_back(&c->bandwidth_scale);
  return out;
}

// ln(predicted / measured) of every run under `framework`.
std::vector<double> Residuals(const FrameworkSpec& framework, const std::vector<LoggedStepTime>& runs,
                              std::vector<double>* predicted = nullptr) {
  std::vector<double> r;
  for (const LoggedStepTime& run : runs) {
    TrainingSpec training = run.plan.training;
    training.framework = framework;
    const double t = Estimate(run.plan.model, run.plan.cluster, training, run.plan.plan).time.total_s;
    if (predicted) predicted->push_back(t);
    r.push_back(std::log(t / run.measured_s));
  }
  return r;
}

double SumSquares(const std::vector<double>& r) {
  double s = 0;
  for (double x : r) s += x * x;
  return s;
}

}  // namespace

LogCalibrationFit FitFrameworkCalibration(const FrameworkSpec& base,
                                          const std::vector<LoggedStepTime>& runs) {
  const std::string where = runs.empty() ? "<command line>" : runs.front().source;
  FrameworkSpec f = base;
  const size_t n = Fitted(&f.calibration).size();
  if (n == 0)
    throw InputError({where}, "fittable",
                     "the profile " + FrameworkLabel(base) + " declares nothing fittable "
                     "(calibration: fittable: [compute_scale, bandwidth_scale])");
  if (runs.size() < n)
    throw InputError({where}, "fittable",
                     fmt::format("{} run(s) cannot determine {} fitted factors: give the logs of "
                                 "runs of different plans (e.g. two sequence lengths)", runs.size(), n));
  std::vector<double> r = Residuals(f, runs);
  for (int iteration = 0; iteration < 50; ++iteration) {
    // Jacobian of r in ln(factor), by forward differences.
    constexpr double kStep = 1e-4;
    std::vector<std::vector<double>> jac(n);
    for (size_t k = 0; k < n; ++k) {
      FrameworkSpec moved = f;
      *Fitted(&moved.calibration)[k] *= std::exp(kStep);
      const std::vector<double> rk = Residuals(moved, runs);
      for (size_t i = 0; i < runs.size(); ++i) jac[k].push_back((rk[i] - r[i]) / kStep);
    }
    // Normal equations (n <= 2): (J^T J) d = -J^T r.
    double a[2][2] = {}, b[2] = {};
    for (size_t k = 0; k < n; ++k) {
      for (size_t l = 0; l < n; ++l)
        for (size_t i = 0; i < runs.size(); ++i) a[k][l] += jac[k][i] * jac[l][i];
      for (size_t i = 0; i < runs.size(); ++i) b[k] -= jac[k][i] * r[i];
    }
    double d[2] = {};
    if (n == 1) {
      if (a[0][0] < 1e-12)
        throw InputError({where}, "fittable", "the runs' step times do not depend on the fitted factor");
      d[0] = b[0] / a[0][0];
    } else {
      const double det = a[0][0] * a[1][1] - a[0][1] * a[1][0];
      if (std::abs(det) < 1e-6 * a[0][0] * a[1][1] || a[0][0] < 1e-12 || a[1][1] < 1e-12)
        throw InputError({where}, "fittable",
                         "the runs cannot tell compute_scale from bandwidth_scale (their steps are "
                         "bound alike): add runs of other shapes, or declare one factor fittable");
      d[0] = (b[0] * a[1][1] - a[0][1] * b[1]) / det;
      d[1] = (a[0][0] * b[1] - a[1][0] * b[0]) / det;
    }
    // Halve the step until the fit improves (the model is piecewise smooth).
    const double before = SumSquares(r);
    double largest = 0;
    for (double step = 1; step > 1e-4; step /= 2) {
      FrameworkSpec trial = f;
      std::vector<double*> factors = Fitted(&trial.calibration);
      for (size_t k = 0; k < n; ++k)
        *factors[k] = std::clamp(*factors[k] * std::exp(step * d[k]), kMinScale, kMaxScale);
      std::vector<double> rt = Residuals(trial, runs);
      if (SumSquares(rt) < before) {
        f = trial;
        r = rt;
        largest = std::max(std::abs(step * d[0]), std::abs(step * d[1]));
        break;
      }
    }
    if (largest < 1e-9) break;
  }
  LogCalibrationFit fit;
  fit.framework = f;
  Residuals(f, runs, &fit.predicted_s);
  double sum = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const double e = (fit.predicted_s[i] - runs[i].measured_s) / runs[i].measured_s;
    sum += e * e;
  }
  fit.rms_relative_error = std::sqrt(sum / static_cast<double>(runs.size()));
  return fit;
}

}  // namespace meshplan
