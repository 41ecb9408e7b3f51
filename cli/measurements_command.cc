// `meshplan measurements DIR|FILE...`: the README table of predicted vs measured from
// the sweep records scripts/gpu_sweep.sh writes (docs/measurements/<gpu>/*.json; see
// planner/measure/sweep_table.h). Files that are not sweep records (calibration reports, the
// NCCL check) are skipped when a folder is given; a file named directly must be one.
//
//   meshplan measurements docs/measurements/h100 [--format markdown|json]
//
// Exit codes: 0 a table; 2 bad input (unreadable JSON, a malformed record, no record).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "planner/input_error.h"
#include "planner/measure/sweep_table.h"

namespace meshplan {
namespace {

struct MeasurementsCommandOptions {
  std::vector<std::string> inputs;
  std::string format = "markdown";
};

nlohmann::json ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError({path.string()}, "", "cannot read the file");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError({path.string()}, "", std::string("malformed JSON: ") + e.what());
  }
}

bool IsSweepRecord(const nlohmann::json& j) {
  return j.is_object() && j.value("record", "") == "meshplan sweep v1";
}

int RunMeasurements(const MeasurementsCommandOptions& options) {
  std::vector<SweepRow> rows;
  for (const std::string& input : options.inputs) {
    const std::filesystem::path path(input);
    if (std::filesystem::is_directory(path)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(path))
        if (entry.path().extension() == ".json") files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (const auto& file : files) {
        const nlohmann::json j = ReadJson(file);
        if (IsSweepRecord(j)) rows.push_back(SweepRowFromJson(j, file.string()));
      }
    } else {
      rows.push_back(SweepRowFromJson(ReadJson(path), path.string()));
    }
  }
  if (rows.empty())
    throw InputError({"<command line>"}, "inputs",
                     "no sweep record found (files with \"record\": \"meshplan sweep v1\")");
  if (options.format == "json") {
    nlohmann::json out = nlohmann::json::array();
    for (const SweepRow& r : rows) out.push_back(SweepRowToJson(r));
    std::cout << out.dump(2) << "\n";
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
  command->callback([options, exit_code] { *exit_code = RunMeasurements(*options); });
}

}  // namespace meshplan
