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

double KeptExpertRows(const MoeSpec& moe, int64_t tokens) {
  const double all = double(tokens) * double(moe.top_k);  // T*k
  if (moe.capacity_factor <= 0) return all;
  const double capacity = std::ceil(moe.capacity_factor * all / double(moe.experts));
  return std::min(all, capacity * double(moe.experts));
}

ActivationShape MakeActivationShape(const ModelSpec& model, const TrainingSpec& training,
                                    const ParallelPlan& plan) {
  ActivationShape sh;
  sh.b = plan.micro_batch;
  sh.s = training.seq_len;
  sh.s_local = training.seq_len / plan.cp;
  sh.s_norm = plan.sequence_parallel ? sh.s_local / plan.tp : sh.s_local;
  sh.hidden = model.hidden;
  sh.heads = model.heads / plan.tp;
  sh.kv_heads = model.kv_heads / plan.tp;
  sh.head_dim = model.head_dim();
  sh.v_head_dim = model.v_head_dim();
  sh.ffn = model.ffn_hidden / plan.tp;
  if (model.moe_layers() > 0) {
    sh.experts = model.moe.experts;
    sh.top_k = model.moe.top_k;
    // R: the rows kept for the routed experts (no padding to the capacity: the executor's
    // MoeStash), times the busiest ep rank's load imbalance u (expert_parallel.h: 1 with a
    // capacity factor or ep == 1); Rs: the kept rows of this rank's own tokens.
    const ExpertParallelWork ep = ExpertParallelOf(model, plan, double(sh.b) * double(sh.s_local), 0);
    sh.routed_rows = KeptExpertRows(model.moe, sh.b * sh.s_local);
    sh.expert_rows = sh.routed_rows * ep.imbalance;
    sh.ep = plan.ep;
    sh.expert_ffn = model.moe.expert_ffn_hidden / plan.tp;
    sh.shared_ffn = model.moe.shared_experts * model.moe.expert_ffn_hidden / plan.tp;
  }
  sh.q_lora_rank = model.mla.q_lora_rank;
  sh.kv_lora_rank = model.mla.kv_lora_rank;
  sh.vocab = PaddedVocab(model, plan.tp) / plan.tp;
  sh.cp = plan.cp;
  sh.act_bytes = ActivationBytesPerElement(training.precision);
  sh.linear_input_bytes = training.precision == Precision::kFp8 ? kFp8Bytes : sh.act_bytes;
  return sh;
}

void SavedTensorList::Add(const SavedTensor& tensor) {
  if (size_ == kCapacity) std::abort();  // a new op outgrew kCapacity: raise it
  items_[size_++] = tensor;
}

double SavedTensorList::TotalBytes() const {
  double sum = 0;
  for (const SavedTensor& t : *this) sum += t.bytes();
  return sum;
}

double SavedTensorList::MegatronBytes() const {
  double sum = 0;
  for (const SavedTensor& t : *this)
    if (!t.row_statistic) sum += t.bytes();
  return sum;
}

namespace {

constexpr double kFp32Bytes = 4, kMaskBytes = 1, kIdBytes = 8;

// A norm saves its input and its per-row statistics (RMSNorm: rstd; LayerNorm: mean, rstd).
void AddNorm(SavedTensorList& out, const ModelSpec& model, const ActivationShape& sh,
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

// Context parallel llama blocks run the executor's ring attention (flash-style: no
// probabilities kept), whatever the single-rank attention would be.
bool IsRing(const ModelSpec& model, const ActivationShape& sh) {
  return sh.cp > 1 && model.block == BlockKind::kLlama;
}

SavedTensor Core(SavedTensor t) {
  t.core_attention = true;
  return t;
}

// A MoE FFN's saved tensors (activation_memory.h, "MoE FFN"); R = sh.expert_rows.
void AddMoeFfn(SavedTensorList& mlp, const ActivationShape& sh, double normed) {
  const double A = sh.act_bytes, rows = double(sh.b) * sh.s_local, R = sh.expert_rows;
  mlp.Add({"router/shared", "input: normed h (B,Sn,E)", normed, A});
  mlp.Add({"router", "probabilities (B,Sc,X) fp32", rows * sh.experts, kFp32Bytes});
  mlp.Add({"router", "top-k weights fp32 + ids int64 (B,Sc,k)", rows * sh.top_k, kFp32Bytes + kIdBytes});
  mlp.Add({"router", "row token and slot ids (R) int64 x 2", 2 * R, kIdBytes});
  mlp.Add({"dispatch", "permuted tokens (R,E)", R * sh.hidden, A});
  mlp.Add({"experts.swiglu", "gate output (R,Fe/tp)", R * sh.expert_ffn, A});
  mlp.Add({"experts.swiglu", "up output (R,Fe/tp)", R * sh.expert_ffn, A});
  mlp.Add({"experts.w_down", "input: silu(gate)*up (R,Fe/tp)", R * sh.expert_ffn, A});
  mlp.Add({"combine", "expert outputs (Rs,E)", sh.routed_rows * sh.hidden, A});
  if (sh.shared_ffn > 0) {
    mlp.Add({"shared.swiglu", "gate output (B,Sc,Xs*Fe/tp)", rows * sh.shared_ffn, A});
    mlp.Add({"shared.swiglu", "up output (B,Sc,Xs*Fe/tp)", rows * sh.shared_ffn, A});
    mlp.Add({"shared.w_down", "input: silu(gate)*up (B,Sc,Xs*Fe/tp)", rows * sh.shared_ffn, A});
  }
}

// Every tensor one block keeps with no recompute.
SavedTensorList AllBlockTensors(const ModelSpec& model, const ActivationShape& sh,
                                AttentionImpl impl) {
  const bool gpt = model.block == BlockKind::kGpt, ring = IsRing(model, sh);
  const bool naive = impl == AttentionImpl::kNaive && !ring;
  const double A = sh.act_bytes, L = sh.linear_input_bytes, b = double(sh.b);
  const double Sc = double(sh.s_local);
  const double Skv = Sc;
  const double normed = b * sh.s_norm * sh.hidden;   // (B,Sn,E)
  const double q = b * Sc * sh.heads * sh.head_dim;  // (B,Sc,Ht*D)
  const double kv = b * Skv * sh.kv_heads * sh.head_dim;
  const double v = b * Skv * sh.kv_heads * sh.v_head_dim;
  const double out_heads = b * Sc * sh.heads * sh.v_head_dim;  // (B,Sc,Ht*Dv)
  const double probs = b * sh.heads * Sc * Skv;  // (B,Ht,Sc,Skv)
  const double inner = b * Sc * sh.ffn;          // (B,Sc,Ft)

  SavedTensorList out;
  AddNorm(out, model, sh, "attention_norm", /*layer_input=*/true);
  out.Add({"wq/wk/wv", "input: normed x (B,Sn,E)", normed, L});
  if (model.mla.enabled()) {
    const double rows = b * Sc;
    if (sh.q_lora_rank > 0) {
      out.Add({"q_a_norm", "input (B,Sc,Rq)", rows * sh.q_lora_rank, A});
      out.Add({"wq_b", "input: normed q latent (B,Sc,Rq)", rows * sh.q_lora_rank, A});
      SavedTensor rstd{"q_a_norm", "rstd (B,Sc) fp32", rows, kFp32Bytes};
      rstd.row_statistic = true;
      out.Add(rstd);
    }
    out.Add({"kv_a_norm", "input (B,Sc,Rkv)", rows * sh.kv_lora_rank, A});
    out.Add({"wkv_b", "input: normed kv latent (B,Sc,Rkv)", rows * sh.kv_lora_rank, A});
    SavedTensor rstd{"kv_a_norm", "rstd (B,Sc) fp32", rows, kFp32Bytes};
    rstd.row_statistic = true;
    out.Add(rstd);
  }
  if (model.qk_norm) {
    out.Add({"q_norm", "input q (B,Sc,Ht*D)", q, A});
    out.Add({"k_norm", "input k (B,Skv,Kt*D)", kv, A});
    SavedTensor rstd{"q_norm/k_norm", "rstd (B,Sc,Ht+Kt) fp32", b * Sc * (sh.heads + sh.kv_heads),
                     kFp32Bytes};
    rstd.row_statistic = true;
    out.Add(rstd);
  }
  if (naive) {
    out.Add({"attention.qk", "q (B,Ht,Sc,D)", q, A});
    out.Add({"attention.qk", "k (B,Kt,Skv,D)", kv, A});
    out.Add(Core({"attention.softmax", "output P (B,Ht,Sc,Skv)", probs, A}));
    if (gpt) {
      out.Add(Core({"attention.dropout", "mask (B,Ht,Sc,Skv) 1 byte", probs, kMaskBytes}));
      out.Add(Core({"attention.dropout", "output (B,Ht,Sc,Skv)", probs, A}));
    }
    out.Add({"attention.pv", "v (B,Kt,Skv,Dv)", v, A});
  } else if (ring) {
    // executor/parallel/ring_attention.h: the logsumexp is kept in every mode but full recompute (the
    // backward recomputes each ring step's probabilities from it): nothing is recomputed
    // under selective.
    out.Add({"attention.ring", "q (B,Ht,Sc,D)", q, A});
    out.Add({"attention.ring", "k (B,Kt,Sc,D)", kv, A});
    out.Add({"attention.ring", "v (B,Kt,Sc,Dv)", v, A});
    SavedTensor lse{"attention.ring", "logsumexp (B,Ht,Sc) fp32", b * sh.heads * Sc, kFp32Bytes};
    lse.row_statistic = true;
    out.Add(lse);
  } else {
    out.Add({"attention.flash", "q (B,Sc,Ht,D)", q, A});
    out.Add({"attention.flash", "k (B,Sc,Kt,D)", kv, A});
    out.Add({"attention.flash", "v (B,Sc,Kt,Dv)", v, A});
    SavedTensor lse{"attention.flash", "logsumexp (B,Ht,Sc) fp32", b * sh.heads * Sc, kFp32Bytes};
    lse.core_attention = lse.row_statistic = true;
    out.Add(lse);
  }
  // Naive attention's backward reads P and v, not its output: the o projection alone saves
  // it (L). Flash and ring attention save the output too (A), and fp8 adds wo's FP8 copy.
  out.Add({"wo", "input: attention output (B,Sc,Ht*Dv)", out_heads, naive ? L : A});
  if (!naive && L != A)
    out.Add({"wo", "input: FP8 copy of the attention output (B,Sc,Ht*Dv)", out_heads, L});
  if (gpt) out.Add({"attention.residual_dropout", "mask (B,Sn,E) 1 byte", normed, kMaskBytes});
  SavedTensorList mlp;
  AddNorm(mlp, model, sh, "ffn_norm", /*layer_input=*/false);
  if (gpt) {
    mlp.Add({"fc1", "input: normed h (B,Sn,E)", normed, L});
    mlp.Add({"gelu", "input: fc1 output (B,Sc,Ft)", inner, A});
    mlp.Add({"fc2", "input: GeLU output (B,Sc,Ft)", inner, L});
    mlp.Add({"mlp.residual_dropout", "mask (B,Sn,E) 1 byte", normed, kMaskBytes});
  } else if (sh.experts > 0) {
    AddMoeFfn(mlp, sh, normed);
  } else {
    mlp.Add({"w_up/w_gate", "input: normed h (B,Sn,E)", normed, L});
    mlp.Add({"swiglu", "gate output (B,Sc,Ft)", inner, A});
    mlp.Add({"swiglu", "up output (B,Sc,Ft)", inner, A});
    mlp.Add({"w_down", "input: silu(gate)*up (B,Sc,Ft)", inner, L});
  }
  for (SavedTensor t : mlp) {
    t.mlp_half = true;
    out.Add(t);
  }
  return out;
}

bool Kept(const SavedTensor& t, Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return true;
    case Recompute::kSelective: return !t.core_attention;
    case Recompute::kFull: return t.layer_input;
  }
  return true;
}

}  // namespace

SavedTensorList BlockSavedTensors(const ModelSpec& model, const ActivationShape& shape,
                                  AttentionImpl impl, Recompute recompute) {
  SavedTensorList out;
  for (const SavedTensor& t : AllBlockTensors(model, shape, impl))
    if (Kept(t, recompute)) out.Add(t);
  return out;
}

SavedTensorList BlockRecomputedTensors(const ModelSpec& model, const ActivationShape& shape,
                                       AttentionImpl impl, Recompute recompute) {
  SavedTensorList out;
  for (const SavedTensor& t : AllBlockTensors(model, shape, impl))
    if (!Kept(t, recompute)) out.Add(t);
  return out;
}

BlockTensorBytes BlockTensorTotals(const ModelSpec& model, const ActivationShape& shape,
                                   AttentionImpl impl, Recompute recompute) {
  BlockTensorBytes out;
  for (const SavedTensor& t : AllBlockTensors(model, shape, impl)) {
    const bool kept = Kept(t, recompute);
    (kept ? out.saved : out.recomputed) += t.bytes();
    if (t.mlp_half) (kept ? out.saved_mlp : out.recomputed_mlp) += t.bytes();
  }
  return out;
}

SavedTensorList BlockBackwardStepWorkspace(const ModelSpec& model, const ActivationShape& sh,
                                           AttentionImpl impl, BlockHalf half) {
  const bool ring = IsRing(model, sh), naive = impl == AttentionImpl::kNaive && !ring;
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

SavedTensorList FirstStageSavedTensors(const ModelSpec& model, const ActivationShape& sh) {
  SavedTensorList out;
  out.Add({"embedding", "token ids (B,Sc) int64", double(sh.b) * sh.s_local, kIdBytes});
  if (model.block == BlockKind::kGpt)
    out.Add({"embedding.dropout", "mask (B,Sn,E) 1 byte", double(sh.b) * sh.s_norm * sh.hidden,
             kMaskBytes});
  return out;
}

SavedTensorList LastStageSavedTensors(const ModelSpec& model, const ActivationShape& sh) {
  SavedTensorList out;
  AddNorm(out, model, sh, "final_norm", /*layer_input=*/false);
  out.Add(
      {"lm_head", "input: normed h (B,Sn,E)", double(sh.b) * sh.s_norm * sh.hidden, sh.act_bytes});
  out.Add({"cross_entropy", "target ids (B,Sc) int64", double(sh.b) * sh.s_local, kIdBytes});
  return out;
}

SavedTensorList LossSavedTensors(const ActivationShape& sh) {
  SavedTensorList out;
  out.Add({"cross_entropy.softmax", "logits, softmaxed in place (B,Sc,Vt) fp32",
           double(sh.b) * sh.s_local * sh.vocab, kFp32Bytes});
  return out;
}

SavedTensorList HeadBackwardWorkspace(const ActivationShape& sh) {
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
