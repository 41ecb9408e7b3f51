// `meshplan estimate`: the analytic cost of one plan (planner/cost/cost_model.h), as a
// table or JSON (planner/cost/cost_report.h).
//
//   meshplan estimate --model llama2-7b --cluster 8xH100 --plan "dp=2,tp=4,sp=1"
//       --global-batch 64 --seq 4096 [--precision mixed] [--memory-model detailed]
//       [--headroom 0.05] [--format table|json]
//   meshplan estimate --plan-file plan.yaml      (model, cluster, training and plan from the file)
//
// Bad input (unknown model, malformed --plan, a plan that breaks a rule of Validate())
// is an InputError: message on stderr, exit code 2.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/setup_options.h"
#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/cost_report.h"
#include "planner/figure_check.h"
#include "planner/input_error.h"
#include "planner/parallel_plan.h"
#include "planner/validate/error_band.h"

namespace meshplan {
namespace {

struct EstimateCommandOptions {
  SetupOptions setup;
  PlanInputOptions input;      // --plan / --plan-file
  std::string memory_model = "detailed";
  double headroom = kDefaultMemoryHeadroom;
  std::string format = "table";
};

int RunEstimate(const CLI::App& command, const EstimateCommandOptions& options) {
  const PlanFile input = ResolvePlanInput(command, options.setup, options.input);

  EstimateOptions estimate_options;
  if (options.memory_model == "seed") estimate_options.memory_model = MemoryModel::kSeed;
  else estimate_options.memory_model = MemoryModel::kDetailed;  // CLI11 checked the spelling
  estimate_options.memory_headroom = options.headroom;

  const PlanCost cost =
      Estimate(input.model, input.cluster, input.training, input.plan, estimate_options);
  CheckFigures(cost, DescribeInputs(input));
  // How far validate finds this framework on this GPU generation from published runs.
  const ErrorBand band = ErrorBandFor(input.training.framework, input.cluster.gpu);
  if (options.format == "json") {
    nlohmann::json out = CostToJson(cost);
    out["setup"] = SetupToJson(input);
    out["memory_model"] = options.memory_model;
    out["memory_headroom"] = options.headroom;
    out["error_band"] = ErrorBandToJson(band);
    std::cout << ToJsonText(out) << "\n";
  } else {
    std::cout << FormatCostTable(input, cost);
    std::cout << fmt::format("step time {:.4g} s, {} (meshplan validate)\n", cost.time.total_s,
                             DescribeBand(band));
  }
  return 0;
}

}  // namespace

void AddEstimateCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<EstimateCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "estimate", "the analytic cost of one plan: parameters, memory per GPU, FLOPs, "
                  "communication, step time, tokens/s, MFU, and whether it fits");
  AddSetupOptions(command, &options->setup);
  AddPlanInputOptions(command, &options->input);
  command->add_option("--memory-model", options->memory_model,
                      "seed (the documents' formulas) | detailed (every tensor)")
      ->check(CLI::IsMember({"seed", "detailed"}))
      ->capture_default_str();
  AddHeadroomOption(command, &options->headroom);
  AddFormatOption(command, &options->format);
  command->callback([command, options, exit_code] { *exit_code = RunEstimate(*command, *options); });
}

}  // namespace meshplan
