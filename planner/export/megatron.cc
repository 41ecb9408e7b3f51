// The `megatron` target: Megatron-LM's pretrain_gpt.py flags (megatron/training/arguments.py
// of Megatron-LM core_v0.16.1; each flag's source: docs/export.md), from McoreSettings.
#include <string>
#include <vector>

#include "planner/export/mcore_settings.h"

namespace meshplan {

std::string ExportMegatron(const ExportJob& job) {
  std::vector<std::string> flags;
  for (const McoreSetting& s : McoreSettings(job)) {
    if (s.flag.empty()) continue;  // a Megatron-Bridge field with no flag
    flags.push_back(s.flag_value.empty() ? s.flag : s.flag + " " + ShellWord(s.flag_value));
  }
  const ParallelPlan& plan = job.plan();
  return "# meshplan export --to megatron: " + CommentText(ShellWord(job.plan_path)) + " (" +
         ToPlanString(plan) + ")\n# Megatron-LM pretrain_gpt.py flags, " + kMcoreVersion +
         ". Add your data, tokenizer, checkpoint and learning-rate flags:\n"
         "#   torchrun --nnodes " +
         std::to_string(job.file.cluster.nodes) + " --nproc-per-node " +
         std::to_string(job.file.cluster.gpus_per_node) +
         " pretrain_gpt.py \"${MEGATRON_ARGS[@]}\" ...\n" + BashArray("MEGATRON_ARGS", flags);
}

}  // namespace meshplan
