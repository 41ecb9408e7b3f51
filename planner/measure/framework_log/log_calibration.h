// Fitting a framework profile's calibration (FrameworkCalibration, planner/framework_spec.h) to
// the step times of its users' runs, read from their logs: what `meshplan calibrate --from-logs`
// does (docs/framework_logs.md "Calibrating from logs").
//
// Each run is a plan and the median step it measured (MeasurementOfRun). The factors the profile
// declares fittable are found by Gauss-Newton on the log ratios r_i = ln(T_i(c) / measured_i),
// where T_i is Estimate()'s step time of run i under the profile with factors c, minimising
// sum r_i^2 (the relative errors, so a long step weighs no more than a short one), with a
// numerical Jacobian in ln c and each factor kept in [0.01, 10]. The step time is monotone in
// each factor (a faster rate never slows a step), so the fit is well posed once the runs differ
// enough: compute_scale and bandwidth_scale together need runs whose steps are bound differently
// (e.g. two sequence lengths or micro-batch sizes); when they cannot tell the factors apart the
// fit refuses to guess. Factors not declared fittable keep the profile's values.
#pragma once

#include <string>
#include <vector>

#include "planner/config/config_loader.h"
#include "planner/framework_spec.h"

namespace meshplan {

struct LoggedStepTime {
  PlanFile plan;            // the plan that ran (its framework is replaced by the fitted one)
  double measured_s = 0;    // its median step after warm-up
  std::string source;       // the log, for messages
};

struct LogCalibrationFit {
  FrameworkSpec framework;            // the base profile with the fitted factors
  std::vector<double> predicted_s;    // per run, under `framework`
  double rms_relative_error = 0;      // sqrt(mean(((predicted - measured) / measured)^2))
};

// InputError (file: the first run's source, field "fittable") when the profile declares nothing
// fittable, when there are fewer runs than fitted factors, or when the runs cannot tell the
// fitted factors apart (the Jacobian is singular).
LogCalibrationFit FitFrameworkCalibration(const FrameworkSpec& base,
                                          const std::vector<LoggedStepTime>& runs);

}  // namespace meshplan
