// `meshplan measurements DIR|FILE...`: the README table of predicted vs measured from
// the sweep records scripts/gpu_sweep.sh writes (docs/measurements/<gpu>/*.json; see
// planner/measure/sweep_table.h). Files that are not sweep records (calibration reports, the
// NCCL check) are skipped when a folder is given; a file named directly must be one.
//
//   meshplan measurements docs/measurements/h100 [--format markdown|json]
//
// With --framework NAME --plan PLAN the inputs are instead logs of runs of PLAN in that
// framework's format (docs/framework_logs.md): a file is one run, a folder's entries are runs
// (a sub-folder: one run's files, e.g. the PyTorch hook's JSON per rank), each a row predicted
// under the framework (planner/measure/framework_log/log_row.h).
//
//   meshplan measurements logs/ --framework megatron-core --plan plan.yaml [--warmup 1]
//
// Exit codes: 0 a table; 2 bad input (unreadable JSON, a malformed record, no record, a log
// that is not of the framework's format).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/setup_options.h"
#include "planner/input_error.h"
#include "planner/input_file.h"
#include "planner/json_input.h"
#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/measure/framework_log/framework_log.h"
#include "planner/measure/framework_log/log_row.h"
#include "planner/measure/sweep_table.h"

namespace meshplan {
namespace {

struct MeasurementsCommandOptions {
  std::vector<std::string> inputs;
  std::string format = "markdown";
  std::string framework;  // set: the inputs are logs of runs of `plan`
  std::string plan;
  int64_t warmup = 1;
};

bool IsSweepRecord(const nlohmann::json& j) {
  return j.is_object() && j.contains("record") && j["record"] == "meshplan sweep v1";
}

// One record file (ReadInputFile: regular files only; ParseJson: depth, numbers and
// duplicate keys checked); nullopt when `skip_others` and it is not a sweep record.
std::optional<SweepRow> ReadRecord(const std::filesystem::path& path, bool skip_others) {
  const std::string text = ReadInputFile(path.string(), "inputs");
  const nlohmann::json j = ParseJson(text, path.string());
  if (skip_others && !IsSweepRecord(j)) return std::nullopt;
  try {
    return SweepRowFromJson(j, path.string());
  } catch (const InputError& e) {
    throw LocatedInJson(e, text);
  }
}

// One row per logged run: a file, or each entry of a folder (a sub-folder is one run).
std::vector<SweepRow> LogRows(const MeasurementsCommandOptions& options) {
  if (options.plan.empty())
    throw InputError({"<command line>"}, "plan", "--framework needs --plan: the plan the logs ran");
  const FrameworkSpec framework =
      NamingFlag("--framework", [&] { return LoadFramework(options.framework); });
  const PlanFile plan = NamingFlag("--plan", [&] { return LoadPlanFile(options.plan, &framework); });
  std::vector<SweepRow> rows;
  for (const std::string& input : options.inputs) {
    std::vector<std::filesystem::path> runs{input};
    std::error_code ec;
    if (std::filesystem::is_directory(input, ec)) {
      runs.clear();
      for (const auto& entry : std::filesystem::directory_iterator(input, ec)) runs.push_back(entry.path());
      if (ec) throw InputError({input}, "inputs", "cannot list the folder: " + ec.message());
      std::sort(runs.begin(), runs.end());
    }
    for (const auto& run : runs) {
      const LoggedRun logged = ReadFrameworkLogs(framework.log_format, FilesOfRun(run.string()), RunShapeOf(plan));
      const Measurement m = MeasurementOfRun(logged, plan, options.warmup, run.string());
      rows.push_back(RowOfLoggedRun(plan, framework, m, run.filename().string()));
    }
  }
  return rows;
}

// One row per sweep record: the files named, and a folder's records (other files skipped).
std::vector<SweepRow> RecordRows(const MeasurementsCommandOptions& options) {
  std::vector<SweepRow> rows;
  for (const std::string& input : options.inputs) {
    const std::filesystem::path path(input);
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(path, ec))
        if (entry.path().extension() == ".json") files.push_back(entry.path());
      if (ec) throw InputError({input}, "inputs", "cannot list the folder: " + ec.message());
      std::sort(files.begin(), files.end());
      for (const auto& file : files)
        if (std::optional<SweepRow> row = ReadRecord(file, true)) rows.push_back(*std::move(row));
    } else {
      rows.push_back(*ReadRecord(path, false));
    }
  }
  return rows;
}

int RunMeasurements(const MeasurementsCommandOptions& options) {
  const std::vector<SweepRow> rows =
      options.framework.empty() ? RecordRows(options) : LogRows(options);
  if (rows.empty())
    throw InputError({"<command line>"}, "inputs",
                     options.framework.empty()
                         ? "no sweep record found (files with \"record\": \"meshplan sweep v1\")"
                         : "no log found");
  if (options.format == "json") {
    nlohmann::json out = nlohmann::json::array();
    for (const SweepRow& r : rows) out.push_back(SweepRowToJson(r));
    std::cout << ToJsonText(out) << "\n";
  } else {
    std::cout << FormatSweepTable(rows);
  }
  return 0;
}

}  // namespace

void AddMeasurementsCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<MeasurementsCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "measurements", "the table of predicted vs measured step time, peak memory and MFU from "
                      "sweep records (docs/measurements/<gpu>/, scripts/gpu_sweep.sh)");
  command->add_option("inputs", options->inputs, "record files or folders of them")->required();
  command->add_option("--format", options->format, "markdown | json")
      ->check(CLI::IsMember({"markdown", "json"}))
      ->capture_default_str();
  command->add_option("--framework", options->framework,
                      "the inputs are logs of runs in this framework (configs/frameworks/ or a "
                      "profile file), predicted under it");
  command->add_option("--plan", options->plan, "with --framework: the plan file the logs ran");
  command->add_option("--warmup", options->warmup,
                      "with --framework: the first timing lines of each log left out")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000}))
      ->capture_default_str();
  command->callback([options, exit_code] { *exit_code = RunMeasurements(*options); });
}

}  // namespace meshplan
