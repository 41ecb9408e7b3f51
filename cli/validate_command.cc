// `meshplan validate`: the cost model against published training runs
// (docs/validation/, configs/validation/published_runs.yaml; planner/validate/validation.h).
// Every row of every table predicted with Estimate()'s defaults, beside the published
// figure, with the error per row, the predicted fit against the published one, and the mean
// absolute percentage error per table; rows meshplan cannot model yet are listed with why.
//
//   meshplan validate [--runs FILE] [--table ID] [--format table|json]
//
// Exit codes: 0 it ran (it reports the errors, it does not judge them); 2 bad input (an
// unreadable or malformed runs file, an unknown --table).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/setup_options.h"
#include "planner/config/framework_yaml.h"
#include "planner/input_error.h"
#include "planner/validate/published_runs.h"
#include "planner/validate/validation.h"

namespace meshplan {
namespace {

struct ValidateCommandOptions {
  std::string runs_file;  // empty: DefaultPublishedRunsPath()
  std::string table;      // empty: every table
  std::string framework;  // empty: each row's own
  std::string format = "table";
};

int RunValidate(const ValidateCommandOptions& options) {
  const std::string file =
      options.runs_file.empty() ? DefaultPublishedRunsPath() : options.runs_file;
  PublishedRuns runs = LoadPublishedRuns(file);
  if (!options.table.empty()) {
    const auto chosen = std::find_if(runs.tables.begin(), runs.tables.end(),
                                     [&](const PublishedTable& t) { return t.id == options.table; });
    if (chosen == runs.tables.end()) {
      std::string ids;
      for (const PublishedTable& t : runs.tables) ids += (ids.empty() ? "" : ", ") + t.id;
      throw InputError({"<command line>"}, "--table",
                       "no table '" + options.table + "' in " + runs.file + "; tables: " + ids);
    }
    PublishedTable only = *chosen;
    runs.tables.assign(1, std::move(only));
  }
  if (!options.framework.empty())
    PredictUnder(NamingFlag("--framework", [&] { return LoadFramework(options.framework); }),
                 &runs);
  const ValidationReport report = PredictPublishedRuns(runs);
  if (options.format == "json") std::cout << ValidationToJson(report).dump(2) << "\n";
  else std::cout << FormatValidationTable(report);
  return 0;
}

}  // namespace

void AddValidateCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ValidateCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "validate", "predict published training runs (Megatron-LM papers, NeMo 24.07 on DGX-H100, "
                  "torchtitan FSDP2 on A100 and H100: TFLOP/s or tokens/s per GPU, time per iteration, "
                  "activation memory, fit) and print predicted, published, error % and the MAPE "
                  "per table");
  command->add_option("--runs", options->runs_file,
                      "the published runs file (default: configs/validation/published_runs.yaml)")
      ->check(NonEmptyText("a published runs file"));
  command->add_option("--table", options->table,
                      "only this table (an id: narayanan2021-table1, korthikanti2022-table5, "
                      "korthikanti2022-figure1, nemo2407-dgxh100-fp8, torchtitan2024-a100-fsdp2, "
                      "torchtitan2024-h100-fsdp)")
      ->check(NonEmptyText("a table id"));
  command->add_option("--framework", options->framework,
                      "predict every row under this framework (a configs/frameworks name or a "
                      "YAML file) instead of the one that ran it: how far another profile is "
                      "from these runs")
      ->check(NonEmptyText("a framework"));
  AddFormatOption(command, &options->format);
  command->callback([options, exit_code] { *exit_code = RunValidate(*options); });
}

}  // namespace meshplan
