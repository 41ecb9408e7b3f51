// The fused attention core (flash attention on a GPU: at::scaled_dot_product_attention with
// enable_gqa) for the llama block, used when the block computes in bf16 on CUDA
// (UseFusedAttention); otherwise the block runs the naive
// core of executor/model/ops.h (and ring attention with context parallelism either way).
// Between forward and backward the graph keeps q, k, v (their storage, no copies), the
// output and the logsumexp (B,H,S) fp32; selective recompute drops it after the forward and
// rebuilds it in the backward from q, k, v.
// How the backward is reached without autograd: docs/executor_internals.md#fused-attention.
#pragma once

#include <ATen/ATen.h>

#include "executor/model/ops.h"
#include "planner/cost/activation_memory.h"
#include "planner/training_spec.h"

namespace meshplan {

// True when the block computes in bf16 (or mixed) on CUDA.
bool UseFusedAttention(const at::Device& device, Precision precision);
// What the executor's block runs on this device (the memory model's AttentionImpl; context
// parallelism runs ring attention whatever this says).
AttentionImpl ExecutorAttention(const at::Device& device, Precision precision);

// The kernel at::scaled_dot_product_attention picks for this core on `device` (its batch,
// query and key/value heads of D and Dv wide, over `seq` tokens, in bf16 and the core's
// layout): "flash2" | "cudnn" | "efficient" | "math" | "other", from at::_fused_sdp_choice;
// "" where the core is not fused. Allocates the three empty inputs once on the device.
struct SdpaShape {
  int64_t batch = 1, heads = 1, kv_heads = 1, seq = 1, head_dim = 1, v_head_dim = 1;
};
std::string SdpaKernel(const at::Device& device, Precision precision, const SdpaShape& shape);

// The graph of one forward: the output (its grad_fn holds the kernel's saved tensors) and
// the leaves it was computed from.
struct FusedAttentionGraph {
  at::Tensor q, k, v;  // (B,H,S,D), (B,K,S,D) x 2: leaves sharing the inputs' storage
  at::Tensor out;      // (B,H,S,D), stored (B,S,H,D)
};

// Causal attention of q (B,H,S,D), k, v (B,K,S,D) (K divides H). Fills *graph.
at::Tensor FusedAttentionForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 FusedAttentionGraph* graph);
// dout (B,H,S,D) -> dq, dk, dv; consumes the graph (freed on return).
AttentionGrads FusedAttentionBackward(const at::Tensor& dout, FusedAttentionGraph graph);

}  // namespace meshplan
