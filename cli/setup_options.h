// The flags that name a training setup (model, cluster, batch, sequence,
// precision), shared by estimate, search, simulate and gui, and their
// resolution into validated specs. One place for the built-in defaults.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "planner/cluster_spec.h"
#include "planner/config_loader.h"
#include "planner/model_spec.h"
#include "planner/training_spec.h"

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

struct Setup {
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
};
// Loads and validates; throws InputError naming the flag and the allowed values.
Setup ResolveSetup(const SetupOptions& options);

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

}  // namespace meshplan
