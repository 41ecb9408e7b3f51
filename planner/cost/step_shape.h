// StepShape: what the builders of StepWork's parts share (step_work.cc, block_work.cc,
// part_collectives.cc): the rank's shape (rank_shape.h), the lowering, the plan's sizes as
// doubles, and one way to write a Collective. The letters are the legend's
// (docs/architecture.md "Shape legend"). Internal to planner/cost/.
#pragma once

#include <cstdint>

#include "planner/attention_impl.h"
#include "planner/cost/block_ops.h"
#include "planner/cost/rank_shape.h"
#include "planner/cost/step_work.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"

namespace meshplan {

struct StepShape {
  const ModelSpec& model;
  const ParallelPlan& plan;
  const RankGroups& groups;  // the rank's communication groups (collective_time.h)
  const RankShape& rank;  // the rank's shape, derived once (T and Tn below are its)
  Lowering lowering;   // which kernels run the block's ops (block_ops.h)
  double T = 0;   // tokens of a micro-batch on this rank: B*S/cp
  double Tn = 0;  // tokens seen by norms / residuals: T/tp with SP, else T
  int64_t seq = 0;  // S: keys each query attends to (over the whole CP ring)
  double E = 0;
  double tp = 1;
  double a = 2;   // activation element size
  bool fp8 = false;  // the blocks' linear GEMMs in FP8 (planner/cost/fp8_convention.h)
  AttentionImpl attention = AttentionImpl::kFused;  // resolved
};

// Writes a collective into *c, in place (FixedList::emplace_back's reason); MakeCollective
// returns one.
inline void SetCollective(Collective* c, MeshDim dim, CollectiveKind kind, StepPhase phase,
                          CollectivePosition position, Cadence cadence, double bytes,
                          const CommGroup& group, bool overlappable, int32_t count = 1) {
  c->dim = dim;
  c->kind = kind;
  c->phase = phase;
  c->position = position;
  c->cadence = cadence;
  c->bytes = bytes;
  c->group = group;
  c->count = count;
  c->overlappable = overlappable;
}
inline Collective MakeCollective(MeshDim dim, CollectiveKind kind, StepPhase phase,
                                 CollectivePosition position, Cadence cadence, double bytes,
                                 const CommGroup& group, bool overlappable, int32_t count = 1) {
  Collective c;
  SetCollective(&c, dim, kind, phase, position, cadence, bytes, group, overlappable, count);
  return c;
}

}  // namespace meshplan
