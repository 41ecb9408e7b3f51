// TrainingSpec: what is trained per step, independent of how it is split.
#pragma once

#include <cstdint>
#include <string>

namespace meshplan {

// bf16:  params, grads, Adam m and v all bf16 (the blog's regime).
// mixed: bf16 params and grads + fp32 master params, m and v (ZeRO paper's 16 bytes/param).
// fp32:  everything fp32 (what the executor trains in on CPU).
// fp8:   the bf16 regime's model states (bf16 weights, gradients and Adam m, v: bf16
//        master weights) with the blocks' linear GEMMs in FP8 as NVIDIA Transformer
//        Engine runs them (delayed scaling, FP8 weight and input copies); attention and
//        the lm_head stay bf16 (docs/cost_model.md "FP8", docs/memory_model.md "FP8").
//        Only on GPUs with FP8 tensor cores (GpuSpec::peak_flops_fp8 > 0).
enum class Precision { kBf16, kMixed, kFp32, kFp8 };

// How the weight gradients of a step's micro-batches are summed (docs/cost_model.md
// "Gradient accumulation"):
// fused:    inside the weight-gradient GEMM (its epilogue adds to the accumulator):
//           Megatron-Core's gradient_accumulation_fusion, meshplan's executor (addmm_).
// separate: one add kernel per parameter per micro-batch after the first, reading the new
//           gradient and the accumulator and writing the accumulator: PyTorch autograd's
//           AccumulateGrad (DDP, FSDP), Megatron-LM 2021's local DDP main_grad hook.
enum class GradAccumulation { kFused, kSeparate };

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
  GradAccumulation grad_accumulation = GradAccumulation::kFused;

  int64_t tokens_per_step() const { return global_batch * seq_len; }
  bool operator==(const TrainingSpec&) const = default;
};

}  // namespace meshplan
