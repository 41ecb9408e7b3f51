// The collectives of StepWork's parts on one rank: those of a part's op list (block_ops.h:
// a block's TP / SP, CP ring and expert all-to-alls, the embedding's and head's TP ones),
// every part's DP gradient sync and ZeRO gathers, and the tied embedding's sync between the
// first and the last stage. Sizes and cadences are step_work.h's; their time is
// collective_time.h's. Internal to planner/cost/ (step_work.cc builds with it).
#pragma once

#include <cstdint>

#include "planner/cost/step_shape.h"
#include "planner/cost/step_work.h"

namespace meshplan {

// The collectives of a part's op list (its kCollective ops: a block's tp / sp, cp ring and
// expert all-to-alls, the embedding's and the head's tp ones), pass by pass: the forward in
// op order, then for a block (`block`) the recompute pass's replays under the plan's policy,
// then the backward in reverse op order; identical ones at one place add up in one entry.
void OpListCollectives(const StepShape& s, const BlockOps& ops, bool block, PartWork* part);
// DP gradient sync and ZeRO parameter gathers of a part with `params` parameters on this
// rank, `expert_params` of them routed experts split over ep > 1.
void DpCollectives(const StepShape& s, const StepWork& w, int64_t params, int64_t expert_params,
                   PartWork* part);
// The tied embedding's gradient all-reduce between the first and the last stage.
void TiedEmbeddingSync(const StepShape& s, const StepWork& w, int64_t params, PartWork* part);
// ZeRO-3 under FrameworkSpec::zero3_end_parts root: the embedding and the head are held
// from their forward through their backward (no backward gathers); with both on one stage
// (pp == 1) the head's forward gather and gradient reduce-scatter join the embedding's,
// the first gather of the forward and the last reduce-scatter of the backward.
void HoldZero3Root(const StepShape& s, PartWork* embedding, PartWork* head);

}  // namespace meshplan
