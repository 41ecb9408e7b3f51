// `meshplan compare PLAN.yaml MEASURED.json`: the cost model's prediction beside
// what `meshplan run` measured, with the error in % per figure (planner/measure/compare.h).
//
//   meshplan compare plan.yaml measured.json [--tolerance 2] [--format table|json]
//
// Exit codes: 0 every predicted figure within the tolerance; 1 some figure outside
// it (each is named on stderr); 2 bad input (unreadable files, a measurement of
// another plan). Figures without a calibrated prediction (step time of a CPU run
// against GPU hardware) are shown as such and never fail.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/setup_options.h"
#include "planner/config/config_loader.h"
#include "planner/measure/compare.h"
#include "planner/measure/measurement.h"

namespace meshplan {
namespace {

struct CompareCommandOptions {
  std::string plan_file;
  std::string measured_file;
  double tolerance_pct = 5.0;
  std::string format = "table";
};

int RunCompare(const CompareCommandOptions& options) {
  const PlanFile plan_file = NamingFlag("plan", [&] { return LoadPlanFile(options.plan_file); });
  const Measurement measured = LoadMeasurement(options.measured_file);
  const Comparison comparison =
      ComparePlan(plan_file, measured, options.tolerance_pct, options.measured_file);
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
  command->add_option("measured", options->measured_file, "measured.json written by `meshplan run`")
      ->required();
  command->add_option("--tolerance", options->tolerance_pct,
                      "largest |error| in percent that still passes")
      ->check(FiniteInRange(0.0, 1000.0))
      ->capture_default_str();
  AddFormatOption(command, &options->format);
  command->callback([options, exit_code] { *exit_code = RunCompare(*options); });
}

}  // namespace meshplan
