#include "planner/cost/pipeline_in_flight.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "planner/pipeline_schedule.h"

namespace meshplan {

namespace {

// Unequal chunks (uneven ends under the interleaved schedule): which chunks are in flight
// matters, so Walk() runs the stage's order (planner/pipeline_schedule.h, without building
// it) and takes the most layers alive as a backward starts (of any chunk, of the last, of
// the first), over the stage's layers.
//
// It walks at most 3*pp micro-batches. After the warm-up each forward is followed by a
// backward, the chunks of both repeat every pp*vpp passes, so the layers alive as a backward
// starts repeat too, and the cool-down only frees. The order of 3*pp micro-batches has the
// same warm-up as m's and at least a full period of that steady state (its warm-up is at most
// (vpp + 2)*pp - 2 of its 3*pp*vpp passes), so its peaks are m's.
//
// The walk depends on WalkKey alone, which many search candidates share (every m >= 3*pp
// walks the same): PeakOfUnequalChunks keeps the last few walks per thread.
struct WalkKey {
  int64_t pp = 0, v = 0, walked = 0, stage = 0, blocks = 0, odd_blocks = 0;
  bool operator==(const WalkKey&) const = default;
};

MicrobatchesInFlight Walk(const WalkKey& key) {
  const int64_t pp = key.pp, v = key.v, walked = key.walked, stage = key.stage;
  const int64_t total = walked * v, warmup = InterleavedWarmup(pp, v, walked, stage);
  // Only the chunk at the model's end differs from the others (planner/stage_layers.h).
  const int64_t odd = stage == 0 ? 0 : v - 1, odd_blocks = key.odd_blocks, blocks = key.blocks;
  InterleavedCursor forward(pp, v, PipelinePass::kForward), backward(pp, v, PipelinePass::kBackward);
  int64_t alive = 0, peak = 0, at_last = 0, at_first = 0;
  auto run_forward = [&] {
    alive += forward.chunk() == odd ? odd_blocks : blocks;
    forward.Next();
  };
  auto run_backward = [&] {  // as it starts, then its chunk's layers are freed
    const int64_t chunk = backward.chunk();
    peak = std::max(peak, alive);
    if (chunk == v - 1) at_last = std::max(at_last, alive);
    if (chunk == 0) at_first = std::max(at_first, alive);
    alive -= chunk == odd ? odd_blocks : blocks;
    backward.Next();
  };
  for (int64_t k = 0; k < warmup; ++k) run_forward();
  for (int64_t i = 0; i < total - warmup; ++i) {
    run_forward();
    run_backward();
  }
  for (int64_t k = total - warmup; k < total; ++k) run_backward();
  const double layers = static_cast<double>((v - 1) * blocks + odd_blocks);
  MicrobatchesInFlight out;
  out.blocks = static_cast<double>(peak) / layers;
  out.head_blocks = static_cast<double>(at_last) / layers;
  out.embedding_blocks = static_cast<double>(at_first) / layers;
  return out;
}

MicrobatchesInFlight PeakOfUnequalChunks(const StageLayers& split, int64_t m, int64_t stage) {
  WalkKey key;
  key.pp = split.pp;
  key.v = split.vpp;
  key.walked = std::min(m, 3 * split.pp);
  key.stage = stage;
  key.blocks = split.middle / split.vpp;
  key.odd_blocks = split.ChunkOf(stage, stage == 0 ? 0 : split.vpp - 1);
  constexpr int kKept = 8;
  thread_local std::array<std::pair<WalkKey, MicrobatchesInFlight>, kKept> recent{};
  thread_local int next = 0;
  for (const auto& [k, result] : recent)
    if (k == key) return result;
  const MicrobatchesInFlight result = Walk(key);
  recent[static_cast<size_t>(next)] = {key, result};
  next = (next + 1) % kKept;
  return result;
}

MicrobatchesInFlight Uniform(double blocks, int64_t first_stage, int64_t last_stage) {
  MicrobatchesInFlight out;
  out.blocks = out.head_blocks = out.embedding_blocks = blocks;
  out.first_stage = first_stage;
  out.last_stage = last_stage;
  return out;
}

bool ChunksEqual(const StageLayers& split, int64_t stage) {
  for (int64_t c = 1; c < split.vpp; ++c)
    if (split.ChunkOf(stage, c) != split.ChunkOf(stage, 0)) return false;
  return true;
}

}  // namespace

MicrobatchesInFlight CountMicrobatchesInFlight(const ParallelPlan& plan, int64_t layers, int64_t m,
                                               int64_t stage) {
  m = std::max<int64_t>(m, 1);
  if (plan.pp == 1) return Uniform(1.0, 1, 1);
  switch (plan.schedule) {
    case PipelineSchedule::kGpipe: return Uniform(static_cast<double>(m), m, m);
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kZeroBubbleH1: {
      const int64_t n = std::min(m, plan.pp - stage);
      return Uniform(static_cast<double>(n), n, n);
    }
    case PipelineSchedule::kInterleaved: {
      const int64_t vpp = plan.virtual_stages;
      const int64_t chunks = std::min(InterleavedWarmup(plan.pp, vpp, m, stage) + 1, m * vpp);
      const StageLayers split = SplitLayers(layers, plan);
      const bool unequal = split.Of(stage) > 0 && m % plan.pp == 0 && !ChunksEqual(split, stage);
      MicrobatchesInFlight out;
      if (unequal) {
        out = PeakOfUnequalChunks(split, m, stage);
      } else {
        out.blocks = out.head_blocks = out.embedding_blocks =
            static_cast<double>(chunks) / static_cast<double>(vpp);
      }
      out.first_stage = static_cast<int64_t>(std::ceil(out.blocks));
      out.last_stage = m == plan.pp ? m : 1;  // all-warm-up holds every micro-batch's loss
      return out;
    }
  }
  return Uniform(1.0, 1, 1);
}

}  // namespace meshplan
