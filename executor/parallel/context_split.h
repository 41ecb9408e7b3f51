// Context-parallel token split (zigzag causal load balance, docs/cost_model.md section 3): the
// sequence S is cut into 2*cp equal chunks of c = S / (2*cp) tokens; cp
// rank r holds chunks r and 2*cp-1-r, concatenated in that order, so its local sequence has
// Sc = S / cp tokens whose global positions increase along the local index (a causal mask
// over local indices is the causal mask over global positions). Every rank gets one early
// and one late chunk, so under a causal mask all ranks do the same attention work.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace meshplan {

// The global positions of cp rank r's local tokens: (Sc) int64, Sc = S / cp,
// [r*c, (r+1)*c) then [(2cp-1-r)*c, (2cp-r)*c). Throws std::invalid_argument unless
// S % (2*cp) == 0 and 0 <= r < cp.
at::Tensor LocalPositions(int64_t seq_len, int64_t cp, int64_t rank);

// Rank r's tokens of a full micro-batch: full (B,S) (ids or targets) -> (B,Sc) contiguous,
// a new tensor (the full batch is not kept). cp == 1 returns `full` itself.
at::Tensor SelectLocalTokens(const at::Tensor& full, int64_t cp, int64_t rank);

}  // namespace meshplan
