// McoreSettings: a plan as Megatron-Core's configuration, one setting per config dataclass
// field, written once for both Megatron targets: `megatron` spells each as pretrain_gpt.py's
// flag (megatron/training/arguments.py), `megatron-bridge` as a ConfigContainer override
// (`model.tensor_model_parallel_size=4`). Where the two differ, a setting carries only the one
// it has (a flag with no field, a field with no flag). The versions are kMcoreVersion and
// kBridgeVersion; docs/export.md cites the file each name is read from.
// Refuses (export_rules.h) what Megatron-Core cannot express, before building anything.
#pragma once

#include <string>
#include <vector>

#include "planner/export/export_rules.h"

namespace meshplan {

inline constexpr const char* kMcoreVersion = "megatron-core 0.16.1 (Megatron-LM core_v0.16.1)";
inline constexpr const char* kBridgeVersion = "megatron-bridge 0.3.1";

// The ConfigContainer member a field belongs to (megatron/bridge/training/config.py).
enum class McoreSection : uint8_t {
  kModel,       // GPTModelProvider: TransformerConfig + ModelParallelConfig fields
  kDdp,         // DistributedDataParallelConfig
  kOptimizer,   // OptimizerConfig
  kTrain,       // TrainingConfig
  kDataset,     // GPTDatasetConfig
  kCheckpoint,  // CheckpointConfig
  kContainer,   // ConfigContainer itself (mixed_precision)
};
const char* ToString(McoreSection section);  // model | ddp | optimizer | train | ...

struct McoreSetting {
  McoreSection section = McoreSection::kModel;
  std::string field;       // the dataclass field; empty: pretrain_gpt.py only
  std::string value;       // as the override takes it: 4, true, RMSNorm, [0,1,1]
  std::string flag;        // pretrain_gpt.py's flag; empty: Megatron-Bridge only
  std::string flag_value;  // the flag's argument; empty: a switch (store_true / store_false)
};

std::vector<McoreSetting> McoreSettings(const ExportJob& job);

}  // namespace meshplan
