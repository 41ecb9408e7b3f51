// `meshplan calibrate --from-logs LOG... --plan PLAN... --framework NAME|FILE [--out FILE]`:
// fits the factors the framework profile declares fittable to the step times its runs logged
// (planner/measure/framework_log/log_calibration.h) and writes the profile with them, which every
// command takes as `--framework FILE` (and a plan file as training.framework: FILE).
//
// Each LOG is one run: a log file, or a folder whose files are one run's logs (the PyTorch hook's
// JSON per rank). --plan gives the plan of every run (one plan for all, or one per LOG in order).
// Without --from-logs, `meshplan calibrate` is meshplan-exec's (timing this machine's kernels).
// Exit codes: 0 written; 2 bad input (a log that is not the framework's format, a plan that does
// not match, runs that cannot determine the factors); nothing is written then.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/setup_options.h"
#include "planner/atomic_file.h"
#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/input_error.h"
#include "planner/measure/framework_log/framework_log.h"
#include "planner/measure/framework_log/log_calibration.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

struct CalibrateLogsOptions {
  std::vector<std::string> logs;
  std::vector<std::string> plans;
  std::string framework;
  std::string out;  // empty: <framework>-calibrated.yaml
  int64_t warmup = 1;
};

int RunCalibrateLogs(const CalibrateLogsOptions& o) {
  if (o.plans.size() != 1 && o.plans.size() != o.logs.size())
    throw InputError({"<command line>"}, "plan",
                     fmt::format("{} plans for {} logs: give one plan for all, or one per log in "
                                 "order", o.plans.size(), o.logs.size()));
  const FrameworkSpec base = NamingFlag("--framework", [&] { return LoadFramework(o.framework); });
  std::vector<LoggedStepTime> runs;
  for (size_t i = 0; i < o.logs.size(); ++i) {
    const std::string& plan_path = o.plans[o.plans.size() == 1 ? 0 : i];
    const PlanFile plan = NamingFlag("plan", [&] { return LoadPlanFile(plan_path, &base); });
    const LoggedRun run = ReadFrameworkLogs(base.log_format, FilesOfRun(o.logs[i]), RunShapeOf(plan));
    runs.push_back({plan, MeasurementOfRun(run, plan, o.warmup, o.logs[i]).median_step_s, o.logs[i]});
  }
  LogCalibrationFit fit = FitFrameworkCalibration(base, runs);
  const std::string stem = std::filesystem::path(base.name).stem().string();
  const std::string out = o.out.empty() ? stem + "-calibrated.yaml" : o.out;
  fit.framework.name = std::filesystem::path(out).stem().string();
  const FrameworkCalibration& c = fit.framework.calibration;
  std::string comment = fmt::format(
      "{} calibrated by `meshplan calibrate --from-logs` from {} run(s):", FrameworkLabel(base),
      runs.size());
  for (const LoggedStepTime& r : runs) comment += "\n  " + r.source;
  comment += fmt::format("\nrms error of the step times {:.2f}%; the rest is the base profile's.",
                         fit.rms_relative_error * 100);
  WriteFileAtomically(out, FrameworkToYamlText(fit.framework, comment));

  std::cout << fmt::format("{} from {} run(s): compute_scale {:.4f}{}, bandwidth_scale {:.4f}{}\n",
                           FrameworkLabel(base), runs.size(), c.compute_scale,
                           c.fit_compute ? " (fitted)" : "", c.bandwidth_scale,
                           c.fit_bandwidth ? " (fitted)" : "");
  size_t width = 3;
  for (const LoggedStepTime& r : runs) width = std::max(width, r.source.size());
  std::cout << fmt::format("{:<{}}  {:>10}  {:>10}  {:>7}\n", "log", width, "measured", "predicted", "error");
  for (size_t i = 0; i < runs.size(); ++i)
    std::cout << fmt::format("{:<{}}  {:>10}  {:>10}  {:>+6.1f}%\n", runs[i].source, width,
                             FormatSeconds(runs[i].measured_s, 3), FormatSeconds(fit.predicted_s[i], 3),
                             (fit.predicted_s[i] - runs[i].measured_s) / runs[i].measured_s * 100);
  std::cout << "wrote " << out << " (use it as --framework " << out << ")\n";
  return 0;
}

}  // namespace

void AddCalibrateLogsCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CalibrateLogsOptions>();
  // The summary --help lists is the hardware calibration's (meshplan-exec); --from-logs is
  // documented in `meshplan calibrate --from-logs --help` and docs/commands.md.
  CLI::App* command = app.add_subcommand("calibrate", kCalibrateSummary);
  command->footer("With --from-logs (these options): fit the framework profile's fittable factors to "
                  "its runs' logs and write the profile (docs/framework_logs.md). Without it, "
                  "`meshplan calibrate --help` lists meshplan-exec's options.");
  command->add_option("--from-logs", o->logs,
                      "the runs' logs in the framework's format (a folder: one run's files)")
      ->required();
  command->add_option("--plan", o->plans, "the plan of each run (one for all, or one per log)")
      ->required();
  command->add_option("--framework", o->framework,
                      "the framework that ran: a name from configs/frameworks/ or a profile file")
      ->required();
  command->add_option("--out", o->out, "the profile to write (default: <framework>-calibrated.yaml)");
  command->add_option("--warmup", o->warmup, "the first timing lines of each log left out")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000}))
      ->capture_default_str();
  command->callback([o, exit_code] { *exit_code = RunCalibrateLogs(*o); });
}

}  // namespace meshplan
