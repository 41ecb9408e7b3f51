// StageLayers: how many transformer blocks each pipeline stage holds.
//
// The one place the split is computed; the cost model, the simulator, the GUI, the search
// and the executor all read it. By default (the plan's stage split 0, 0: StageSplitOf below)
// the L layers split evenly: L / pp per stage. A plan may give the first and/or the last
// stage its own count (Megatron-LM's decoder_first/last_pipeline_num_layers, e.g. Llama
// 3.1 405B: 126 layers on pp=16 as 7 + 14 x 8 + 7); the other stages ("middle": all
// stages whose count the plan leaves at 0) share the rest equally. The rule that the rest
// divides is checked by CheckPlan() (planner/parallel_plan.h, stage_layers_split); for a
// plan that breaks it the counts here are rounded down, never negative.
// Interleaved (vpp = v > 1): each stage holds v model chunks, chunk c of stage r being
// virtual stage c*pp + r, and blocks run along the virtual stages. A middle stage's chunks
// hold middle / v blocks each; so do the ends' chunks, except the pipeline's first virtual
// stage (stage 0, chunk 0) and its last (stage pp-1, chunk v-1), which hold what their
// stage's count leaves: the ends give up layers at the ends of the model, as Llama 3's 405B
// run did (126 layers on pp=16, v=8: stage 0's first chunk holds only the embedding).
// CheckPlan() checks that middle divides by v and that the end chunks are not negative
// (stage_layers_with_vpp).
// Pure values, no allocation: the search calls it per candidate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "planner/model_spec.h"
#include "planner/parallel_plan.h"

namespace meshplan {

struct StageLayers {
  int64_t pp = 1;
  int64_t vpp = 1;     // model chunks per stage (the interleaved schedule's v), else 1
  int64_t first = 0;   // stage 0 (with pp == 1: every layer)
  int64_t middle = 0;  // each of stages 1 .. pp-2
  int64_t last = 0;    // stage pp-1 (with pp == 1: the same stage as first)

  // Blocks on `stage` (all its virtual chunks); 0 outside 0 .. pp-1.
  int64_t Of(int64_t stage) const;
  // The index of the first block of `stage` (blocks are numbered from 0 along the pipeline).
  int64_t FirstBlockOf(int64_t stage) const;
  // Blocks over all stages (the model's layers when the split is whole).
  int64_t Total() const { return FirstBlockOf(pp - 1) + Of(pp - 1); }
  // Blocks of model chunk `chunk` (0 .. vpp-1) of `stage`; 0 outside the ranges. With
  // vpp == 1 chunk 0 is the whole stage.
  int64_t ChunkOf(int64_t stage, int64_t chunk) const;
  // The index of the first block of chunk `chunk` of `stage`.
  int64_t FirstBlockOfChunk(int64_t stage, int64_t chunk) const;
  // The most blocks one chunk of `stage` holds.
  int64_t LargestChunkOf(int64_t stage) const;
  // Every stage holds the same number of blocks.
  bool even() const { return pp == 1 || (first == last && (pp == 2 || first == middle)); }
};

// The split of `layers` blocks over the plan's pp stages (and its chunks: vpp is the
// plan's virtual_stages under the interleaved schedule, else 1).
StageLayers SplitLayers(int64_t layers, const ParallelPlan& plan);

// Blocks on pipeline stage `stage` of the plan: SplitLayers(model.layers, plan).Of(stage).
int64_t LayersOfStage(const ModelSpec& model, const ParallelPlan& plan, int64_t stage);

// An uneven split: the layers of the first and of the last stage, each 0 for the even
// share (the plan's two stage-split fields, planner/plan_fields.h).
struct StageSplit {
  int64_t first = 0;
  int64_t last = 0;
  bool operator==(const StageSplit&) const = default;
};
StageSplit StageSplitOf(const ParallelPlan& plan);
void SetStageSplit(ParallelPlan* plan, const StageSplit& split);

// The plan sets the first or the last stage's layers (not the even default).
inline bool HasUnevenStages(const ParallelPlan& plan) { return StageSplitOf(plan) != StageSplit{}; }

// Whether the plan's uneven split is whole: stage counts >= 0, and the layers left after
// the set first / last stages split equally, at least 1 each, over the other stages
// (with none left over when both are set on pp == 2). True for the even default.
bool StageSplitIsWhole(int64_t layers, const ParallelPlan& plan);

// Whether a whole uneven split also splits into the plan's interleaved chunks: a stage
// holds the even share (the chunk size is its count / vpp), that share divides by vpp,
// and stage 0's first chunk and the last stage's last chunk are not negative. True for
// vpp == 1 and for the even default.
bool StageSplitFitsChunks(int64_t layers, const ParallelPlan& plan);

// The split that gives the embedding and head stages fewer layers than the others (they
// also hold the embedding, the lm_head and the loss): the middle stages hold ceil(L/pp)
// (L/pp + 1 when pp divides L) and the first and last stage share the rest, the first the
// larger half (126 layers on pp=16: 7 + 14 x 8 + 7, Llama 3.1 405B's run). pp == 2: the
// first stage holds the larger half (L/2 + 1 when L is even). nullopt when pp < 2 or an
// end would get no layer.
std::optional<StageSplit> LighterEndsSplit(int64_t layers, int64_t pp);

// The same for the interleaved schedule with vpp chunks per stage (vpp >= 2, pp >= 3):
// the middle stages hold the smallest multiple of vpp that is >= the middle count above,
// the ends share the rest as above. nullopt where that leaves an end with no layer or a negative
// end chunk (StageSplitFitsChunks). 126 layers on pp=16: vpp 2, 4, 8 give 7 + 14 x 8 + 7.
std::optional<StageSplit> LighterEndsSplit(int64_t layers, int64_t pp, int64_t vpp);

// The message of a broken stage-split rule of CheckPlan() (stage_layers_need_pp,
// stage_layers_split, stage_layers_with_vpp): the fields, their values, and what is allowed.
std::string StageSplitViolation(PlanConstraint constraint, const ParallelPlan& plan,
                                int64_t layers);

}  // namespace meshplan
