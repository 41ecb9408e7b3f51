// CollectivePosition: where a collective runs within one pass of a part (a block, the
// embedding, the head), named for the points of the forward. Shared by a part's op list
// (block_ops.h, its collective ops), the step's work (step_work.h) and the simulator's graph.
#pragma once

#include <cstdint>

namespace meshplan {

// Where a collective sits, in the execution order of its phase: the forward runs
// embedding -> blocks -> head and in a block attention -> MLP; the backward runs
// head -> blocks -> embedding and in a block MLP -> attention, a half's kBefore* point as its
// backward starts and its kAfter* point as it ends (so in the backward "after MLP" precedes
// "after attention"); recompute replays a block's forward.
enum class CollectivePosition : uint8_t {
  kBeforePart,       // ZeRO-3 all-gather of the part's parameters (prefetchable)
  kBeforeAttention,  // SP all-gather of the normed input (backward: the all-gathers of the
                     // output's gradient and of the saved sharded input)
  kDuringAttention,  // CP ring K/V exchange, overlapped with the attention core
  kAfterAttention,   // TP all-reduce / SP reduce-scatter of the attention output (or gradient)
  kBeforeMlp,        // SP all-gather, as kBeforeAttention
  kExpertDispatch,   // MoE, ep > 1: all-to-all of the routed rows to their experts' ranks (and
                     // the tp all-gather of them); backward: the same exchange of their gradient
  kExpertCombine,    // MoE, ep > 1: the tp reduce-scatter and all-to-all of the experts' outputs
                     // back to their tokens' ranks; backward: first, before the experts' backward
  kAfterMlp,         // TP all-reduce / SP reduce-scatter, as kAfterAttention
  kEmbeddingOutput,  // vocabulary-parallel embedding: all-reduce (SP: reduce-scatter) of its
                     // output; backward with SP: all-gather of the output gradient
  kLmHeadInput,      // SP all-gather of the lm_head input; backward: all-reduce (SP:
                     // reduce-scatter) of the input gradient, with SP the saved input's re-gather
  kInLoss,           // vocabulary-parallel cross-entropy: max, sum-exp, target logit
  kAfterPart,        // gradient bucket ready (DP), stage output sent (PP), tied-embedding sync
  kAfterOptimizer,   // ZeRO-1/2 all-gather of the updated parameters
};
const char* ToString(CollectivePosition position);

}  // namespace meshplan
