// TrainingSpec: what is trained per step, independent of how it is split.
#pragma once

#include <cstdint>
#include <string>

#include "planner/framework_spec.h"

namespace meshplan {

// bf16:  params, grads, Adam m and v all bf16 (the blog's regime).
// mixed: bf16 params + fp32 master params, m and v (ZeRO paper's 16 bytes/param); the
//        gradients bf16, or fp32 where the framework keeps fp32 main gradients (18 bytes).
// fp32:  everything fp32 (what the executor trains in on CPU).
// fp8:   bf16 weights with the blocks' linear GEMMs in FP8 as NVIDIA Transformer Engine
//        runs them (delayed scaling, FP8 weight and input copies); attention and the lm_head
//        stay bf16 (docs/cost_model.md "FP8", docs/memory_model.md "FP8"); master weights
//        and Adam states in the framework's FrameworkSpec::fp8_states dtype. Only on GPUs
//        with FP8 tensor cores (GpuSpec::peak_flops_fp8 > 0).
enum class Precision { kBf16, kMixed, kFp32, kFp8 };

// The MoE auxiliary load-balancing loss coefficient by default: Switch Transformer's 1e-2
// (Fedus et al. 2021, section 2.2, alpha = 10^-2).
inline constexpr double kDefaultMoeAuxLossCoef = 0.01;

struct TrainingSpec {
  int64_t global_batch = 0;     // sequences per optimizer step, over all data-parallel ranks
  int64_t seq_len = 0;          // S, tokens per sequence
  Precision precision = Precision::kMixed;
  int64_t steps = 10;           // optimizer steps (executor)
  double learning_rate = 3e-4;  // AdamW (the only optimizer)
  double moe_aux_loss_coef = kDefaultMoeAuxLossCoef;  // MoE models: the aux loss's weight
  // The software that runs the step (configs/frameworks/); default: meshplan's executor.
  FrameworkSpec framework;

  int64_t tokens_per_step() const { return global_batch * seq_len; }
  bool operator==(const TrainingSpec&) const = default;
};

}  // namespace meshplan
