// Export: a plan file (model, cluster, training, plan) as the configuration another framework
// takes, so that the plan meshplan chose can be trained there (docs/export.md).
//
//   megatron         Megatron-LM's pretrain_gpt.py flags, as a bash array (MEGATRON_ARGS)
//   megatron-bridge  Megatron-Bridge recipe overrides (ConfigContainer paths), a bash array
//   torchtitan       a torchtitan job TOML (--job.config_file)
//   deepspeed        a ds_config.json
//   torchrun         the torchrun line and a Slurm sbatch script for `meshplan run`
//
// ExportPlan() promises: what it returns says everything the plan sets that the target can
// hold, or it throws. A plan the target cannot express (a knob it has no setting for, or a
// value it does not offer) throws InputError located at the plan file, its field the knob's
// key ("schedule", "training.precision"), its message the value and the target ("zb_h1 cannot
// be expressed in torchtitan: ..."); the CLI exits 2 on it. Data, tokenizer, checkpoint and
// learning-rate settings are the user's: only the shape, split, batch and precision are written.
// Pure: no file is read but the framework profiles (configs/frameworks/), none is written.
#pragma once

#include <cstdint>
#include <string>

#include "planner/training_setup.h"

namespace meshplan {

enum class ExportTarget : uint8_t {
  kMegatron,
  kMegatronBridge,
  kTorchtitan,
  kDeepspeed,
  kTorchrun
};

const char* ToString(ExportTarget target);  // megatron | megatron-bridge | torchtitan | ...
bool ParseExportTarget(const std::string& name, ExportTarget* out);
const char* AllowedExportTargets();  // "megatron, megatron-bridge, torchtitan, deepspeed, torchrun"

// The text `target` takes for `plan_file`. `plan_path` is the plan file's path: errors are
// located there, and the torchrun target's launch line names it.
std::string ExportPlan(const PlanFile& plan_file, ExportTarget target,
                       const std::string& plan_path);

}  // namespace meshplan
