#include "planner/cost/activation_memory.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "planner/cost/block_linears.h"
#include "planner/cost/expert_parallel.h"
#include "planner/cost/fp8_convention.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/param_count.h"

namespace meshplan {

namespace {

constexpr double kFp32Bytes = 4, kMaskBytes = 1, kIdBytes = 8;

// A norm saves its input and its per-row statistics (RMSNorm: rstd; LayerNorm: mean, rstd).
void AddNorm(SavedTensorList& out, const ModelSpec& model, const RankShape& sh,
             const char* op, bool layer_input) {
  const double rows = double(sh.b) * sh.s_norm;
  SavedTensor input{op, "input (B,Sn,E)", rows * sh.hidden, sh.act_bytes};
  input.layer_input = layer_input;
  out.Add(input);
  SavedTensor rstd{op, "rstd (B,Sn) fp32", rows, kFp32Bytes};
  rstd.row_statistic = true;
  if (model.block == BlockKind::kGpt) {
    SavedTensor mean{op, "mean (B,Sn) fp32", rows, kFp32Bytes};
    mean.row_statistic = true;
    out.Add(mean);
  }
  out.Add(rstd);
}

// One block's op list, as `impl` runs it.
BlockOps BlockOpsOf(const ModelSpec& model, const RankShape& sh, AttentionImpl impl) {
  return BuildBlockOps(model, sh, LoweringOf(sh, impl));
}

}  // namespace

SavedTensorList BlockSavedTensors(const ModelSpec& model, const RankShape& shape,
                                  AttentionImpl impl, Recompute recompute) {
  const BlockOps ops = BlockOpsOf(model, shape, impl);
  SavedTensorList out;
  for (const SavedTensor& t : ops.saved())
    if (KeptUnder(t, recompute)) out.Add(t);
  if (recompute == Recompute::kOp)
    for (const SavedTensor& t : ops.op_outputs()) out.Add(t);
  return out;
}

SavedTensorList BlockRecomputedTensors(const ModelSpec& model, const RankShape& shape,
                                       AttentionImpl impl, Recompute recompute) {
  SavedTensorList out;
  for (const SavedTensor& t : BlockOpsOf(model, shape, impl).saved())
    if (FateUnder(t, recompute) == TensorFate::kRecomputed) out.Add(t);
  return out;
}

BlockTensorBytes BlockTensorTotals(const ModelSpec& model, const RankShape& shape,
                                   AttentionImpl impl, Recompute recompute) {
  BlockTensorBytes out;
  const BlockOps ops = BlockOpsOf(model, shape, impl);
  auto add = [&out](const SavedTensor& t, bool kept) {
    (kept ? out.saved : out.recomputed) += t.bytes();
    if (t.mlp_half) (kept ? out.saved_mlp : out.recomputed_mlp) += t.bytes();
  };
  for (const SavedTensor& t : ops.saved()) {
    const TensorFate fate = FateUnder(t, recompute);
    if (fate != TensorFate::kInOpOutputs) add(t, fate == TensorFate::kKept);
  }
  if (recompute == Recompute::kOp)
    for (const SavedTensor& t : ops.op_outputs()) add(t, true);
  return out;
}

SavedTensorList BlockBackwardStepWorkspace(const ModelSpec& model, const RankShape& sh,
                                           AttentionImpl impl, BlockHalf half) {
  const bool ring = RunsRingAttention(sh, LoweringOf(sh, impl)), naive = impl == AttentionImpl::kNaive && !ring;
  const double A = sh.act_bytes, b = double(sh.b), Sc = double(sh.s_local);
  const double Skv = Sc;
  const double q = b * Sc * sh.heads * sh.head_dim;
  const double kv = b * Sc * sh.kv_heads * sh.head_dim;
  const double probs = b * sh.heads * Sc * Skv;
  const double inner = b * Sc * sh.ffn;

  SavedTensorList attention;
  if (ring) {
    // executor/parallel/ring_attention.h backward, at step 0 (the local Sc x Sc block, the largest):
    // the fp32 dq accumulator, the step's probabilities and score gradients (fp32), the
    // next K/V being received, this block's fp32 dK/dV accumulator and its partial dK/dV.
    attention.Add({"attention.ring backward", "dq accumulator (B,Ht,Sc,D) fp32", q, kFp32Bytes});
    attention.Add({"attention.ring backward", "P (B,Ht,Sc,Sc) fp32", probs, kFp32Bytes});
    attention.Add({"attention.ring backward", "dScores (B,Ht,Sc,Sc) fp32", probs, kFp32Bytes});
    attention.Add({"attention.ring backward", "next K, V (B,Kt,Sc,D) x 2", 2 * kv, A});
    attention.Add({"attention.ring backward", "dK, dV accumulator (B,Kt,Sc,D) x 2 fp32", 2 * kv,
                   kFp32Bytes});
    attention.Add({"attention.ring backward", "partial dK, dV (B,Kt,Sc,D) x 2", 2 * kv, A});
  } else if (naive) {
    // executor/model/ops.h AttentionBackward: dv, then dP and a temporary of the same shape.
    attention.Add({"attention.pv backward", "dv (B,Kt,Sc,D)", kv, A});
    attention.Add({"attention.pv backward", "dP (B,Ht,Sc,Skv)", probs, A});
    attention.Add({"attention.softmax backward", "dScores (B,Ht,Sc,Skv)", probs, A});
  } else {
    attention.Add({"attention.flash backward", "dq (B,Sc,Ht,D)", q, A});
    attention.Add({"attention.flash backward", "dk (B,Sc,Kt,D)", kv, A});
    attention.Add({"attention.flash backward", "dv (B,Sc,Kt,Dv)", b * Sc * sh.kv_heads * sh.v_head_dim, A});
    attention.Add({"attention.flash backward", "dq accumulator (B,Sc,Ht,D) fp32", q, kFp32Bytes});
  }
  SavedTensorList ffn;
  if (model.block == BlockKind::kGpt) {
    ffn.Add({"fc2 backward", "d(fc2 input) (B,Sc,Ft)", inner, A});
    ffn.Add({"gelu backward", "d(fc1 output) (B,Sc,Ft)", inner, A});
  } else if (sh.experts > 0) {
    // executor/model/moe_block.cc Backward: the routed experts' SwiGLU backward over their R
    // rows holds d gate and d up with either d(down input) (R,Fe/tp) (before) or the
    // gradient of the permuted tokens (R,E) (after): the larger of the two counts.
    const double R = sh.expert_rows;
    ffn.Add({"experts.swiglu backward", "d gate (R,Fe/tp)", R * sh.expert_ffn, A});
    ffn.Add({"experts.swiglu backward", "d up (R,Fe/tp)", R * sh.expert_ffn, A});
    ffn.Add({"experts backward", "max of d(down input) (R,Fe/tp), d(permuted tokens) (R,E)",
             R * double(std::max(sh.expert_ffn, sh.hidden)), A});
    if (sh.ep > 1)
      ffn.Add({"all-to-all", "routing buffers: rows received + sent (R+Rs,E)",
               (R + sh.routed_rows) * sh.hidden, A});
  } else {
    // executor/model/ops.h SwiGLUBackward: d up first holds sigmoid(gate) (no extra buffer).
    ffn.Add({"w_down backward", "d(down input) (B,Sc,Ft)", inner, A});
    ffn.Add({"swiglu backward", "d gate (B,Sc,Ft)", inner, A});
    ffn.Add({"swiglu backward", "d up (B,Sc,Ft)", inner, A});
  }
  SavedTensorList out = half == BlockHalf::kAttention ? attention : ffn;
  out.Add({"block backward", "grad of the residual stream (B,Sn,E)", b * sh.s_norm * sh.hidden, A});
  out.Add({"block backward", "grad of the branch output (B,Sc,E)", b * Sc * sh.hidden, A});
  return out;
}

SavedTensorList FirstStageSavedTensors(const ModelSpec& model, const RankShape& sh) {
  SavedTensorList out;
  out.Add({"embedding", "token ids (B,Sc) int64", double(sh.b) * sh.s_local, kIdBytes});
  if (model.block == BlockKind::kGpt)
    out.Add({"embedding.dropout", "mask (B,Sn,E) 1 byte", double(sh.b) * sh.s_norm * sh.hidden,
             kMaskBytes});
  return out;
}

SavedTensorList LastStageSavedTensors(const ModelSpec& model, const RankShape& sh) {
  SavedTensorList out;
  AddNorm(out, model, sh, "final_norm", /*layer_input=*/false);
  out.Add(
      {"lm_head", "input: normed h (B,Sn,E)", double(sh.b) * sh.s_norm * sh.hidden, sh.act_bytes});
  out.Add({"cross_entropy", "target ids (B,Sc) int64", double(sh.b) * sh.s_local, kIdBytes});
  return out;
}

SavedTensorList LossSavedTensors(const RankShape& sh) {
  SavedTensorList out;
  out.Add({"cross_entropy.softmax", "logits, softmaxed in place (B,Sc,Vt) fp32",
           double(sh.b) * sh.s_local * sh.vocab, kFp32Bytes});
  return out;
}

SavedTensorList HeadBackwardWorkspace(const RankShape& sh) {
  SavedTensorList out;
  out.Add({"lm_head backward", "d(normed h) (B,Sn,E)", double(sh.b) * sh.s_norm * sh.hidden,
           sh.act_bytes});
  if (sh.act_bytes != kFp32Bytes)
    out.Add({"lm_head backward", "d(logits) cast to A (B,Sc,Vt)",
             double(sh.b) * sh.s_local * sh.vocab, sh.act_bytes});
  return out;
}

double MegatronActivationBytesPerLayer(int64_t s, int64_t b, int64_t h, int64_t a, int64_t t,
                                       bool sequence_parallel, Recompute recompute) {
  const double sbh = double(s) * b * h, T = double(t);
  if (recompute == Recompute::kFull) return 2 * sbh / (sequence_parallel ? T : 1.0);
  // 5as/(ht): softmax output (2), its dropout mask (1) and output (2), per head, tp-sharded.
  const double core = recompute == Recompute::kSelective ? 0.0 : 5.0 * a * s / (double(h) * T);
  // Without sp the norms, their outputs and the residual dropout masks (10 sbh) stay replicated.
  return sequence_parallel ? sbh * (34.0 / T + core) : sbh * (10.0 + 24.0 / T + core);
}

}  // namespace meshplan
