// How many micro-batches' activations a pipeline stage holds at its peak.
//
// Activations saved for backward live from a micro-batch's forward to its
// backward; the schedule decides how many overlap on one stage. Used by both
// memory models (and available to the simulator to check its timelines against).
#pragma once

#include <cstdint>

#include "planner/parallel_plan.h"
#include "planner/stage_layers.h"

namespace meshplan {

struct MicrobatchesInFlight {
  // This stage's block activations alive at the start of the backward of the
  // last forward in flight, in units of one micro-batch through all of the
  // stage's layers (fractional for the interleaved schedule).
  double blocks = 0;
  // The same as the backward of the stage's last chunk starts (the head's, on the last
  // stage) and as the backward of its first chunk starts (the embedding's, on stage 0):
  // `blocks` unless the stage's chunks differ (uneven ends, interleaved).
  double head_blocks = 0;
  double embedding_blocks = 0;
  // Micro-batches whose first-stage tensors (token ids, embedding dropout mask) are held.
  int64_t first_stage = 0;
  // Micro-batches whose loss tensors (fp32 log-probabilities) the last stage holds.
  int64_t last_stage = 0;
};

// m = micro-batches per step on each dp rank, 0 <= stage < plan.pp.
//   no pipeline (pp = 1): 1 (gradient accumulation frees a micro-batch's
//     activations in its backward before the next forward);
//   gpipe: m (all forwards, then all backwards);
//   1f1b and zb_h1: min(m, pp - stage) (pp - stage - 1 warm-up forwards, then one
//     more before the first backward; ZB-H1 keeps 1F1B's activation memory);
//   interleaved (Megatron): (pp - stage - 1) * 2 + (vpp - 1) * pp warm-up model-chunk
//     forwards plus one, capped at m * vpp, and all m * vpp when m == pp (Megatron runs
//     all forwards first then). Each chunk holds L / (pp * vpp) layers, so `blocks`
//     is chunks / vpp; stage 0 gets pp + (pp - 1) / vpp micro-batches, i.e. the
//     L * (1 + (pp - 1) / (pp * vpp)) layer-activations of Korthikanti et al. 2022.
//     Where the stage's chunks differ (uneven ends: SplitLayers(layers, plan)), `blocks` is the most layers
//     alive as one of its backwards starts in that order (planner/pipeline_schedule.h),
//     over the stage's layers; head_blocks and embedding_blocks the most as a backward of
//     the last / first chunk starts.
//     The last stage's last chunk runs 1F1B-style: its loss tensors are held for 1
//     micro-batch; the first stage's token ids for ceil(blocks) (they are tiny).
// `layers`: the model's, which SplitLayers(layers, plan) puts on the stages and chunks.
MicrobatchesInFlight CountMicrobatchesInFlight(const ParallelPlan& plan, int64_t layers, int64_t m,
                                               int64_t stage);

}  // namespace meshplan
