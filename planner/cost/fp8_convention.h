// FP8 training (Precision::kFp8) as NVIDIA Transformer Engine runs it on Hopper with its
// default recipe (DelayedScaling): the one description the cost model (step_work.cc, block_work.cc,
// compute_work.cc) and the memory model (memory_detailed.cc, activation_memory.cc) share.
// docs/cost_model.md "FP8" and docs/memory_model.md "FP8" say the same in prose.
//
//  * FP8: the blocks' linear GEMMs (q, k, v, o, gate, up, down, the experts' but not the
//    router; gpt: qkv, o, fc1, fc2),
//    forward and both backward GEMMs, at GpuSpec::peak_flops_fp8, FP8 operands (1 byte)
//    and a bf16 output. bf16: attention (TE's DotProductAttention), norms, the
//    embedding and the lm_head, as in bf16.
//  * Accumulation: the forward GEMM accumulates fast, the two backward GEMMs promote to fp32
//    every 128 k (TE's module/base.py: _2X_ACC_FPROP = False, _2X_ACC_DGRAD = _2X_ACC_WGRAD =
//    True, its use_split_accumulator; torchao's float8 does the same), at the hardware's
//    GpuSpec::matmul_fp8_split_accumulate_efficiency.
//  * Model states: as the framework keeps them (model_state_memory.h): bf16 weights, and
//    bf16 master, m and v (the executor) or fp32 ones (FrameworkSpec::fp8_states: Transformer
//    Engine recipes).
//  * Copies: every block weight also as FP8, twice (rowwise for the forward GEMM and a
//    transposed "columnwise" copy for the input-gradient GEMM: FP8 GEMMs on Hopper take
//    only the TN layout; TE docs, "Performance Considerations: Handling transposes"),
//    cast once per step and reused by every micro-batch (TE's FP8 weight caching), so
//    resident like the weights (ZeRO-3: only for the gathered blocks). The input of each
//    linear is saved for backward as FP8 (1 byte) instead of bf16, except where a bf16
//    op needs the same tensor (flash attention's output, also the o projection's input:
//    bf16 for attention plus the FP8 copy).
//  * Scaling state: per FP8 tensor an fp32 amax history of 1024 entries plus scale and
//    scale_inv (DelayedScaling(amax_history_len=1024), TE "Common API"); per GEMM three
//    forward tensors (input, weight, output) and two backward (output and input
//    gradients), as TE's FP8 forward / backward tensor slots.
//  * Casts (memory-bound): each linear input is cast to FP8 rowwise + columnwise
//    (read bf16 2 bytes, write 1 + 1) in the forward, each output gradient likewise in
//    the backward; amax is reduced in the same kernel. The weight casts (same 4 bytes
//    per weight) run once per step.
#pragma once

#include <algorithm>
#include <cstdint>

#include "planner/cost/block_linears.h"
#include "planner/model_spec.h"

namespace meshplan {

inline constexpr double kFp8Bytes = 1;                  // e4m3 / e5m2
inline constexpr double kFp8WeightCopiesPerParam = 2;   // rowwise + columnwise (Hopper)
inline constexpr double kFp8CastBytesPerElement = 2 + 2 * kFp8Bytes;  // read bf16, write 2 FP8
inline constexpr double kFp8AmaxHistoryLen = 1024;      // DelayedScaling default (TE Common API)
inline constexpr double kFp8ScaledTensorsPerGemm = 3 + 2;  // fwd input, weight, output; bwd 2
// Bytes of one GEMM's scaling state: fp32 amax history + scale + scale_inv per tensor.
inline constexpr double kFp8ScalingBytesPerGemm =
    kFp8ScaledTensorsPerGemm * (kFp8AmaxHistoryLen + 2) * 4;

// The FP8 GEMMs of one block on a rank, each with its own scaling state: llama, every
// matrix of planner/cost/block_linears.h but the router (it stays bf16), the routed experts'
// once per local expert (X/ep); gpt, qkv, o, fc1, fc2.
inline int64_t Fp8GemmsPerBlock(const ModelSpec& model, bool moe_layer, int64_t ep) {
  if (model.block != BlockKind::kLlama) return 4;
  int64_t gemms = 0;
  for (const BlockLinear& l : LlamaBlockLinears(model, moe_layer)) {
    if (l.role == LinearRole::kRouter) continue;
    gemms += l.role == LinearRole::kRoutedExpert ? l.copies / std::max<int64_t>(ep, 1) : l.copies;
  }
  return gemms;
}

}  // namespace meshplan
