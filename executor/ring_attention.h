// Ring attention: the causal attention core under context parallelism (cp ranks, zigzag
// split of executor/context_split.h), flash-style (online softmax, logsumexp saved, probs
// recomputed in backward), grouped-query without repeating K/V (as attention_ops.cc).
//
// Shapes are local: q (B,H,Sc,D), k and v (B,K,Sc,D) hold this rank's Sc = S/cp tokens,
// chunk r then chunk 2cp-1-r (c = Sc/2 tokens each). Causality is by global position.
// The K/V blocks travel around the ring of the cp Communicator: at step s = 0..cp-1 rank r
// works on the block that started on rank j = (r - s) mod cp, receiving it from rank
// r-1 and passing it on to rank r+1. Which part of (local queries) x (block j) is visible:
//   s = 0, j = r : the local block, causal inside (the local causal mask (Sc,Sc)).
//   j < r        : all Sc queries see the first half (chunk j) of the keys: Sc x c.
//   j > r        : only the second half of the queries (chunk 2cp-1-r) sees all keys: c x Sc.
// Only those sub-blocks are computed (no FLOPs on fully masked chunk pairs, no empty rows),
// so every step s > 0 costs Sc*c scores on every rank (equal work across ranks).
//
// Memory contract (as executor/ops.h; "blk" = (B,K,Sc,D) in the activation dtype "act",
// fp32 on CPU; c = Sc/2; "state" tensors are fp32):
//   RingAttentionForward
//     saves     : q, k, v (inputs, not copied), the output out (B,H,Sc,D) (the caller may
//                 keep it merged as (B,Sc,E): the backward takes any (B,H,Sc,D) view of it)
//                 and *lse (B,H,Sc) fp32. Nothing of size Sc x Sc or Sc x S is saved.
//     allocates (whole call): running max m -> becomes lse (B,H,Sc) fp32, running sum
//                 (B,H,Sc) fp32, running output (B,H,Sc,D) fp32 (divided in place at the
//                 end: it is `out` when act is fp32, else out is one more (B,H,Sc,D) act),
//                 q_late = copy of the queries of chunk 2cp-1-r (B,H,c,D) act.
//     per step s: in flight: the next K/V block (2 blk, received) while the current one
//                 (2 blk: the inputs at s = 0, the block received at s-1 after) is sent on;
//                 scores/probs (B,H,R,n) fp32 (R x n = Sc x Sc at s = 0, Sc x c or c x Sc
//                 after) and the block output probs @ v (B,H,R,D) (both freed in the step).
//     peak inside: state + q_late + 4 blk + (B,H,Sc,Sc) fp32 probs + (B,H,Sc,D).
//     communication: cp-1 steps, each sends k and v (2 blk) to rank r+1 and receives 2 blk
//                 from rank r-1, posted before the step's compute and waited after it.
//   RingAttentionBackward
//     allocates (whole call): dq accumulator (B,H,Sc,D) fp32 (returned as dq; a cast copy
//                 when act is not fp32), delta = rowsum(dout * out) (B,H,Sc) fp32,
//                 q_late, dout_late (B,H,c,D) act and lse_late (B,H,c) fp32 copies.
//     per step s: in flight K/V as in the forward (4 blk); the dK/dV accumulator of block j
//                 (2 blk fp32) being sent to r+1 and the one of the next block being
//                 received from r-1 (2 blk fp32); this step's partial dK, dV of the visible
//                 keys (<= 2 blk); probs and dscores (B,H,R,n) fp32 (2 x (B,H,Sc,Sc) at s = 0).
//     peak inside: dq + 4 blk (K/V) + 4 blk fp32 (dK/dV acc) + 2 blk + 2 x (B,H,Sc,Sc) fp32.
//     communication: K/V exactly as in the forward (cp-1 sends of 2 blk, posted before the
//                 compute). The dK/dV accumulators: after each step's compute (cp steps),
//                 rank r adds its partial into the accumulator of block j, sends it (2 blk
//                 fp32) to r+1 and posts the receive of the next accumulator from r-1, which
//                 is waited after the next step's compute (overlapped). The accumulator of
//                 block j starts on rank j (step 0), visits ranks j+1, ..., j+cp-1 and the
//                 last send (after step cp-1) brings it home to rank j complete: cp sends of
//                 2 blk fp32 per rank.
// Every rank of the cp group must call these together (same shapes). cp == 1 is plain
// causal attention (no communication).
#pragma once

#include <ATen/ATen.h>

#include "executor/communicator.h"
#include "executor/ops.h"

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
