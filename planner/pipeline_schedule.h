// Pipeline schedules as per-stage orderings of (micro-batch, model chunk, pass).
//
// With pp stages and v = virtual_stages model chunks per stage, chunk c of stage r
// runs virtual stage c*pp + r (Megatron's interleaved layout); v = 1 otherwise.
// StageOrder lists what one stage's compute stream runs, in issue order:
//   gpipe:       every forward (micro-batch 0..m-1), then every backward (0..m-1).
//   1f1b:        min(pp-r-1, m) warm-up forwards, then one forward + one backward
//                each, then the remaining backwards (PipeDream-Flush / Megatron).
//   interleaved: Megatron's interleaved 1F1B: (pp-r-1)*2 + (v-1)*pp warm-up forwards
//                (all of them when m == pp), then 1F1B over the m*v chunk passes;
//                the k-th forward runs chunk (k mod pp*v) / pp, the k-th backward chunk
//                v-1 minus that, both of micro-batch (k / (pp*v))*pp + k mod pp.
//                Needs m % pp == 0 (ParallelPlan's rule).
//   zb_h1:       ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): the 1f1b
//                order of forwards (F) and input-gradient passes (B), with the weight-
//                gradient pass (W) of each micro-batch run as its own item: stage r runs
//                W(k) right after B(k + r), and the last r W's after its last B. So
//                stage r holds at most (pp - r) + r = pp micro-batches in flight, 1F1B's
//                peak (stage 0's), while the later stages' deferred W's fill the
//                cool-down; with f = b = w the bubble drops to (pp-1)(f + b - w), a third
//                of 1F1B's.
// Every other schedule runs W inside its B.
// Pure functions; StageOrder allocates its result only.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/parallel_plan.h"

namespace meshplan {

enum class PipelinePass : uint8_t { kForward, kBackward, kWeight };

struct ScheduleItem {
  int32_t microbatch = 0;
  int32_t chunk = 0;  // model chunk on this stage, 0..v-1
  PipelinePass pass = PipelinePass::kForward;
};

// The issue order of one stage (see the header). m micro-batches, v chunks (1 unless
// interleaved). Every (micro-batch, chunk) appears once per pass (zb_h1: F, B and W;
// the others: F and B).
std::vector<ScheduleItem> StageOrder(PipelineSchedule schedule, int64_t pp, int64_t v,
                                     int64_t m, int64_t stage);

// Megatron's interleaved order, piece by piece (StageOrder builds it from these): the
// warm-up forwards of `stage` (all m*v when m == pp) ...
int64_t InterleavedWarmup(int64_t pp, int64_t v, int64_t m, int64_t stage);

// ... and the passes of one kind in their order, without allocating: the k-th forward
// runs chunk (k mod pp*v) / pp of micro-batch (k / (pp*v))*pp + k mod pp, the k-th
// backward the same micro-batch and chunk v-1 minus that.
class InterleavedCursor {
 public:
  InterleavedCursor(int64_t pp, int64_t v, PipelinePass pass);
  int64_t chunk() const { return backward_ ? v_ - 1 - chunk_ : chunk_; }
  int64_t microbatch() const { return round_ * pp_ + slot_; }
  void Next();  // to the next pass of this kind

 private:
  int64_t pp_, v_;
  bool backward_;
  int64_t slot_ = 0, chunk_ = 0, round_ = 0;  // k = (round*v + chunk)*pp + slot
};

// True when the schedule runs weight gradients (W) apart from input gradients (B).
bool SplitsWeightGradients(PipelineSchedule schedule);

}  // namespace meshplan
