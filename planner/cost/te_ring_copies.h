// The copies Transformer Engine 1.8's context-parallel attention makes around its per-step
// attention kernels (AttnFuncWithCP in transformer_engine/pytorch/attention.py: the causal
// ring over load-balanced sequence halves), as memory-bound passes of one rank, averaged over
// the cp ranks (each rank's share of halves differs). Megatron-Core runs it for cp > 1
// (`kernels: fused`). te_ring_copies.cc sums its per-step branches over the ranks in closed
// form (tests/planner/te_ring_copies_test.cc walks them step by step); docs/cost_model.md,
// "Megatron-Core's q, k and v around Transformer Engine's attention", tables them.
#pragma once

#include <cstdint>

#include "planner/cost/block_ops.h"

namespace meshplan {

struct TeRingCopies {
  OpPass forward, backward;
};

// `q` and `kv`: this rank's elements of q and of k and v together (its T = B*S/cp tokens);
// `element_bytes`: their dtype's size; `cudnn`: TE's FusedAttention backend (else flash-attn).
TeRingCopies TeRingAttentionCopies(int64_t cp, double q, double kv, double element_bytes,
                                   bool cudnn);

}  // namespace meshplan
