// The flags that name a training setup (model, cluster, batch, sequence,
// precision), shared by estimate, search, simulate and gui, and their
// resolution into validated specs. One place for the built-in defaults, and
// for each flag several commands take (--plan, --format, --headroom) with its check.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/flag_checks.h"
#include "planner/config/config_loader.h"
#include "planner/input_error.h"
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
  bool global_batch_given = false;  // --global-batch was on the command line
  std::string tokens_per_step;      // --tokens-per-step (kTokenCountForms); empty: not given
  int64_t seq = kDefaultSeq;
  std::string precision = "mixed";
  std::string framework;          // empty: DefaultFrameworkName of the cluster's GPU
  std::string grad_accumulation;  // empty: the framework's
  std::string fp8_states;         // empty: the framework's
  std::string loss;               // empty: the framework's
};

// Runs `load` on a flag's value, so that its errors say which flag or argument it was: an
// error about the value itself (an unknown name: no file) is located at the command line
// with `flag` as its field; an error without a field (a file that cannot be read,
// malformed YAML) gets `flag` as its field; an error inside a file keeps its location.
template <typename Load>
auto NamingFlag(const char* flag, Load load) -> decltype(load()) {
  try {
    return load();
  } catch (const InputError& e) {
    if (e.where().file.empty()) throw InputError({"<command line>"}, flag, e.message());
    if (e.field().empty()) throw InputError(e.where(), flag, e.message());
    throw;
  }
}

// Adds --model, --cluster, --global-batch, --tokens-per-step, --seq, --precision, --framework,
// --grad-accumulation, --fp8-states, --loss to `command`;
// --global-batch and --seq are checked against planner/limits.h as they are parsed,
// --tokens-per-step's form too (ParseTokenCount); the batch it gives, in ResolveSetup.
void AddSetupOptions(CLI::App* command, SetupOptions* options);

// Loads and validates; throws InputError naming the flag and the allowed values.
// --tokens-per-step T sets the global batch to T / seq sequences: refused beside
// --global-batch, and when seq does not divide T.
TrainingSetup ResolveSetup(const SetupOptions& options);

// The plan of estimate and simulate: --plan (a plan string, with the setup flags) or
// --plan-file (a plan YAML that supplies model, cluster, training and plan).
struct PlanInputOptions {
  std::string plan;       // ParsePlanString syntax (dp left out: ParsePlanOption)
  std::string plan_file;  // a plan YAML
};
// --plan's text as a plan for `world_size` GPUs: a key left out keeps its default, except dp,
// which fills the GPUs the other factors leave (GPUs / (tp x pp x cp) when that divides;
// else 1, and Validate says why). So no --plan is dp = all GPUs, and "tp=8" on 64 GPUs is
// dp=8,tp=8. Throws InputError at `flag` for a malformed string.
ParallelPlan ParsePlanOption(const std::string& text, int64_t world_size,
                             const std::string& flag = "--plan");
// A setup flag (--model .. --grad-accumulation, --plan) given beside --plan-file throws
// InputError naming it: the plan file supplies them.
void RefuseSetupFlagsBesidePlanFile(const CLI::App& command);
// Adds --plan and --plan-file to `command`.
void AddPlanInputOptions(CLI::App* command, PlanInputOptions* options);
// The setup and plan the flags name, validated: a setup flag beside --plan-file, a
// malformed plan or one that breaks a rule of Validate() throws InputError.
PlanFile ResolvePlanInput(const CLI::App& command, const SetupOptions& setup,
                          const PlanInputOptions& options);

// "table" | "json", checked by CLI11 (exit code 2 on anything else).
void AddFormatOption(CLI::App* command, std::string* format);

// `--format json` output, indented: a name that is not UTF-8 (a file name's stem) is
// written with U+FFFD instead of making nlohmann throw.
std::string ToJsonText(const nlohmann::json& j);

// `flag` (export --to, search --export): an export target, checked by CLI11 against
// planner/export/export.h's names (exit code 2 naming the allowed ones).
void AddExportTargetOption(CLI::App* command, const std::string& flag, std::string* target,
                           const std::string& help);

// --headroom: the fraction of GPU memory a plan must leave free, in [0, 1); *headroom
// holds the command's default. Checked by CLI11: anything outside exits with code 2.
void AddHeadroomOption(CLI::App* command, double* headroom);

}  // namespace meshplan
