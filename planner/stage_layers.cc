#include "planner/stage_layers.h"

#include <algorithm>

namespace meshplan {
namespace {

// The stages whose count the plan leaves to the even share, and the layers they share.
struct FreeStages {
  int64_t count = 0;
  int64_t layers = 0;
};

FreeStages FreeStagesOf(int64_t layers, const ParallelPlan& plan) {
  const int64_t first = plan.first_stage_layers, last = plan.last_stage_layers;
  FreeStages free;
  free.count = plan.pp - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
  free.layers = layers - std::max<int64_t>(first, 0) - std::max<int64_t>(last, 0);
  return free;
}

}  // namespace

int64_t StageLayers::Of(int64_t stage) const {
  if (stage < 0 || stage >= pp) return 0;
  if (stage == 0) return first;
  return stage == pp - 1 ? last : middle;
}

int64_t StageLayers::FirstBlockOf(int64_t stage) const {
  if (stage <= 0) return 0;
  return first + (std::min(stage, pp) - 1) * middle;
}

int64_t StageLayers::ChunkOf(int64_t stage, int64_t chunk) const {
  if (stage < 0 || stage >= pp || chunk < 0 || chunk >= vpp) return 0;
  if (vpp == 1) return Of(stage);
  const int64_t size = middle / vpp;
  if (stage == 0 && chunk == 0) return std::max<int64_t>(0, first - (vpp - 1) * size);
  if (stage == pp - 1 && chunk == vpp - 1) return std::max<int64_t>(0, last - (vpp - 1) * size);
  return size;
}

int64_t StageLayers::FirstBlockOfChunk(int64_t stage, int64_t chunk) const {
  if (vpp == 1) return FirstBlockOf(stage);
  const int64_t virtual_stage = chunk * pp + stage;
  if (virtual_stage <= 0) return 0;
  return ChunkOf(0, 0) + (virtual_stage - 1) * (middle / vpp);
}

int64_t StageLayers::LargestChunkOf(int64_t stage) const {
  int64_t most = 0;
  for (int64_t c = 0; c < vpp; ++c) most = std::max(most, ChunkOf(stage, c));
  return most;
}

StageLayers SplitLayers(int64_t layers, const ParallelPlan& plan) {
  StageLayers split;
  split.pp = std::max<int64_t>(plan.pp, 1);
  if (split.pp > 1 && plan.schedule == PipelineSchedule::kInterleaved)
    split.vpp = std::max<int64_t>(plan.virtual_stages, 1);
  if (split.pp == 1 || !HasUnevenStages(plan)) {
    const int64_t even = std::max<int64_t>(layers, 0) / split.pp;
    split.first = split.middle = split.last = even;
    return split;
  }
  const FreeStages free = FreeStagesOf(layers, plan);
  split.middle = free.count > 0 ? std::max<int64_t>(free.layers, 0) / free.count : 0;
  split.first = plan.first_stage_layers > 0 ? plan.first_stage_layers : split.middle;
  split.last = plan.last_stage_layers > 0 ? plan.last_stage_layers : split.middle;
  return split;
}

int64_t LayersOfStage(const ModelSpec& model, const ParallelPlan& plan, int64_t stage) {
  return SplitLayers(model.layers, plan).Of(stage);
}

bool StageSplitIsWhole(int64_t layers, const ParallelPlan& plan) {
  if (!HasUnevenStages(plan)) return true;
  if (plan.first_stage_layers < 0 || plan.last_stage_layers < 0 || plan.pp < 2) return false;
  const FreeStages free = FreeStagesOf(layers, plan);
  if (free.count == 0) return free.layers == 0;
  return free.layers >= free.count && free.layers % free.count == 0;
}

bool StageSplitFitsChunks(int64_t layers, const ParallelPlan& plan) {
  const StageLayers split = SplitLayers(layers, plan);
  if (split.vpp == 1 || !HasUnevenStages(plan)) return true;
  if (FreeStagesOf(layers, plan).count == 0 || split.middle % split.vpp != 0) return false;
  const int64_t others = (split.vpp - 1) * (split.middle / split.vpp);
  return split.first >= others && split.last >= others;
}

std::optional<StageSplit> LighterEndsSplit(int64_t layers, int64_t pp, int64_t vpp) {
  if (pp < 3 || vpp < 2 || layers < 2) return std::nullopt;
  const int64_t lighter = layers % pp == 0 ? layers / pp + 1 : (layers + pp - 1) / pp;
  const int64_t middle = (lighter + vpp - 1) / vpp * vpp;
  const int64_t ends = layers - (pp - 2) * middle;
  const int64_t first = ends - ends / 2, last = ends - first;
  const int64_t others = (vpp - 1) * (middle / vpp);
  if (last < 1 || first < others || last < others) return std::nullopt;
  return StageSplit{first, last};
}

std::optional<StageSplit> LighterEndsSplit(int64_t layers, int64_t pp) {
  if (pp < 2 || layers < 2) return std::nullopt;
  const int64_t middle = layers % pp == 0 ? layers / pp + 1 : (layers + pp - 1) / pp;
  const int64_t ends = pp == 2 ? layers : layers - (pp - 2) * middle;
  const int64_t first = pp == 2 ? (layers % 2 == 0 ? layers / 2 + 1 : (layers + 1) / 2)
                                : ends - ends / 2;
  const int64_t last = ends - first;
  if (first < 1 || last < 1) return std::nullopt;
  return StageSplit{first, last};
}

}  // namespace meshplan
