// Ring attention: the causal attention core under context parallelism (cp ranks, zigzag
// split of executor/parallel/context_split.h), flash-style (online softmax, logsumexp saved, probs
// recomputed in backward), grouped-query without repeating K/V (as attention_ops.cc).
// Shapes are local: q (B,H,Sc,D), k and v (B,K,Sc,D) hold this rank's Sc = S/cp tokens,
// chunk r then chunk 2cp-1-r (c = Sc/2 tokens each). Causality is by global position.
// K/V blocks (and, in the backward, dK/dV accumulators) travel around the ring of the cp
// Communicator. Saved between forward and backward: q, k, v (inputs, not copied), out and
// lse (B,H,Sc) fp32; nothing of size Sc x Sc or Sc x S.
// Every rank of the cp group must call these together (same shapes). cp == 1 is plain
// causal attention (no communication).
// The ring schedule, the visible sub-blocks, memory and communication per step:
// docs/executor_internals.md#ring-attention.
#pragma once

#include <ATen/ATen.h>

#include "executor/comm/communicator.h"
#include "executor/model/ops.h"

namespace meshplan {

// q (B,H,Sc,D), k, v (B,K,Sc,D) contiguous, causal_mask (Sc,Sc) bool (true above the
// diagonal: the local causal mask, which is the global one since local positions increase)
// -> out (B,H,Sc,D) act; *lse (B,H,Sc) fp32 = log sum_j exp(q k_j^T / sqrt(D)) over every
// visible key of the whole sequence.
at::Tensor RingAttentionForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& causal_mask, Communicator& cp,
                                at::Tensor* lse);

// dout (B,H,Sc,D) contiguous, the forward's inputs, its output `out` (any (B,H,Sc,D) view)
// and lse -> dq (B,H,Sc,D), dk, dv (B,K,Sc,D): the complete gradients of this rank's q, k, v
// (dk, dv summed over the queries of every cp rank).
AttentionGrads RingAttentionBackward(const at::Tensor& dout, const at::Tensor& q,
                                     const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& out, const at::Tensor& lse,
                                     const at::Tensor& causal_mask, Communicator& cp);

}  // namespace meshplan
