// The llama block, embedding and head over flat parameter groups (see llama_model.h).
#include "executor/model/llama_model.h"

#include <cmath>
#include <utility>

#include "executor/model/ops.h"
#include "executor/parallel/context_split.h"
#include "executor/parallel/ring_attention.h"
#include "executor/parallel/vocab_parallel_ops.h"

namespace meshplan {

namespace {

constexpr double kRopeTheta = 10000.0;

}  // namespace

BlockWeights BlockViews(const ParamGroup& g, const at::Tensor& flat) {
  BlockWeights w;
  w.attn_norm = SlotView(flat, g.slot("attn_norm"));
  w.wq = SlotView(flat, g.slot("wq"));
  w.wk = SlotView(flat, g.slot("wk"));
  w.wv = SlotView(flat, g.slot("wv"));
  w.wo = SlotView(flat, g.slot("wo"));
  w.ffn_norm = SlotView(flat, g.slot("ffn_norm"));
  if (g.experts_group < 0) {
    w.w_up = SlotView(flat, g.slot("w_up"));
    w.w_gate = SlotView(flat, g.slot("w_gate"));
    w.w_down = SlotView(flat, g.slot("w_down"));
    return w;
  }
  w.moe.router = SlotView(flat, g.slot("router"));
  for (const ParamSlot& slot : g.slots) {  // shared experts, when the model has them
    if (slot.name == "shared_up") w.moe.shared_up = SlotView(flat, slot);
    if (slot.name == "shared_gate") w.moe.shared_gate = SlotView(flat, slot);
    if (slot.name == "shared_down") w.moe.shared_down = SlotView(flat, slot);
  }
  return w;
}

void ExpertViews(const ParamGroup& g, const at::Tensor& flat, BlockWeights& w) {
  w.moe.expert_up = SlotView(flat, g.slot("expert_up"));
  w.moe.expert_gate = SlotView(flat, g.slot("expert_gate"));
  w.moe.expert_down = SlotView(flat, g.slot("expert_down"));
}

LlamaModel::LlamaModel(const ModelSpec& model, int64_t seq_len, TpConfig tp,
                       at::TensorOptions activations, AttentionImpl attention)
    : model_(model),
      tp_(tp),
      local_heads_(model.heads / tp_.size()),
      local_kv_heads_(model.kv_heads / tp_.size()),
      vocab_start_(tp_.rank() * (model.vocab_size / tp_.size())) {
  const int64_t S = seq_len, D = model.head_dim(), h = D / 2;
  // inv_freq_i = theta^(-2i/D), angle(t, i) = t * inv_freq_i.
  const at::Tensor i = at::arange(h, at::kDouble);
  const at::Tensor inv_freq = at::pow(kRopeTheta, i.mul(-2.0 / static_cast<double>(D)));
  const at::Tensor angles = at::outer(at::arange(S, at::kDouble), inv_freq);  // (S, D/2)
  // Computed in fp64, kept in the activation dtype: RoPE multiplies activations by them.
  const at::TensorOptions tables =  // dtype set explicitly (a default one is not "set")
      at::TensorOptions().dtype(activations.dtype()).device(activations.device());
  cos_ = angles.cos().to(tables);
  sin_ = angles.sin().to(tables);
  mask_ = at::ones({S, S}, activations.dtype(at::kBool)).triu_(1);
  if (model.moe.enabled()) UseMoe(kDefaultMoeAuxLossCoef, nullptr);
  fused_ = attention == AttentionImpl::kFused;
}

void LlamaModel::UseContextParallel(Communicator& cp) {
  if (cp.size() == 1) return;
  TORCH_CHECK(cp_ == nullptr, "LlamaModel::UseContextParallel: called twice");
  // The local tokens' global positions select the RoPE rows; the local causal mask is the
  // global one because local positions increase.
  const at::Tensor positions = LocalPositions(cos_.size(0), cp.size(), cp.rank()).to(cos_.device());
  cos_ = cos_.index_select(0, positions);
  sin_ = sin_.index_select(0, positions);
  const int64_t Sc = positions.size(0);
  mask_ = at::ones({Sc, Sc}, mask_.options()).triu_(1);
  cp_ = &cp;
}

void LlamaModel::UseMoe(double aux_loss_coef, Communicator* ep) {
  TORCH_CHECK(model_.moe.enabled(), "LlamaModel::UseMoe: a dense model");
  moe_ = std::make_shared<const MoeFfn>(model_.moe, aux_loss_coef,
                                        ExpertParallel(ep, model_.moe.experts), tp_);
}

int64_t LlamaModel::buffer_bytes() const {
  return cos_.nbytes() + sin_.nbytes() + mask_.nbytes();
}

// ---------------------------------------------------------------------------------------
// Embedding

at::Tensor LlamaModel::EmbeddingForward(const at::Tensor& ids, const at::Tensor& wte) const {
  if (tp_.size() == 1) return meshplan::EmbeddingForward(ids, wte);
  // Each rank's vocab rows, summed over tp (sp: reduce-scattered along the sequence).
  return tp_.LeaveRegion(
      VocabParallelEmbeddingForward(tp_.RegionTokenOrder(ids), wte, vocab_start_));
}

void LlamaModel::EmbeddingBackward(const at::Tensor& dx0, const at::Tensor& ids,
                                   at::Tensor& dwte) const {
  if (tp_.size() == 1) return meshplan::EmbeddingBackward(dx0, ids, dwte);
  VocabParallelEmbeddingBackward(tp_.LeaveRegionBackward(dx0), tp_.RegionTokenOrder(ids),
                                 vocab_start_, dwte);
}

// ---------------------------------------------------------------------------------------
// Block

at::Tensor LlamaModel::BlockForward(const BlockWeights& w, const at::Tensor& x,
                                    Recompute recompute, BlockStash* stash) const {
  BlockStash& s = *stash;
  s = BlockStash{};
  s.x = x;
  if (recompute == Recompute::kFull) {
    // Keep only the input; the full stash lives in this scope and dies with it.
    BlockStash scratch;
    return BlockForward(w, x, Recompute::kNone, &scratch);
  }
  // Attention: x -> norm1 -> q, k (RoPE), v -> causal attention -> wo -> + x.
  // Tensor parallel: local heads; sp: the projections read the all-gathered h1.
  const int64_t H = local_heads_, K = local_kv_heads_, c = tp_.chunks();
  s.h1 = RMSNormForward(x, w.attn_norm, &s.rstd1);
  {
    const at::Tensor h1 = tp_.EnterRegion(s.h1);  // sp: (t,B,S/t,E), freed at scope end
    s.q = RopeForward(LinearForward(h1, w.wq), H, cos_, sin_, c);  // projection output freed
    s.k = RopeForward(LinearForward(h1, w.wk), K, cos_, sin_, c);
    s.v = SplitHeads(LinearForward(h1, w.wv), K, c);
  }
  if (cp_ != nullptr) {  // context parallel: ring attention keeps lse, never probs
    s.attn = MergeHeads(RingAttentionForward(s.q, s.k, s.v, mask_, *cp_, &s.lse), c);
  } else if (fused_) {
    FusedAttentionGraph graph;
    const at::Tensor out = FusedAttentionForward(s.q, s.k, s.v, &graph);  // stored (B,S,H,D)
    s.attn = c == 1 ? out.transpose(1, 2).reshape({out.size(0), out.size(2), -1})  // a view
                    : MergeHeads(out, c);
    if (recompute == Recompute::kNone) s.fused = std::move(graph);
  } else {
    at::Tensor probs;
    s.attn = MergeHeads(AttentionForward(s.q, s.k, s.v, mask_, &probs), c);
    if (recompute == Recompute::kNone) s.probs = std::move(probs);
  }
  s.x2 = ResidualForward(x, tp_.LeaveRegion(LinearForward(s.attn, w.wo)));
  // FFN: x2 -> norm2 -> (gate, up) -> SwiGLU -> down -> + x2 (MoE: the MoE FFN, which
  // enters and leaves the tp region itself).
  s.h2 = RMSNormForward(s.x2, w.ffn_norm, &s.rstd2);
  if (w.is_moe()) return ResidualForward(s.x2, moe_->Forward(w.moe, s.h2, &s.moe));
  {
    const at::Tensor h2 = tp_.EnterRegion(s.h2);
    s.gate = LinearForward(h2, w.w_gate);
    s.up = LinearForward(h2, w.w_up);
  }
  s.act = SwiGLUForward(s.gate, s.up);
  return ResidualForward(s.x2, tp_.LeaveRegion(LinearForward(s.act, w.w_down)));
}

at::Tensor LlamaModel::BlockBackward(const BlockWeights& w, BlockWeights& dw, at::Tensor dy,
                                     BlockStash s, double dloss) const {
  if (!s.h1.defined()) {  // full recompute: re-run the forward to rebuild the stash
    at::Tensor x = std::move(s.x);
    BlockForward(w, x, Recompute::kNone, &s);
  }
  // FFN backward. dy reaches both the FFN branch and the residual (dx2 = dy + ...).
  at::Tensor dh2;
  if (w.is_moe()) {
    dh2 = moe_->Backward(w.moe, dw.moe, s.h2, dy, dloss, std::move(s.moe));
    s.h2.reset();
  } else {
    dh2 = DenseFfnBackward(w, dw, dy, s);
  }
  at::Tensor dx2 = tp_.RMSNormBackward(dh2, s.x2, s.rstd2, w.ffn_norm, dw.ffn_norm);
  dh2.reset();
  s.x2.reset();
  s.rstd2.reset();
  dx2.add_(dy);  // the residual path
  dy.reset();    // the caller moved its only reference in: freed now
  return AttentionBranchBackward(w, dw, std::move(dx2), std::move(s));
}

at::Tensor LlamaModel::DenseFfnBackward(const BlockWeights& w, BlockWeights& dw,
                                        const at::Tensor& dy, BlockStash& s) const {
  at::Tensor dact;
  {
    const at::Tensor dy_region = tp_.LeaveRegionBackward(dy);  // sp: all-gathered (t,B,S/t,E)
    dact = LinearBackward(dy_region, s.act, w.w_down, dw.w_down);
  }
  s.act.reset();
  SwiGLUGrads dffn = SwiGLUBackward(dact, s.gate, s.up);
  dact.reset();
  s.gate.reset();
  s.up.reset();
  at::Tensor dh2;
  {
    const at::Tensor h2 = tp_.EnterRegion(s.h2);  // sp: all-gathered again
    s.h2.reset();
    dh2 = LinearBackward(dffn.dgate, h2, w.w_gate, dw.w_gate);
    dffn.dgate.reset();
    LinearBackward(dffn.dup, h2, w.w_up, dw.w_up, dh2);  // dh2 += dup @ w_up
    dffn.dup.reset();
  }
  return tp_.EnterRegionBackward(std::move(dh2));  // sum over tp: all-reduce / reduce-scatter
}

at::Tensor LlamaModel::AttentionBranchBackward(const BlockWeights& w, BlockWeights& dw,
                                               at::Tensor dx2, BlockStash s) const {
  const int64_t c = tp_.chunks();
  // Attention backward. dx2 reaches both the attention branch and the residual.
  at::Tensor dout;
  {
    const at::Tensor dx2_region = tp_.LeaveRegionBackward(dx2);
    at::Tensor dattn = LinearBackward(dx2_region, s.attn, w.wo, dw.wo);  // (B,S,Hl*D)
    if (cp_ == nullptr) s.attn.reset();  // ring attention's backward reads it as `out`
    dout = SplitHeads(dattn, local_heads_, c);  // (B,Hl,S,D)
  }
  AttentionGrads da;
  if (cp_ != nullptr) {
    // `out` (B,Hl,Sc,D): a view of attn (a copy only under sp with B > 1).
    da = RingAttentionBackward(dout, s.q, s.k, s.v, HeadsOf(s.attn, local_heads_, c), s.lse,
                               mask_, *cp_);
    s.attn.reset();
    s.lse.reset();
  } else if (fused_) {
    if (!s.fused.out.defined()) FusedAttentionForward(s.q, s.k, s.v, &s.fused);  // selective
    da = FusedAttentionBackward(dout, std::move(s.fused));
  } else {
    if (!s.probs.defined()) s.probs = AttentionProbs(s.q, s.k, mask_);  // selective recompute
    da = AttentionBackward(dout, s.q, s.k, s.v, std::move(s.probs));
  }
  dout.reset();
  s.q.reset();
  s.k.reset();
  s.v.reset();
  at::Tensor dh1;
  {
    const at::Tensor h1 = tp_.EnterRegion(s.h1);  // sp: all-gathered again
    s.h1.reset();
    dh1 = LinearBackward(RopeBackward(da.dq, cos_, sin_, c), h1, w.wq, dw.wq);
    da.dq.reset();
    LinearBackward(RopeBackward(da.dk, cos_, sin_, c), h1, w.wk, dw.wk, dh1);
    da.dk.reset();
    LinearBackward(MergeHeads(da.dv, c), h1, w.wv, dw.wv, dh1);
    da.dv.reset();
  }
  dh1 = tp_.EnterRegionBackward(std::move(dh1));
  at::Tensor dx = tp_.RMSNormBackward(dh1, s.x, s.rstd1, w.attn_norm, dw.attn_norm);
  dh1.reset();
  dx.add_(dx2);
  return dx;
}

// ---------------------------------------------------------------------------------------
// Head

at::Tensor LlamaModel::HeadForward(const at::Tensor& final_norm, const at::Tensor& lm_head,
                                   const at::Tensor& x, const at::Tensor& targets,
                                   HeadStash* stash) const {
  HeadStash& s = *stash;
  const int64_t E = model_.hidden;
  s.x = x;
  s.targets = tp_.RegionTokenOrder(targets).reshape({-1});  // sp: chunk-major copy
  s.hf = RMSNormForward(x, final_norm, &s.rstd);
  {
    const at::Tensor hf = tp_.EnterRegion(s.hf);  // sp: all-gathered (t,B,S/t,E)
    s.probs = LinearForward(hf.view({-1, E}), lm_head);  // (N,V) logits (tp: (N,V/t))
  }
  if (s.probs.scalar_type() != at::kFloat) s.probs = s.probs.to(at::kFloat);
  if (tp_.size() == 1) return CrossEntropyForward(s.probs, s.targets);  // in place
  return VocabParallelCrossEntropyForward(s.probs, s.targets, vocab_start_, tp_.comm());
}

at::Tensor LlamaModel::HeadBackward(const at::Tensor& final_norm, const at::Tensor& lm_head,
                                    at::Tensor& dfinal_norm, at::Tensor& dlm_head, double dloss,
                                    HeadStash s) const {
  const int64_t E = model_.hidden;
  at::Tensor dlogits =  // (N,V) (tp: (N,V/t)), in place in the probs buffer
      tp_.size() == 1
          ? CrossEntropyBackward(std::move(s.probs), s.targets, dloss)
          : VocabParallelCrossEntropyBackward(std::move(s.probs), s.targets, vocab_start_, dloss);
  // bf16: the lm_head backward reads dlogits in the activation dtype; the fp32 buffer is
  // freed once cast (planner/cost/activation_memory.h HeadBackwardWorkspace).
  if (dlogits.scalar_type() != s.hf.scalar_type()) dlogits = dlogits.to(s.hf.scalar_type());
  at::Tensor dhf;
  {
    const at::Tensor hf = tp_.EnterRegion(s.hf);  // sp: all-gathered again
    s.hf.reset();
    dhf = LinearBackward(dlogits, hf.view({-1, E}), lm_head, dlm_head).view(hf.sizes());
    dlogits.reset();
  }
  dhf = tp_.EnterRegionBackward(std::move(dhf));  // sum over the vocab slices
  return tp_.RMSNormBackward(dhf, s.x, s.rstd, final_norm, dfinal_norm);
}

}  // namespace meshplan
