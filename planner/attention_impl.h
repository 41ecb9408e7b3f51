// AttentionImpl: how the attention core is computed, which sets what it keeps for
// backward (planner/cost/activation_memory.h) and which kernel the executor runs.
#pragma once

#include <string>

#include "planner/model_spec.h"
#include "planner/training_spec.h"

namespace meshplan {

// naive: QK^T, softmax and P@V as separate ops (the executor on CPU);
// fused: flash attention (GPU kernels); auto: naive for fp32 and for gpt blocks
// (Megatron's formula assumes its unfused core attention), fused for llama in bf16/mixed.
enum class AttentionImpl { kAuto, kNaive, kFused };
const char* ToString(AttentionImpl impl);  // auto | naive | fused
// "auto" | "naive" | "fused"; false for anything else.
bool ParseAttentionImpl(const std::string& text, AttentionImpl* impl);
AttentionImpl ResolveAttentionImpl(AttentionImpl requested, const ModelSpec& model,
                                   Precision precision);

}  // namespace meshplan
