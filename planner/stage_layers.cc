#include "planner/stage_layers.h"

#include <algorithm>
#include <string>

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

std::string Str(int64_t v) { return std::to_string(v); }

// "first_stage_layers=7, last_stage_layers=5": the uneven-stage fields the plan sets.
std::string StageFields(const ParallelPlan& plan) {
  std::string s;
  if (plan.first_stage_layers != 0) s = "first_stage_layers=" + Str(plan.first_stage_layers);
  if (plan.last_stage_layers != 0)
    s += (s.empty() ? "" : ", ") + std::string("last_stage_layers=") + Str(plan.last_stage_layers);
  return s;
}

// Why an uneven split is not whole, and the values that would be (stage_layers_split).
std::string StageSplitMessage(const ParallelPlan& plan, int64_t layers) {
  const std::string fields = StageFields(plan);
  if (plan.first_stage_layers < 0 || plan.last_stage_layers < 0)
    return fields + ": a stage's layers must be >= 1 (0 = the even share, the default)";
  const bool first = plan.first_stage_layers > 0, last = plan.last_stage_layers > 0;
  const int64_t others = plan.pp - (first ? 1 : 0) - (last ? 1 : 0);
  const int64_t rest = layers - plan.first_stage_layers - plan.last_stage_layers;
  if (others == 0)
    return fields + " on pp=2 must add up to layers=" + Str(layers) + " (each >= 1)";
  const std::string set = first && last ? "first_stage_layers + last_stage_layers"
                          : first       ? "first_stage_layers"
                                        : "last_stage_layers";
  return fields + " leave " + Str(rest) + " of layers=" + Str(layers) + " to the other " +
         Str(others) + " stage(s) of pp=" + Str(plan.pp) +
         ", which must each get the same whole number >= 1; allowed: " + set + " = " +
         Str(layers) + " - " + Str(others) + "*k for a whole k >= 1 (each stage >= 1 layer)";
}

// Why a whole uneven split does not split into the interleaved chunks
// (stage_layers_with_vpp), and what would.
std::string StageChunksMessage(const ParallelPlan& plan, int64_t layers) {
  const StageLayers split = SplitLayers(layers, plan);
  const std::string head = StageFields(plan) + " with vpp=" + Str(split.vpp) + ": ";
  const bool both = plan.first_stage_layers > 0 && plan.last_stage_layers > 0;
  if (plan.pp == 2 && both)
    return head + "the chunk size comes from a stage with the even share, and pp=2 has none "
                  "when both ends are set; allowed: set one of first_stage_layers and "
                  "last_stage_layers, or vpp=1";
  if (split.middle % split.vpp != 0)
    return head + "the other stages' " + Str(split.middle) + " layers each do not split into " +
           Str(split.vpp) + " equal chunks; allowed: vpp dividing " + Str(split.middle) +
           ", or first/last stage counts that leave the others a multiple of vpp";
  const int64_t others = (split.vpp - 1) * (split.middle / split.vpp);
  return head + "each end stage's other " + Str(split.vpp - 1) + " chunk(s) hold " +
         Str(split.middle / split.vpp) + " layers each, " + Str(others) +
         " in all, more than its count (first " + Str(split.first) + ", last " +
         Str(split.last) + "); allowed: first_stage_layers and last_stage_layers >= " +
         Str(others) + " (the chunk at the model's end then holds the rest, 0 or more)";
}

}  // namespace

StageSplit StageSplitOf(const ParallelPlan& plan) {
  return {plan.first_stage_layers, plan.last_stage_layers};
}

void SetStageSplit(ParallelPlan* plan, const StageSplit& split) {
  plan->first_stage_layers = split.first;
  plan->last_stage_layers = split.last;
}

std::string StageSplitViolation(PlanConstraint constraint, const ParallelPlan& plan,
                                int64_t layers) {
  switch (constraint) {
    case PlanConstraint::kStageLayersNeedPp:
      return StageFields(plan) + " need pp >= 2 (pp=1 has one stage, holding all layers=" +
             Str(layers) + "); allowed with pp=1: 0 (the default)";
    case PlanConstraint::kStageLayersSplit:
      return StageSplitMessage(plan, layers);
    case PlanConstraint::kStageLayersWithVpp:
      return StageChunksMessage(plan, layers);
    default:
      return "?";
  }
}

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
  if (plan.interleaved())
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
