// The `megatron-bridge` target: overrides of a Megatron-Bridge recipe's ConfigContainer
// (megatron/bridge/training/config.py of megatron-bridge 0.3.1), from McoreSettings, in the
// `section.field=value` form its recipe scripts pass to parse_hydra_overrides
// (megatron/bridge/training/utils/omegaconf_utils.py).
#include <string>
#include <vector>

#include "planner/export/mcore_settings.h"

namespace meshplan {

std::string ExportMegatronBridge(const ExportJob& job) {
  std::vector<std::string> overrides;
  for (const McoreSetting& s : McoreSettings(job)) {
    if (s.field.empty()) continue;  // a pretrain_gpt.py flag with no ConfigContainer field
    const std::string section = ToString(s.section);
    overrides.push_back(
        ShellWord((section.empty() ? "" : section + ".") + s.field + "=" + s.value));
  }
  return "# meshplan export --to megatron-bridge: " + CommentText(ShellWord(job.plan_path)) + " (" +
         ToPlanString(job.plan()) + ")\n# ConfigContainer overrides, " + kBridgeVersion + " on " +
         kMcoreVersion +
         ". Pass them after a recipe's own arguments:\n"
         "#   torchrun ... <recipe script> \"${BRIDGE_OVERRIDES[@]}\"\n" +
         BashArray("BRIDGE_OVERRIDES", overrides);
}

}  // namespace meshplan
