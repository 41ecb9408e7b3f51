#include "planner/cost/part_collectives.h"

namespace meshplan {

namespace {

// Whether a block's recompute pass replays a collective op's forward: full and every:N (on
// its checkpointed blocks) replay each one; the op policy each whose output its save list
// does not hold (BlockOp::output_saved_by_op: the reduce-scatters', the ring kernel's;
// docs/memory_model.md "Recompute policies"); none and selective none.
bool Replays(const RecomputePolicy& policy, const BlockOp& op) {
  switch (policy.kind) {
    case Recompute::kFull:
    case Recompute::kEvery: return true;
    case Recompute::kOp: return !op.output_saved_by_op;
    default: return false;
  }
}

// Whether a collective on `dim` may run behind compute: tp's with tp_comm_overlap, the CP
// ring's always (it overlaps the attention core), the expert all-to-alls never (the experts
// wait for their rows).
bool Overlappable(const ParallelPlan& plan, MeshDim dim) {
  switch (dim) {
    case MeshDim::kTp: return plan.tp_comm_overlap;
    case MeshDim::kCp: return true;
    default: return false;
  }
}

// Appends `pass` of `op` in `phase`, or adds its count to an identical collective already there
// (same group, kind, phase, place, size and window: Collective::count). The phase's
// collectives are part->collectives from index `phase_begin` on.
void AddPass(const StepShape& s, const BlockOp& op, const CollectivePass& pass, StepPhase phase,
             int phase_begin, PartWork* part) {
  if (pass.count == 0) return;
  const OpCollective& c = op.comm;
  const bool behind_gemms = phase == StepPhase::kBackward && c.backward_behind_gemms;
  for (Collective* existing = part->collectives.begin() + phase_begin;
       existing != part->collectives.end(); ++existing) {
    if (existing->dim == c.dim && existing->kind == pass.kind && existing->phase == phase &&
        existing->position == pass.at && existing->bytes == c.bytes &&
        existing->behind_gemms == behind_gemms) {
      existing->count += pass.count;
      return;
    }
  }
  Collective& added = part->collectives.emplace_back();
  SetCollective(&added, c.dim, pass.kind, phase, pass.at, Cadence::kPerMicrobatch, c.bytes,
                s.groups[c.dim], Overlappable(s.plan, c.dim) || behind_gemms, pass.count);
  added.behind_gemms = behind_gemms;
}

}  // namespace

void OpListCollectives(const StepShape& s, const BlockOps& ops, bool block, PartWork* part) {
  const BlockOps::OpIndices& collective_ops = ops.collective_ops();
  int begin = part->collectives.size;
  for (const uint8_t i : collective_ops)
    AddPass(s, ops[i], ops[i].comm.forward, StepPhase::kForward, begin, part);
  begin = part->collectives.size;
  if (block)
    for (const uint8_t i : collective_ops)
      if (Replays(s.plan.recompute, ops[i]))
        AddPass(s, ops[i], ops[i].comm.forward, StepPhase::kRecompute, begin, part);
  begin = part->collectives.size;
  for (const uint8_t* i = collective_ops.end(); i != collective_ops.begin();) {
    --i;
    AddPass(s, ops[*i], ops[*i].comm.backward, StepPhase::kBackward, begin, part);
  }
}

namespace {

// The DP gradient sync and ZeRO parameter gathers of `params` parameters over `dp`.
void AddDpSync(const StepShape& s, const StepWork& w, int64_t params, const CommGroup& dp,
               PartWork* part) {
  if (dp.size() <= 1 || params == 0) return;
  const double grads = static_cast<double>(params * w.grad_bytes);
  const double weights = static_cast<double>(params * w.param_bytes);
  using P = CollectivePosition;
  using K = CollectiveKind;
  auto add = [&](K kind, StepPhase phase, P position, Cadence cadence, double bytes, bool overlap) {
    SetCollective(&part->collectives.emplace_back(), MeshDim::kDp, kind, phase, position, cadence,
                  bytes, dp, overlap);
  };
  switch (s.plan.zero_stage) {
    case 0:
      add(K::kAllReduce, StepPhase::kBackward, P::kAfterPart, Cadence::kPerStep, grads, true);
      break;
    case 1:
    case 2:
      add(K::kReduceScatter, StepPhase::kBackward, P::kAfterPart,
          s.plan.zero_stage == 1 ? Cadence::kPerStep : Cadence::kPerMicrobatch, grads, true);
      add(K::kAllGather, StepPhase::kOptimizer, P::kAfterOptimizer, Cadence::kPerStep, weights,
          false);
      break;
    default:  // 3
      add(K::kAllGather, StepPhase::kForward, P::kBeforePart, Cadence::kPerMicrobatch, weights,
          true);
      add(K::kAllGather, StepPhase::kBackward, P::kBeforePart, Cadence::kPerMicrobatch, weights,
          true);
      add(K::kReduceScatter, StepPhase::kBackward, P::kAfterPart, Cadence::kPerMicrobatch, grads,
          true);
      break;
  }
}

}  // namespace

// DP gradient sync and ZeRO parameter gathers of a part with `params` parameters on this
// rank, `expert_params` of them routed experts split over ep > 1: those over the
// expert-data-parallel group, the rest over dp x cp.
void DpCollectives(const StepShape& s, const StepWork& w, int64_t params, int64_t expert_params,
                   PartWork* part) {
  AddDpSync(s, w, params - expert_params, s.groups.weight_replicas, part);
  AddDpSync(s, w, expert_params, s.groups.expert_replicas, part);
}

namespace {

bool IsDpCollective(const Collective& c, CollectiveKind kind, StepPhase phase) {
  return c.dim == MeshDim::kDp && c.kind == kind && c.phase == phase;
}

// Keeps the part's collectives that `drop` does not match.
template <class Drop>
void DropCollectives(PartWork* part, Drop drop) {
  FixedList<Collective, kMaxCollectivesPerPart> kept;
  for (const Collective& c : part->collectives)
    if (!drop(c)) kept.push_back(c);
  part->collectives = kept;
}

}  // namespace

void HoldZero3Root(const StepShape& s, PartWork* embedding, PartWork* head) {
  using K = CollectiveKind;
  using P = StepPhase;
  const auto backward_gather = [](const Collective& c) {
    return IsDpCollective(c, K::kAllGather, P::kBackward);
  };
  DropCollectives(embedding, backward_gather);
  DropCollectives(head, backward_gather);
  if (s.plan.pp > 1) return;  // one of them per stage: each keeps its gather and reduce-scatter
  const auto forward_gather = [](const Collective& c) {
    return IsDpCollective(c, K::kAllGather, P::kForward);
  };
  const auto reduce_scatter = [](const Collective& c) {
    return IsDpCollective(c, K::kReduceScatter, P::kBackward);
  };
  for (const Collective& h : head->collectives)
    for (Collective& e : embedding->collectives)
      if ((forward_gather(h) && forward_gather(e)) || (reduce_scatter(h) && reduce_scatter(e)))
        e.bytes += h.bytes;
  DropCollectives(head, [&](const Collective& c) { return forward_gather(c) || reduce_scatter(c); });
}

// Tied embeddings split over pipeline stages: the first and last stage each hold a copy
// and all-reduce its gradient once per step (Megatron's embedding group).
void TiedEmbeddingSync(const StepShape& s, const StepWork& w, int64_t params, PartWork* part) {
  if (!s.model.tied_embeddings || s.plan.pp <= 1) return;
  part->collectives.push_back(
      MakeCollective(MeshDim::kPp, CollectiveKind::kAllReduce, StepPhase::kBackward,
                     CollectivePosition::kAfterPart, Cadence::kPerStep,
                     static_cast<double>(params * w.grad_bytes), s.groups.tied_embedding, false));
}

}  // namespace meshplan
