// StageLayers: how many transformer blocks each pipeline stage holds.
//
// The one place the split is computed; the cost model, the simulator, the GUI, the search
// and the executor all read it. By default (first_stage_layers = last_stage_layers = 0)
// the L layers split evenly: L / pp per stage. A plan may give the first and/or the last
// stage its own count (Megatron-LM's decoder_first/last_pipeline_num_layers, e.g. Llama
// 3.1 405B: 126 layers on pp=16 as 7 + 14 x 8 + 7); the other stages ("middle": all
// stages whose count the plan leaves at 0) share the rest equally. The rule that the rest
// divides is checked by CheckPlan() (planner/parallel_plan.h, stage_layers_split); for a
// plan that breaks it the counts here are rounded down, never negative.
// Pure values, no allocation: the search calls it per candidate.
#pragma once

#include <cstdint>
#include <optional>

#include "planner/model_spec.h"
#include "planner/parallel_plan.h"

namespace meshplan {

struct StageLayers {
  int64_t pp = 1;
  int64_t first = 0;   // stage 0 (with pp == 1: every layer)
  int64_t middle = 0;  // each of stages 1 .. pp-2
  int64_t last = 0;    // stage pp-1 (with pp == 1: the same stage as first)

  // Blocks on `stage` (all its virtual chunks); 0 outside 0 .. pp-1.
  int64_t Of(int64_t stage) const;
  // The index of the first block of `stage` (blocks are numbered from 0 along the pipeline).
  int64_t FirstBlockOf(int64_t stage) const;
  // Blocks over all stages (the model's layers when the split is whole).
  int64_t Total() const { return FirstBlockOf(pp - 1) + Of(pp - 1); }
  // Every stage holds the same number of blocks.
  bool even() const { return pp == 1 || (first == last && (pp == 2 || first == middle)); }
};

// The split of `layers` blocks over the plan's pp stages.
StageLayers SplitLayers(int64_t layers, const ParallelPlan& plan);

// Blocks on pipeline stage `stage` of the plan: SplitLayers(model.layers, plan).Of(stage).
int64_t LayersOfStage(const ModelSpec& model, const ParallelPlan& plan, int64_t stage);

// The plan sets first_stage_layers or last_stage_layers (not the even default).
inline bool HasUnevenStages(const ParallelPlan& plan) {
  return plan.first_stage_layers != 0 || plan.last_stage_layers != 0;
}

// Whether the plan's uneven split is whole: stage counts >= 0, and the layers left after
// the set first / last stages split equally, at least 1 each, over the other stages
// (with none left over when both are set on pp == 2). True for the even default.
bool StageSplitIsWhole(int64_t layers, const ParallelPlan& plan);

// An uneven split, as the plan's two fields.
struct StageSplit {
  int64_t first_stage_layers = 0;
  int64_t last_stage_layers = 0;
  bool operator==(const StageSplit&) const = default;
};

// The split that gives the embedding and head stages fewer layers than the others (they
// also hold the embedding, the lm_head and the loss): the middle stages hold ceil(L/pp)
// (L/pp + 1 when pp divides L) and the first and last stage share the rest, the first the
// larger half (126 layers on pp=16: 7 + 14 x 8 + 7, Llama 3.1 405B's run). pp == 2: the
// first stage holds the larger half (L/2 + 1 when L is even). nullopt when pp < 2 or an
// end would get no layer.
std::optional<StageSplit> LighterEndsSplit(int64_t layers, int64_t pp);

}  // namespace meshplan
