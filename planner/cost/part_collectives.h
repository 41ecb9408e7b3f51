// The collectives of StepWork's parts on one rank: a block's TP / SP, CP ring and expert
// all-to-alls, every part's DP gradient sync and ZeRO gathers, and the tied embedding's
// sync between the first and the last stage. Sizes and cadences are step_work.h's; their
// time is collective_time.h's. Internal to planner/cost/ (step_work.cc builds with it).
#pragma once

#include <cstdint>

#include "planner/cost/step_shape.h"
#include "planner/cost/step_work.h"

namespace meshplan {

// TP (and SP) collectives of one block.
void BlockTpCollectives(const StepShape& s, PartWork* part);
// CP ring exchanges of one block's attention.
void BlockCpCollectives(const StepShape& s, PartWork* part);
// Expert-parallel all-to-alls (and their tp gathers) of a MoE block.
void BlockEpCollectives(const StepShape& s, PartWork* part);
// DP gradient sync and ZeRO parameter gathers of a part with `params` parameters on this
// rank, `expert_params` of them routed experts split over ep > 1.
void DpCollectives(const StepShape& s, const StepWork& w, int64_t params, int64_t expert_params,
                   PartWork* part);
// The tied embedding's gradient all-reduce between the first and the last stage.
void TiedEmbeddingSync(const StepShape& s, const StepWork& w, int64_t params, PartWork* part);

}  // namespace meshplan
