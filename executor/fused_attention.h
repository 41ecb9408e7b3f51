// The fused attention core (flash attention on a GPU) for the llama block, used when this
// LibTorch has it (2.5 and later: at::scaled_dot_product_attention with enable_gqa) and the
// block computes in bf16 on CUDA (UseFusedAttention); otherwise the block runs the naive
// core of executor/ops.h (and ring attention with context parallelism either way).
//
// The executor has no autograd, so the fused kernel's backward is reached through a local
// autograd graph around this one op: the forward runs on leaves that share q, k and v's
// storage (no copies), and the graph keeps what the kernel keeps: q, k, v, the output and
// the logsumexp (B,H,S) fp32 (planner/activation_memory.h, "fused"). The output is
// (B,S,H,D) in memory (the kernel's layout), so the merged (B,S,H*D) wo input is a view of
// it, not a copy (without sequence parallelism).
// Selective recompute drops the graph (the logsumexp) after the forward and builds it
// again in the backward from q, k, v.
#pragma once

#include <ATen/ATen.h>

#include "executor/ops.h"
#include "planner/activation_memory.h"
#include "planner/training_spec.h"

namespace meshplan {

// True when this LibTorch has the fused kernel and the block computes in bf16 on CUDA.
bool FusedAttentionBuiltIn();
bool UseFusedAttention(const at::Device& device, Precision precision);
// What the executor's block runs on this device (the memory model's AttentionImpl; context
// parallelism runs ring attention whatever this says).
AttentionImpl ExecutorAttention(const at::Device& device, Precision precision);

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
