// AttentionKernel: which fused (flash-style) kernel computes the attention core, as a
// framework profile names it (FrameworkSpec::attention_kernel). Every one keeps the same
// tensors for backward (the output and the softmax statistics); they differ in rate, which
// the hardware file gives per kernel (GpuSpec::AttentionEfficiency; docs/frameworks.md).
#pragma once

#include <cstdint>
#include <string>

#include "planner/spellings.h"

namespace meshplan {

enum class AttentionKernel : uint8_t {
  kFlash2,  // FlashAttention-2: the flash-attn package, PyTorch SDPA's flash backend
  kFlash3,  // FlashAttention-3 (Hopper): flash-attn's hopper/ build
  kCudnn,   // cuDNN's fused attention: Transformer Engine's FusedAttention, SDPA's cuDNN backend
};
// Every kernel with its profile spelling, in the order error messages list them.
inline constexpr Spellings<AttentionKernel, 3> kAttentionKernelSpellings{
    {{AttentionKernel::kFlash2, "flash2"},
     {AttentionKernel::kFlash3, "flash3"},
     {AttentionKernel::kCudnn, "cudnn"}}};

const char* ToString(AttentionKernel kernel);  // flash2 | flash3 | cudnn
// "flash2" | "flash3" | "cudnn"; false for anything else.
bool ParseAttentionKernel(const std::string& text, AttentionKernel* kernel);

}  // namespace meshplan
