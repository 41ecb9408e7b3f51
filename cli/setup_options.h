// The flags that name a training setup (model, cluster, batch, sequence,
// precision), shared by estimate, search, simulate and gui, and their
// resolution into validated specs. One place for the built-in defaults, and
// for each flag several commands take (--plan, --format, --headroom) with its check.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "planner/config/config_loader.h"
#include "planner/training_setup.h"

namespace meshplan {

// The built-in default setup: a 7B-class model on one 8-GPU node.
inline constexpr const char* kDefaultModel = "llama2-7b";
inline constexpr const char* kDefaultCluster = "8xH100";
inline constexpr int64_t kDefaultGlobalBatch = 64;
inline constexpr int64_t kDefaultSeq = 4096;

struct SetupOptions {
  std::string model = kDefaultModel;
  std::string cluster = kDefaultCluster;
  int64_t global_batch = kDefaultGlobalBatch;
  int64_t seq = kDefaultSeq;
  std::string precision = "mixed";
};

// Adds --model, --cluster, --global-batch, --seq, --precision to `command`.
void AddSetupOptions(CLI::App* command, SetupOptions* options);

// Loads and validates; throws InputError naming the flag and the allowed values.
TrainingSetup ResolveSetup(const SetupOptions& options);

// The plan of estimate and simulate: --plan (a plan string, with the setup flags) or
// --plan-file (a plan YAML that supplies model, cluster, training and plan).
struct PlanInputOptions {
  std::string plan;       // ParsePlanString syntax; empty: all defaults (dp = GPUs)
  std::string plan_file;  // a plan YAML
};
// Adds --plan and --plan-file to `command`.
void AddPlanInputOptions(CLI::App* command, PlanInputOptions* options);
// The setup and plan the flags name, validated: a setup flag beside --plan-file, a
// malformed plan or one that breaks a rule of Validate() throws InputError.
PlanFile ResolvePlanInput(const CLI::App& command, const SetupOptions& setup,
                          const PlanInputOptions& options);

// "table" | "json", checked by CLI11 (exit code 2 on anything else).
void AddFormatOption(CLI::App* command, std::string* format);

// --headroom: the fraction of GPU memory a plan must leave free, in [0, 1); *headroom
// holds the command's default. Checked by CLI11: anything outside exits with code 2.
void AddHeadroomOption(CLI::App* command, double* headroom);

}  // namespace meshplan
