// `meshplan export`: a plan file as the configuration another framework takes
// (planner/export/export.h; docs/export.md says what each target gets and cannot express).
//
//   meshplan export plan.yaml --to megatron|megatron-bridge|torchtitan|deepspeed|torchrun
//                   [--out FILE] [--json]
//
// Prints the text, or writes it whole to --out (planner/atomic_file.h); --json prints
// {"target", "plan_file", "text", "out"} instead. Exit codes: 0 written; 2 bad input: an
// unknown target (naming the allowed ones), a plan file that does not load or validate, or a
// plan the target cannot express (naming the knob, its value and the target), and then
// nothing is written.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/setup_options.h"
#include "planner/atomic_file.h"
#include "planner/config/config_loader.h"
#include "planner/export/export.h"

namespace meshplan {
namespace {

struct ExportCommandOptions {
  std::string plan_file;
  std::string target;
  std::string out;  // empty: stdout
  bool json = false;
};

int RunExport(const ExportCommandOptions& o) {
  ExportTarget target;
  ParseExportTarget(o.target, &target);  // checked by AddExportTargetOption
  const PlanFile plan_file = LoadPlanFile(o.plan_file);
  const std::string text = ExportPlan(plan_file, target, o.plan_file);
  if (!o.out.empty()) WriteFileAtomically(o.out, text);
  if (o.json) {
    nlohmann::json j = {{"target", ToString(target)}, {"plan_file", o.plan_file}, {"text", text}};
    j["out"] = o.out.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.out);
    std::cout << ToJsonText(j) << "\n";
  } else if (o.out.empty()) {
    std::cout << text;
  } else {
    std::cout << "Wrote " << o.plan_file << " for " << ToString(target) << " to " << o.out << "\n";
  }
  return 0;
}

}  // namespace

void AddExportCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ExportCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "export",
      "write a plan file as another framework's configuration: Megatron-LM flags, "
      "Megatron-Bridge overrides, a torchtitan TOML, a DeepSpeed ds_config.json, or "
      "torchrun / sbatch lines for meshplan run (exit 2 naming a knob the target "
      "cannot express)");
  command
      ->add_option("plan", options->plan_file, "the plan file (as `meshplan search --out` writes)")
      ->required()
      ->check(NonEmptyText("a plan file"));
  AddExportTargetOption(command, "--to", &options->target, "the framework to export to");
  command->get_option("--to")->required();
  command->add_option("--out", options->out, "write the export to this file (default: stdout)")
      ->check(OutputFile());
  command->add_flag("--json", options->json,
                    "print {target, plan_file, text, out} as JSON instead of the text");
  command->callback([options, exit_code] { *exit_code = RunExport(*options); });
}

}  // namespace meshplan
