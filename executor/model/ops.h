// The executor's ops: mirrored XxxForward / XxxBackward pairs on ATen tensors, llm.c style.
// No torch::nn, no autograd: each Forward returns its output and fills a small struct
// (or the caller keeps the inputs) with exactly what its Backward needs; each Backward
// returns the input gradient and ACCUMULATES (+=) weight gradients into caller-owned
// buffers (views of a flat gradient buffer), so gradient accumulation costs nothing.
// Shapes (planner/model_spec.h): B micro-batch, S sequence, E hidden, H heads, K kv_heads,
// G = H / K, D head dim, F ffn_hidden, V vocab, N = B * S. Outputs and temporaries are in the
// activation dtype "act" (executor/model/precision_dtypes.h); rstd is always fp32.
// Memory contract per op (what planner/cost/memory_detailed.cc counts): "saves" = what its
// Backward reads (saved inputs are the caller's storage, NOT copies); "allocates" = what a
// call creates, temporaries freed before it returns ("peak inside": most alive at once).
// Legend and contract in full: docs/executor_internals.md#ops.
#pragma once

#include <ATen/ATen.h>

namespace meshplan {

// ---------------------------------------------------------------------------------------
// Embedding: x = wte[ids].
//   ids (B,S) int64, wte (V,E) act -> x (B,S,E) act.
//   saves: ids (the caller's batch tensor).   allocates: x.
at::Tensor EmbeddingForward(const at::Tensor& ids, const at::Tensor& wte);
// dwte (V,E) += scatter of dx (B,S,E) into the rows ids. Allocates nothing.
void EmbeddingBackward(const at::Tensor& dx, const at::Tensor& ids, at::Tensor& dwte);

// ---------------------------------------------------------------------------------------
// RMSNorm: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2 over E) + eps), eps = 1e-5.
//   x (B,S,E) act, w (E) -> y (B,S,E) act, *rstd (B,S) fp32.
//   saves: x (input, not copied) and rstd (B,S) fp32.   allocates: y, rstd.
inline constexpr double kRmsNormEps = 1e-5;
at::Tensor RMSNormForward(const at::Tensor& x, const at::Tensor& w, at::Tensor* rstd);
// dy (B,S,E) -> dx (B,S,E); dw (E) += sum over B,S of dy * x * rstd.
// allocates: xhat = x * rstd (B,S,E) temporary (freed) and dx (peak inside: 2 x (B,S,E)).
at::Tensor RMSNormBackward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& rstd,
                           const at::Tensor& w, at::Tensor& dw);

// ---------------------------------------------------------------------------------------
// Linear without bias: y = x @ w^T.
//   x (...,in), w (out,in) -> y (...,out).
//   saves: x (input, not copied).   allocates: y (x must be contiguous: no hidden copy).
at::Tensor LinearForward(const at::Tensor& x, const at::Tensor& w);
// dw (out,in) += dy^T @ x (in place, no temporary). If dx is defined, dx += dy @ w in
// place (several linears reading one input, e.g. Q/K/V, sum into one dx) and it is
// returned; otherwise a new dx (...,in) is allocated and returned.
at::Tensor LinearBackward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w,
                          at::Tensor& dw, at::Tensor dx = {});

// ---------------------------------------------------------------------------------------
// Rotary position embedding (half-split pairs: element i rotates with i + D/2), fused with
// the split into heads.
//   x (B,S,n*D) (a Q or K projection output, n = H or K), cos/sin (S, D/2) in act
//   -> y (B,n,S,D) act, contiguous, head-major.
//   saves: nothing (cos/sin are model buffers).   allocates: y only.
// Token order ("chunks", sequence parallelism): with chunks = c > 1 the token-major tensors
// (x here, dx of RopeBackward, the input of SplitHeads, the output of MergeHeads) are in
// chunk-major order (c, B, S/c, n*D): chunk j holds tokens [j*S/c, (j+1)*S/c) (what an
// all-gather of sequence shards produces). The head-major side is (B,n,S,D) in natural
// token order either way; no permute copy is made beyond the op's own output.
at::Tensor RopeForward(const at::Tensor& x, int64_t n_heads, const at::Tensor& cos,
                       const at::Tensor& sin, int64_t chunks = 1);
// dy (B,n,S,D) -> dx (B,S,n*D) (chunks > 1: (c,B,S/c,n*D)). allocates: dx only.
at::Tensor RopeBackward(const at::Tensor& dy, const at::Tensor& cos, const at::Tensor& sin,
                        int64_t chunks = 1);

// Split / merge heads without rotation (V, and the attention output).
//   SplitHeads: x (B,S,n*D) -> (B,n,S,D) contiguous copy.   MergeHeads: inverse copy.
//   chunks > 1: the token-major side is (c,B,S/c,n*D) as for RoPE.
at::Tensor SplitHeads(const at::Tensor& x, int64_t n_heads, int64_t chunks = 1);
at::Tensor MergeHeads(const at::Tensor& x, int64_t chunks = 1);
// The (B,n,S,D) head-major reading of a token-major tensor WITHOUT a copy where the layout
// allows it (chunks == 1, or B == 1); otherwise a contiguous copy (allocates (B,n,S,D)).
at::Tensor HeadsOf(const at::Tensor& x, int64_t n_heads, int64_t chunks = 1);

// ---------------------------------------------------------------------------------------
// Causal self-attention core, naive (materialised scores), grouped-query without copies:
// q (B,H,S,D) is viewed as (B,K,G*S,D), so each kv head serves its G query heads in one
// batched matmul and K/V are never repeated.
//   q (B,H,S,D), k (B,K,S,D), v (B,K,S,D), causal_mask (S,S) bool (true = masked)
//   -> out (B,H,S,D); *probs (B,H,S,S) act = softmax(q k^T / sqrt(D) + mask).
//   saves: q, k, v (inputs, not copied) and probs (B,H,S,S) (unless the caller drops it:
//          selective recompute recomputes it in backward with AttentionProbs).
//   allocates: probs (softmax runs in place in the scores buffer), out.
//   peak inside: probs + out.
at::Tensor AttentionForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& causal_mask, at::Tensor* probs);
// The probs alone (selective recompute). allocates: probs (B,H,S,S).
at::Tensor AttentionProbs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& causal_mask);
struct AttentionGrads {
  at::Tensor dq;  // (B,H,S,D)
  at::Tensor dk;  // (B,K,S,D)
  at::Tensor dv;  // (B,K,S,D)
};
// dout (B,H,S,D) -> dq, dk, dv. `probs` is consumed: the caller passes its only reference
// (std::move) and it is freed inside as soon as it is no longer needed.
// allocates, in order: dv; dprobs (B,H,S,S); a (B,H,S,S) temporary (freed); probs freed
// (dscores reuses the dprobs buffer); dq; dk.
// peak inside: probs + dprobs + temporary (3 x (B,H,S,S)) + dv.
AttentionGrads AttentionBackward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, at::Tensor probs);

// ---------------------------------------------------------------------------------------
// SwiGLU activation: act = silu(gate) * up.
//   gate (B,S,F), up (B,S,F) (the two projection outputs) -> act (B,S,F).
//   saves: gate and up (inputs, not copied).   allocates: act.
at::Tensor SwiGLUForward(const at::Tensor& gate, const at::Tensor& up);
struct SwiGLUGrads {
  at::Tensor dgate;  // (B,S,F)
  at::Tensor dup;    // (B,S,F)
};
// dact (B,S,F) -> dgate, dup. allocates: dup (first holds sigmoid(gate)) and dgate
// (peak inside: 2 x (B,S,F), the outputs).
SwiGLUGrads SwiGLUBackward(const at::Tensor& dact, const at::Tensor& gate, const at::Tensor& up);

// ---------------------------------------------------------------------------------------
// Residual add: y = x + r. saves nothing. allocates: y. Backward: both inputs receive dy
// unchanged (no op, no allocation), so there is no ResidualBackward function.
at::Tensor ResidualForward(const at::Tensor& x, const at::Tensor& r);

// ---------------------------------------------------------------------------------------
// Cross-entropy over the vocabulary, mean over the N tokens, in fp32.
//   logits (N,V) fp32 (the lm_head output; CONSUMED: overwritten in place with the softmax),
//   targets (N) int64 -> loss (scalar fp32 tensor).
//   saves: probs (N,V) fp32 = the logits buffer itself, and targets (not copied).
//   allocates: nothing of size (N,V) (max, sum and the target logits are (N)).
// A bf16 model up-casts its logits to fp32 before this call (one (N,V) fp32 buffer; the
// bf16 logits are freed at once) and its backward casts dlogits back to bf16 for the
// lm_head backward (LlamaModel::HeadBackward).
at::Tensor CrossEntropyForward(at::Tensor& logits, const at::Tensor& targets);
// dlogits = (probs - onehot(targets)) * dloss / N, IN PLACE in the probs buffer, which is
// returned (no allocation of size (N,V)).
at::Tensor CrossEntropyBackward(at::Tensor probs, const at::Tensor& targets, double dloss);

}  // namespace meshplan
