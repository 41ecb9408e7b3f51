#include "planner/cost/part_collectives.h"

namespace meshplan {

namespace {

// Whether a block's recompute pass replays a forward collective of `kind`: full and
// every:N (on its checkpointed blocks) replay each one; the op policy each but the
// reduce-scatters, whose outputs its save list holds (docs/memory_model.md "Recompute
// policies"); none and selective none.
bool Replays(const RecomputePolicy& policy, CollectiveKind kind) {
  switch (policy.kind) {
    case Recompute::kFull:
    case Recompute::kEvery: return true;
    case Recompute::kOp: return kind != CollectiveKind::kReduceScatter;
    default: return false;
  }
}

}  // namespace

// TP (and SP) collectives of one block: 2 all-reduces forward and 2 backward, or with SP
// an all-gather + reduce-scatter pair in place of each (same volume) plus the backward's
// re-gather of each saved sharded input; the recompute pass replays the forward ones that
// Replays says.
void BlockTpCollectives(const StepShape& s, PartWork* part) {
  if (s.plan.tp <= 1) return;
  const CommGroup tp = MeshGroup(s.plan, MeshDim::kTp);
  const double bytes = s.T * s.E * s.a;  // (T, E) activation of this cp rank
  const bool overlap = s.plan.tp_comm_overlap;
  using P = CollectivePosition;
  auto add = [&](CollectiveKind kind, StepPhase phase, P position, int32_t count = 1) {
    if (phase == StepPhase::kRecompute && !Replays(s.plan.recompute, kind)) return;
    part->collectives.push_back(MakeCollective(MeshDim::kTp, kind, phase, position,
                                               Cadence::kPerMicrobatch, bytes, tp, overlap, count));
  };
  if (!s.plan.sequence_parallel) {
    for (StepPhase phase : {StepPhase::kForward, StepPhase::kRecompute}) {
      add(CollectiveKind::kAllReduce, phase, P::kAfterAttention);
      add(CollectiveKind::kAllReduce, phase, P::kAfterMlp);
    }
    add(CollectiveKind::kAllReduce, StepPhase::kBackward, P::kAfterMlp);
    add(CollectiveKind::kAllReduce, StepPhase::kBackward, P::kAfterAttention);
    return;
  }
  for (StepPhase phase : {StepPhase::kForward, StepPhase::kRecompute}) {
    add(CollectiveKind::kAllGather, phase, P::kBeforeAttention);
    add(CollectiveKind::kReduceScatter, phase, P::kAfterAttention);
    add(CollectiveKind::kAllGather, phase, P::kBeforeMlp);
    add(CollectiveKind::kReduceScatter, phase, P::kAfterMlp);
  }
  // Backward: the gradient of a reduce-scatter is an all-gather and vice versa; and the
  // sequence-sharded norm output saved for the weight gradients is all-gathered again
  // (Megatron, and the executor: executor/model/llama_model.h), one more all-gather per region.
  add(CollectiveKind::kAllGather, StepPhase::kBackward, P::kBeforeMlp, 2);
  add(CollectiveKind::kReduceScatter, StepPhase::kBackward, P::kAfterMlp);
  add(CollectiveKind::kAllGather, StepPhase::kBackward, P::kBeforeAttention, 2);
  add(CollectiveKind::kReduceScatter, StepPhase::kBackward, P::kAfterAttention);
}

// CP ring attention (executor/parallel/ring_attention.h): every rank's K and V pass around the ring
// (cp-1 steps) in the forward; the backward passes K, V and their gradients (two
// exchanges). The ring keeps its logsumexp, so only full recompute (and every:N's
// checkpointed blocks) replays the forward exchange: selective recomputes nothing of it,
// and the op policy saves the ring kernel's outputs.
void BlockCpCollectives(const StepShape& s, PartWork* part) {
  if (s.plan.cp <= 1) return;
  const CommGroup cp = MeshGroup(s.plan, MeshDim::kCp);
  // K (B, S, K*D/tp) and V (B, S, K*Dv/tp); Dv == D except under MLA.
  const double v_width = static_cast<double>(s.model.kv_heads * s.model.v_head_dim());
  const double kv_bytes = s.plan.micro_batch * s.S * (s.KD + v_width) / s.tp * s.a;
  using P = CollectivePosition;
  auto add = [&](StepPhase phase, int32_t count) {
    part->collectives.push_back(MakeCollective(MeshDim::kCp, CollectiveKind::kRingExchange, phase,
                                               P::kDuringAttention, Cadence::kPerMicrobatch,
                                               kv_bytes, cp, /*overlappable=*/true, count));
  };
  add(StepPhase::kForward, 1);
  if (s.plan.recompute.kind == Recompute::kFull || s.plan.recompute.kind == Recompute::kEvery)
    add(StepPhase::kRecompute, 1);
  add(StepPhase::kBackward, 2);
}

// Expert parallel all-to-alls of a MoE block (step_work.h, expert_parallel.h), in each
// pass's order: forward dispatch (+ tp all-gather), experts, (tp reduce-scatter +) combine;
// backward the combine's gradient first. Blocking: the experts wait for their rows.
void BlockEpCollectives(const StepShape& s, PartWork* part) {
  if (s.ep.ep <= 1 || s.model.moe_layers() == 0) return;
  const CommGroup ep = MeshGroup(s.plan, MeshDim::kEp);
  const CommGroup tp = MeshGroup(s.plan, MeshDim::kTp);
  const double a2a = s.ep.all_to_all_bytes;               // (T*r/tp, E) per rank
  const double rows = s.ep.rows_computed * s.E * s.a;     // (T*r*u, E) gathered over tp
  const bool regather = s.plan.tp > 1;
  const bool tp_overlap = s.plan.tp_comm_overlap;
  using P = CollectivePosition;
  using K = CollectiveKind;
  auto a2a_at = [&](StepPhase phase, P position) {
    if (phase == StepPhase::kRecompute && !Replays(s.plan.recompute, K::kAllToAll)) return;
    part->collectives.push_back(MakeCollective(MeshDim::kEp, K::kAllToAll, phase, position,
                                               Cadence::kPerMicrobatch, a2a, ep,
                                               /*overlappable=*/false));
  };
  auto tp_at = [&](K kind, StepPhase phase, P position) {
    if (phase == StepPhase::kRecompute && !Replays(s.plan.recompute, kind)) return;
    if (regather)
      part->collectives.push_back(MakeCollective(MeshDim::kTp, kind, phase, position,
                                                 Cadence::kPerMicrobatch, rows, tp, tp_overlap));
  };
  for (StepPhase phase : {StepPhase::kForward, StepPhase::kRecompute}) {
    a2a_at(phase, P::kExpertDispatch);
    tp_at(K::kAllGather, phase, P::kExpertDispatch);
    tp_at(K::kReduceScatter, phase, P::kExpertCombine);
    a2a_at(phase, P::kExpertCombine);
  }
  a2a_at(StepPhase::kBackward, P::kExpertCombine);
  tp_at(K::kAllGather, StepPhase::kBackward, P::kExpertCombine);
  tp_at(K::kReduceScatter, StepPhase::kBackward, P::kExpertDispatch);
  a2a_at(StepPhase::kBackward, P::kExpertDispatch);
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
    part->collectives.push_back(
        MakeCollective(MeshDim::kDp, kind, phase, position, cadence, bytes, dp, overlap));
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
  AddDpSync(s, w, params - expert_params, DataParallelGroup(s.plan), part);
  AddDpSync(s, w, expert_params, ExpertDataParallelGroup(s.plan), part);
}

// Tied embeddings split over pipeline stages: the first and last stage each hold a copy
// and all-reduce its gradient once per step (Megatron's embedding group).
void TiedEmbeddingSync(const StepShape& s, const StepWork& w, int64_t params, PartWork* part) {
  if (!s.model.tied_embeddings || s.plan.pp <= 1) return;
  CommGroup ends;
  ends.inner = {s.plan.tp * s.plan.cp * (s.plan.pp - 1), 2};
  part->collectives.push_back(
      MakeCollective(MeshDim::kPp, CollectiveKind::kAllReduce, StepPhase::kBackward,
                     CollectivePosition::kAfterPart, Cadence::kPerStep,
                     static_cast<double>(params * w.grad_bytes), ends, false));
}

}  // namespace meshplan
