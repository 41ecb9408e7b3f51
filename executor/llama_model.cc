// The llama block, embedding and head over flat parameter groups (see llama_model.h).
#include "executor/llama_model.h"

#include <cmath>
#include <utility>

#include "executor/context_split.h"
#include "executor/ops.h"
#include "executor/ring_attention.h"

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
  w.w_up = SlotView(flat, g.slot("w_up"));
  w.w_gate = SlotView(flat, g.slot("w_gate"));
  w.w_down = SlotView(flat, g.slot("w_down"));
  return w;
}

LlamaModel::LlamaModel(const ModelSpec& model, int64_t seq_len) : model_(model) {
  const int64_t S = seq_len, D = model.head_dim(), h = D / 2;
  // inv_freq_i = theta^(-2i/D), angle(t, i) = t * inv_freq_i.
  const at::Tensor i = at::arange(h, at::kDouble);
  const at::Tensor inv_freq = at::pow(kRopeTheta, i.mul(-2.0 / static_cast<double>(D)));
  const at::Tensor angles = at::outer(at::arange(S, at::kDouble), inv_freq);  // (S, D/2)
  cos_ = angles.cos().to(at::kFloat);
  sin_ = angles.sin().to(at::kFloat);
  mask_ = at::ones({S, S}, at::kBool).triu_(1);
}

void LlamaModel::UseContextParallel(Communicator& cp) {
  if (cp.size() == 1) return;
  TORCH_CHECK(cp_ == nullptr, "LlamaModel::UseContextParallel: called twice");
  // The local tokens' global positions select the RoPE rows; the local causal mask is the
  // global one because local positions increase.
  const at::Tensor positions = LocalPositions(cos_.size(0), cp.size(), cp.rank());
  cos_ = cos_.index_select(0, positions);
  sin_ = sin_.index_select(0, positions);
  const int64_t Sc = positions.size(0);
  mask_ = at::ones({Sc, Sc}, at::kBool).triu_(1);
  cp_ = &cp;
}

int64_t LlamaModel::buffer_bytes() const {
  return cos_.nbytes() + sin_.nbytes() + mask_.nbytes();
}

// ---------------------------------------------------------------------------------------
// Embedding

at::Tensor LlamaModel::EmbeddingForward(const at::Tensor& ids, const at::Tensor& wte) const {
  return meshplan::EmbeddingForward(ids, wte);
}

void LlamaModel::EmbeddingBackward(const at::Tensor& dx0, const at::Tensor& ids,
                                   at::Tensor& dwte) const {
  meshplan::EmbeddingBackward(dx0, ids, dwte);
}

// ---------------------------------------------------------------------------------------
// Block

at::Tensor LlamaModel::BlockForward(const BlockWeights& w, const at::Tensor& x,
                                    Recompute recompute, BlockStash* stash) const {
  const int64_t H = model_.heads, K = model_.kv_heads;
  BlockStash& s = *stash;
  s = BlockStash{};
  s.x = x;
  if (recompute == Recompute::kFull) {
    // Keep only the input; the full stash lives in this scope and dies with it.
    BlockStash scratch;
    return BlockForward(w, x, Recompute::kNone, &scratch);
  }
  // Attention: x -> norm1 -> q, k (RoPE), v -> causal attention -> wo -> + x.
  s.h1 = RMSNormForward(x, w.attn_norm, &s.rstd1);
  s.q = RopeForward(LinearForward(s.h1, w.wq), H, cos_, sin_);  // projection output freed
  s.k = RopeForward(LinearForward(s.h1, w.wk), K, cos_, sin_);
  s.v = SplitHeads(LinearForward(s.h1, w.wv), K);
  if (cp_ != nullptr) {  // context parallel: ring attention keeps lse, never probs
    s.attn = MergeHeads(RingAttentionForward(s.q, s.k, s.v, mask_, *cp_, &s.lse));
  } else {
    at::Tensor probs;
    s.attn = MergeHeads(AttentionForward(s.q, s.k, s.v, mask_, &probs));
    if (recompute == Recompute::kNone) s.probs = std::move(probs);
  }
  s.x2 = ResidualForward(x, LinearForward(s.attn, w.wo));
  // FFN: x2 -> norm2 -> (gate, up) -> SwiGLU -> down -> + x2.
  s.h2 = RMSNormForward(s.x2, w.ffn_norm, &s.rstd2);
  s.gate = LinearForward(s.h2, w.w_gate);
  s.up = LinearForward(s.h2, w.w_up);
  s.act = SwiGLUForward(s.gate, s.up);
  return ResidualForward(s.x2, LinearForward(s.act, w.w_down));
}

at::Tensor LlamaModel::BlockBackward(const BlockWeights& w, BlockWeights& dw, at::Tensor dy,
                                     BlockStash s) const {
  if (!s.h1.defined()) {  // full recompute: re-run the forward to rebuild the stash
    at::Tensor x = std::move(s.x);
    BlockForward(w, x, Recompute::kNone, &s);
  }
  // FFN backward. dy reaches both the FFN branch and the residual (dx2 = dy + ...).
  at::Tensor dact = LinearBackward(dy, s.act, w.w_down, dw.w_down);
  s.act.reset();
  SwiGLUGrads dffn = SwiGLUBackward(dact, s.gate, s.up);
  dact.reset();
  s.gate.reset();
  s.up.reset();
  at::Tensor dh2 = LinearBackward(dffn.dgate, s.h2, w.w_gate, dw.w_gate);
  dffn.dgate.reset();
  LinearBackward(dffn.dup, s.h2, w.w_up, dw.w_up, dh2);  // dh2 += dup @ w_up
  dffn.dup.reset();
  s.h2.reset();
  at::Tensor dx2 = RMSNormBackward(dh2, s.x2, s.rstd2, w.ffn_norm, dw.ffn_norm);
  dh2.reset();
  s.x2.reset();
  s.rstd2.reset();
  dx2.add_(dy);  // the residual path
  dy.reset();    // the caller moved its only reference in: freed now
  // Attention backward. dx2 reaches both the attention branch and the residual.
  at::Tensor dattn = LinearBackward(dx2, s.attn, w.wo, dw.wo);  // (B,S,E)
  if (cp_ == nullptr) s.attn.reset();  // ring attention's backward reads it as `out`
  at::Tensor dout = SplitHeads(dattn, model_.heads);  // (B,H,S,D)
  dattn.reset();
  AttentionGrads da;
  if (cp_ != nullptr) {
    const int64_t B = s.attn.size(0), Sc = s.attn.size(1), H = model_.heads;
    const at::Tensor out = s.attn.view({B, Sc, H, -1}).transpose(1, 2);  // (B,H,Sc,D) view
    da = RingAttentionBackward(dout, s.q, s.k, s.v, out, s.lse, mask_, *cp_);
    s.attn.reset();
    s.lse.reset();
  } else {
    if (!s.probs.defined()) s.probs = AttentionProbs(s.q, s.k, mask_);  // selective recompute
    da = AttentionBackward(dout, s.q, s.k, s.v, std::move(s.probs));
  }
  dout.reset();
  s.q.reset();
  s.k.reset();
  s.v.reset();
  at::Tensor dh1 = LinearBackward(RopeBackward(da.dq, cos_, sin_), s.h1, w.wq, dw.wq);
  da.dq.reset();
  LinearBackward(RopeBackward(da.dk, cos_, sin_), s.h1, w.wk, dw.wk, dh1);
  da.dk.reset();
  LinearBackward(MergeHeads(da.dv), s.h1, w.wv, dw.wv, dh1);
  da.dv.reset();
  s.h1.reset();
  at::Tensor dx = RMSNormBackward(dh1, s.x, s.rstd1, w.attn_norm, dw.attn_norm);
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
  s.x = x;
  s.targets = targets.reshape({-1});
  s.hf = RMSNormForward(x, final_norm, &s.rstd);
  const int64_t E = model_.hidden;
  s.probs = LinearForward(s.hf.view({-1, E}), lm_head);  // (N,V) logits
  if (s.probs.scalar_type() != at::kFloat) s.probs = s.probs.to(at::kFloat);
  return CrossEntropyForward(s.probs, s.targets);  // logits -> probs in place
}

at::Tensor LlamaModel::HeadBackward(const at::Tensor& final_norm, const at::Tensor& lm_head,
                                    at::Tensor& dfinal_norm, at::Tensor& dlm_head, double dloss,
                                    HeadStash s) const {
  const int64_t E = model_.hidden;
  const std::vector<int64_t> shape = s.x.sizes().vec();
  at::Tensor dlogits = CrossEntropyBackward(std::move(s.probs), s.targets, dloss);  // (N,V)
  at::Tensor dhf = LinearBackward(dlogits, s.hf.view({-1, E}), lm_head, dlm_head).view(shape);
  dlogits.reset();
  s.hf.reset();
  return RMSNormBackward(dhf, s.x, s.rstd, final_norm, dfinal_norm);
}

}  // namespace meshplan
