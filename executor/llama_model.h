// LlamaModel: the model of SPEC.md section 1 (llama block, GQA, tied or untied lm_head)
// as forward/backward functions over flat parameter groups (executor/param_layout.h).
// The model owns no parameters: whoever holds them (the ZeroEngine: full, sharded or
// gathered) passes a group's flat buffer in, and a flat gradient buffer to accumulate into.
//
//   x0 = EmbeddingForward(ids)                          (B,S,E)
//   x_{l+1} = BlockForward(x_l)                         l = 0..L-1
//   loss = HeadForward(x_L, targets)                    final RMSNorm -> lm_head -> CE
// and backward in reverse, block by block.
//
// What each micro-batch keeps between its forward and backward (activation dtype "act",
// fp32 on CPU; shapes per ops.h; N = B*S):
//   per block, recompute none:
//     rstd1 (B,S) fp32 | h1 = norm1(x) (B,S,E) | q (B,H,S,D) | k (B,K,S,D) | v (B,K,S,D)
//     | probs (B,H,S,S) | attn = merged attention output (B,S,E) | x2 = x + wo(attn) (B,S,E)
//     | rstd2 (B,S) fp32 | h2 = norm2(x2) (B,S,E) | gate (B,S,F) | up (B,S,F) | act (B,S,F)
//     and the block output x_{l+1} (B,S,E), kept by the next consumer (block l+1's x, or
//     the head's x). The block input x_l is the previous block's output (not a copy).
//   recompute selective: the same without probs (recomputed in backward from q, k).
//   fused attention core (executor/fused_attention.h): no probs; the kernel's graph keeps
//     q, k, v (the same storage), its output (attn is a view of it without sp) and the
//     logsumexp (B,H,S) fp32; selective drops the graph and rebuilds it in backward.
//   recompute full: only the block input x_l; the block's forward is re-run inside its
//     backward, so one block's full stash exists transiently during that block's backward.
//   embedding: its output x_0 (B,S,E) (block 0's input) and the ids (B,S) int64.
//   head: x_L (B,S,E), rstd (B,S) fp32, hf = final_norm(x_L) (B,S,E), probs (N,V) fp32
//     (the logits buffer, softmaxed in place by CrossEntropyForward; in bf16 the lm_head
//     writes bf16 logits, cast to this fp32 buffer and freed), targets (N) int64.
// Backward frees each saved tensor as soon as its last reader is done (so memory falls
// inside a block's backward, from the FFN down to the attention):
//   head: dlogits = the probs buffer (in place) [bf16: cast to a bf16 (N,V) copy, the fp32
//     buffer freed] -> dhf (B,S,E) allocated -> probs freed
//     -> final-norm backward (xhat + dx) -> hf freed.
//   block (dy moved in): dact (B,S,F); act freed | dgate, dup; gate, up freed | dh2; h2
//     freed | dx2 = norm2 backward + dy; x2 freed; dy freed | dattn; attn freed | dout
//     = split heads (B,H,S,D); dattn freed | [selective: probs recomputed] attention
//     backward (dv, dprobs, one (B,H,S,S) temporary; probs freed) | dq, dk, dv through
//     RoPE / merge into dh1; q, k, v freed | dx = norm1 backward + dx2; h1 freed.
//   full recompute: the block's forward runs first (its output is dropped at once), then
//     the same sequence.
// Model buffers (allocated once per model): RoPE cos and sin (S, D/2) each, in act, and the
// causal mask (S,S) bool.
//
// Tensor parallelism (TpConfig: the tp Communicator, t ranks, and the sp flag; weights are
// this rank's shards, executor/param_layout.h). Hl = H/t, Kl = K/t, Fl = F/t, Vl = V/t.
// Q/K/V, gate, up are column parallel, wo and w_down row parallel, the embedding and the
// lm_head vocabulary parallel (executor/vocab_parallel_ops.h). Communication per block
// (executor/tensor_parallel.h), each of (B,S,E) act (sp: all-gathers output / reduce-
// scatters input (t,B,S/t,E), each rank holding (B,S/t,E)):
//   no sp: forward  all-reduce after wo, all-reduce after w_down          (2 all-reduces)
//          backward all-reduce of dh2 (FFN input grad), of dh1 (QKV input grad)  (2)
//   sp:    forward  all-gather h1 before QKV, reduce-scatter after wo, all-gather h2
//                   before gate/up, reduce-scatter after w_down
//          backward all-gather dy (FFN output grad), all-gather h2 again (weight grads),
//                   reduce-scatter dh2, all-gather dx2 (attention output grad), all-gather
//                   h1 again, reduce-scatter dh1; plus an (E) all-reduce per norm weight
//                   gradient (attn_norm, ffn_norm)                (6 of (B,S,E) + 2 of (E))
//   full recompute runs the forward's communication again inside the backward.
// Per-block saved tensors with tp (recompute none): rstd1, rstd2 (B,S') fp32, x2, h1, h2
// (B,S',E) with S' = S/t under sp and S without; q (B,Hl,S,D), k, v (B,Kl,S,D), probs
// (B,Hl,S,S), attn (B,S,Hl*D) (sp: chunk-major (t,B,S/t,Hl*D)), gate, up, act (B,S,Fl)
// (sp: (t,B,S/t,Fl)). Under sp the gathered h1/h2 (t,B,S/t,E) exist only transiently
// (forward: until the projections are done; backward: during the weight gradients), as
// does the gathered output gradient. Block input/output: (B,S',E).
// Embedding: x0 partial (B,S,E) (sp: (t,B,S/t,E), then reduce-scattered to (B,S/t,E));
// backward under sp all-gathers dx0 into (t,B,S/t,E). Head: x_L, hf (B,S',E), rstd
// (B,S'), probs (N,Vl) fp32 with N = B*S (every rank computes the logits of all tokens
// of its vocab slice), targets (N) int64 (sp: a chunk-major copy); sp all-gathers hf
// before lm_head in forward and again in backward, reduce-scatters dhf (no sp:
// all-reduce of dhf); cross-entropy communication as in vocab_parallel_ops.h.
// Context parallel (UseContextParallel, cp > 1): every S above is the local Sc = S/cp
// (executor/context_split.h), the RoPE rows are those of the rank's global positions, and
// the attention core is ring attention (executor/ring_attention.h): no probs in any
// recompute mode (selective equals none for the attention core); instead lse (B,H,Sc) fp32
// is kept, and attn (the merged output) is kept until the attention backward (it is the
// ring backward's `out`).
#pragma once

#include <ATen/ATen.h>

#include "executor/communicator.h"
#include "executor/fused_attention.h"
#include "executor/param_layout.h"
#include "executor/tensor_parallel.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"

namespace meshplan {

// The weights (or gradients: same layout) of one block: views into its flat buffer.
struct BlockWeights {
  at::Tensor attn_norm, wq, wk, wv, wo, ffn_norm, w_up, w_gate, w_down;
};
BlockWeights BlockViews(const ParamGroup& group, const at::Tensor& flat);

// What one block keeps for its backward (see the header comment). Undefined tensors are
// not kept under the recompute mode.
struct BlockStash {
  at::Tensor x;              // block input (B,S,E): every mode
  at::Tensor rstd1, h1;      // (B,S) fp32, (B,S,E)
  at::Tensor q, k, v;        // (B,H,S,D), (B,K,S,D), (B,K,S,D)
  at::Tensor probs;          // (B,H,S,S): recompute none only
  at::Tensor lse;            // (B,H,Sc) fp32: context parallel (ring attention) only
  at::Tensor attn;           // (B,S,E) merged attention output (wo input)
  at::Tensor x2;             // (B,S,E) residual after attention
  at::Tensor rstd2, h2;      // (B,S) fp32, (B,S,E)
  at::Tensor gate, up, act;  // (B,S,F) each
  FusedAttentionGraph fused; // fused attention, recompute none: the kernel's saved tensors
};

// What the head keeps (final norm, lm_head, cross-entropy).
struct HeadStash {
  at::Tensor x;        // x_L (B,S,E)
  at::Tensor rstd;     // (B,S) fp32
  at::Tensor hf;       // final_norm(x_L) (B,S,E), the lm_head input
  at::Tensor probs;    // (N,V) fp32 softmax (the logits buffer)
  at::Tensor targets;  // (N) int64
};

class LlamaModel {
 public:
  // seq_len: the training sequence length S (sizes the RoPE tables and the mask).
  // tp: the tensor-parallel group (default: none); its comm must outlive the model.
  // activations: the activation dtype and device; the model buffers (RoPE tables in that
  // dtype, the mask) live there.
  // attention: the core without context parallelism, naive (executor/ops.h) or fused
  // (executor/fused_attention.h; the caller checks UseFusedAttention).
  LlamaModel(const ModelSpec& model, int64_t seq_len, TpConfig tp = {},
             at::TensorOptions activations = {},
             AttentionImpl attention = AttentionImpl::kNaive);

  const ModelSpec& spec() const { return model_; }

  const TensorParallel& tp() const { return tp_; }

  // ids (B,S) int64 -> x0 (B,S,E) (sp: this rank's (B,S/t,E)).

  // Context parallelism: this model computes cp rank cp.rank()'s local tokens (zigzag split,
  // executor/context_split.h) with ring attention over `cp` (which must outlive the model).
  // Call once, before the first forward; cp.size() == 1 changes nothing.
  void UseContextParallel(Communicator& cp);

  at::Tensor EmbeddingForward(const at::Tensor& ids, const at::Tensor& wte) const;
  // dwte (V,E) += scatter of dx0.
  void EmbeddingBackward(const at::Tensor& dx0, const at::Tensor& ids, at::Tensor& dwte) const;

  // x (B,S,E) -> block output (B,S,E); fills *stash according to `recompute`.
  at::Tensor BlockForward(const BlockWeights& w, const at::Tensor& x, Recompute recompute,
                          BlockStash* stash) const;
  // dy (B,S,E) -> dx (B,S,E); accumulates into dw. Consumes dy and the stash: pass them
  // with std::move so each is freed inside as soon as its last reader is done.
  at::Tensor BlockBackward(const BlockWeights& w, BlockWeights& dw, at::Tensor dy,
                           BlockStash stash) const;

  // x_L (B,S,E), targets (B,S) int64 -> mean cross-entropy over the B*S tokens (fp32
  // scalar). lm_head (V,E) is the head group's lm_head or, when tied, the embedding's wte.
  at::Tensor HeadForward(const at::Tensor& final_norm, const at::Tensor& lm_head,
                         const at::Tensor& x, const at::Tensor& targets, HeadStash* stash) const;
  // d(loss)/d(x_L) for a loss scaled by dloss; accumulates into dfinal_norm and dlm_head.
  at::Tensor HeadBackward(const at::Tensor& final_norm, const at::Tensor& lm_head,
                          at::Tensor& dfinal_norm, at::Tensor& dlm_head, double dloss,
                          HeadStash stash) const;

  // The model buffers (for the memory accounting): RoPE tables and mask bytes.
  int64_t buffer_bytes() const;

 private:
  ModelSpec model_;
  TensorParallel tp_;
  int64_t local_heads_, local_kv_heads_;  // H/t, K/t
  int64_t vocab_start_;                   // this rank's first vocab row
  at::Tensor cos_, sin_;  // (S, D/2) in the activation dtype
  at::Tensor mask_;       // (S,S) bool, true above the diagonal (masked)
  Communicator* cp_ = nullptr;  // context parallel: ring attention over it (cp > 1)
  bool fused_ = false;          // the fused attention core (else naive)
};

}  // namespace meshplan
