// `meshplan compare`: the cost model's prediction beside what a run measured, with the error
// in % per figure (planner/measure/compare.h).
//
//   meshplan compare plan.yaml measured.json [--tolerance 2] [--format table|json]
//   meshplan compare plan.yaml --log FILE... [--framework NAME|FILE] [--warmup N] ...
//
// The first form reads measured.json of `meshplan run`. The second reads a framework's own log
// (Megatron-LM, torchtitan, DeepSpeed, or the plain-PyTorch hook's JSON, one file per rank: the
// format is the framework profile's log_format; planner/measure/framework_log/framework_log.h)
// and predicts the plan under that framework (--framework, else the plan file's).
// Exit codes: 0 every predicted figure within the tolerance; 1 some figure outside
// it (each is named on stderr); 2 bad input (unreadable files, a measurement of
// another plan, a log that is not of the framework's format). Figures without a calibrated
// prediction (step time of a CPU run against GPU hardware) are shown as such and never fail.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/setup_options.h"
#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/input_error.h"
#include "planner/measure/compare.h"
#include "planner/measure/framework_log/framework_log.h"
#include "planner/measure/measurement.h"

namespace meshplan {
namespace {

struct CompareCommandOptions {
  std::string plan_file;
  std::string measured_file;
  std::vector<std::string> logs;
  std::string framework;  // empty: the plan file's
  int64_t warmup = 1;
  double tolerance_pct = 5.0;
  std::string format = "table";
};

Comparison CompareLogs(const CompareCommandOptions& options, const PlanFile& plan_file) {
  const FrameworkSpec framework =
      options.framework.empty()
          ? plan_file.training.framework
          : NamingFlag("--framework", [&] { return LoadFramework(options.framework); });
  const LoggedRun run = ReadFrameworkLogs(framework.log_format, options.logs, RunShapeOf(plan_file));
  const Measurement measured =
      MeasurementOfRun(run, plan_file, options.warmup, options.logs.front());
  return CompareLoggedRun(plan_file, framework, measured, options.tolerance_pct,
                          options.logs.front());
}

int RunCompare(const CompareCommandOptions& options) {
  if (options.measured_file.empty() == options.logs.empty())
    throw InputError({"<command line>"}, "measured",
                     "give either measured.json (a `meshplan run`) or --log FILE (a framework's "
                     "log), not both");
  // measured.json: meshplan's executor ran the plan, whatever it was searched for, so it is
  // validated under the `meshplan` profile. A framework's log: under the plan file's (the log
  // then says whether --framework names the software that wrote it).
  const FrameworkSpec executor = LoadFramework(kExecutorFramework);
  const PlanFile plan_file = NamingFlag("plan", [&] {
    return LoadPlanFile(options.plan_file, options.logs.empty() ? &executor : nullptr);
  });
  const Comparison comparison =
      options.logs.empty()
          ? ComparePlan(plan_file, LoadMeasurement(options.measured_file), options.tolerance_pct,
                        options.measured_file)
          : CompareLogs(options, plan_file);
  if (options.format == "json") std::cout << ToJsonText(ComparisonToJson(comparison)) << "\n";
  else std::cout << FormatComparisonTable(comparison);
  const std::vector<std::string> failures = comparison.Failures();
  for (const std::string& failure : failures) std::cerr << "meshplan compare: " << failure << "\n";
  return failures.empty() ? 0 : 1;
}

}  // namespace

void AddCompareCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<CompareCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "compare", "predicted vs measured for a plan: peak memory per rank (per pipeline stage), "
                 "step time, tokens/s, error in %; exit 1 past --tolerance");
  command->add_option("plan", options->plan_file, "the plan file that was run")->required();
  command->add_option("measured", options->measured_file,
                      "measured.json written by `meshplan run` (or --log)");
  command->add_option("--log", options->logs,
                      "the run's log as the framework writes it (docs/framework_logs.md); the "
                      "PyTorch hook: one JSON per rank");
  command->add_option("--framework", options->framework,
                      "with --log: the framework that ran (a name from configs/frameworks/ or a "
                      "profile file); default: the plan file's");
  command->add_option("--warmup", options->warmup,
                      "with --log: the first timing lines left out of the median")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000}))
      ->capture_default_str();
  command->add_option("--tolerance", options->tolerance_pct,
                      "largest |error| in percent that still passes")
      ->check(FiniteInRange(0.0, 1000.0))
      ->capture_default_str();
  AddFormatOption(command, &options->format);
  command->callback([options, exit_code] { *exit_code = RunCompare(*options); });
}

}  // namespace meshplan
