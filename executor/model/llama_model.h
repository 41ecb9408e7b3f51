// LlamaModel: the model of docs/cost_model.md section 1 (llama block, GQA, tied or untied lm_head)
// as forward/backward functions over flat parameter groups (executor/model/param_layout.h).
// The model owns no parameters: whoever holds them (the ZeroEngine: full, sharded or
// gathered) passes a group's flat buffer in, and a flat gradient buffer to accumulate into.
//   x0 = EmbeddingForward(ids)                          (B,S,E)
//   x_{l+1} = BlockForward(x_l)                         l = 0..L-1
//   loss = HeadForward(x_L, targets)                    final RMSNorm -> lm_head -> CE
// and backward in reverse, block by block, each saved tensor freed after its last reader.
// With tensor (TpConfig) or context parallelism (UseContextParallel) the forwards and
// backwards communicate over those groups: every rank of a group makes the same calls.
// What is saved per recompute mode, the freeing order, the tp / sp / cp communication:
// docs/executor_internals.md#llama-model.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "executor/comm/communicator.h"
#include "executor/model/fused_attention.h"
#include "executor/model/moe_block.h"
#include "executor/model/param_layout.h"
#include "executor/parallel/tensor_parallel.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"

namespace meshplan {

// The weights (or gradients: same layout) of one block: views into its flat buffer. A MoE
// layer has `moe` (router and shared experts from the block group, routed experts from its
// experts group: ExpertViews) in place of w_up, w_gate, w_down.
struct BlockWeights {
  at::Tensor attn_norm, wq, wk, wv, wo, ffn_norm, w_up, w_gate, w_down;
  MoeWeights moe;
  bool is_moe() const { return moe.router.defined(); }
};
BlockWeights BlockViews(const ParamGroup& group, const at::Tensor& flat);
// Fills w.moe's routed experts from the layer's experts group (ParamGroup::experts_group).
void ExpertViews(const ParamGroup& experts_group, const at::Tensor& flat, BlockWeights& w);

// What one block keeps for its backward (docs/executor_internals.md#llama-model). Undefined
// tensors are not kept under the recompute mode.
struct BlockStash {
  at::Tensor x;              // block input (B,S,E): every mode
  at::Tensor rstd1, h1;      // (B,S) fp32, (B,S,E)
  at::Tensor q, k, v;        // (B,H,S,D), (B,K,S,D), (B,K,S,D)
  at::Tensor probs;          // (B,H,S,S): recompute none only
  at::Tensor lse;            // (B,H,Sc) fp32: context parallel (ring attention) only
  at::Tensor attn;           // (B,S,E) merged attention output (wo input)
  at::Tensor x2;             // (B,S,E) residual after attention
  at::Tensor rstd2, h2;      // (B,S) fp32, (B,S,E)
  at::Tensor gate, up, act;  // (B,S,F) each (dense FFN)
  MoeStash moe;              // MoE layers (executor/model/moe_block.h)
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
  // attention: the core without context parallelism, naive (executor/model/ops.h) or fused
  // (executor/model/fused_attention.h; the caller checks UseFusedAttention).
  LlamaModel(const ModelSpec& model, int64_t seq_len, TpConfig tp = {},
             at::TensorOptions activations = {},
             AttentionImpl attention = AttentionImpl::kNaive);

  const ModelSpec& spec() const { return model_; }

  const TensorParallel& tp() const { return tp_; }

  // ids (B,S) int64 -> x0 (B,S,E) (sp: this rank's (B,S/t,E)).

  // Context parallelism: this model computes cp rank cp.rank()'s local tokens (zigzag split,
  // executor/parallel/context_split.h) with ring attention over `cp` (which must outlive the model).
  // Call once, before the first forward; cp.size() == 1 changes nothing.
  void UseContextParallel(Communicator& cp);
  // MoE models: the aux loss coefficient (kDefaultMoeAuxLossCoef) and the
  // expert-parallel group (null or size 1: every expert local; it must outlive the model).
  // Call once, before the first forward. Without it: the default coefficient, no ep.
  void UseMoe(double aux_loss_coef, Communicator* ep);

  at::Tensor EmbeddingForward(const at::Tensor& ids, const at::Tensor& wte) const;
  // dwte (V,E) += scatter of dx0.
  void EmbeddingBackward(const at::Tensor& dx0, const at::Tensor& ids, at::Tensor& dwte) const;

  // x (B,S,E) -> block output (B,S,E); fills *stash according to `recompute`.
  at::Tensor BlockForward(const BlockWeights& w, const at::Tensor& x, Recompute recompute,
                          BlockStash* stash) const;
  // dy (B,S,E) -> dx (B,S,E); accumulates into dw. Consumes dy and the stash: pass them
  // with std::move so each is freed inside as soon as its last reader is done. dloss: the
  // micro-batch's share of the step loss (MoE layers scale their aux loss gradient by it).
  at::Tensor BlockBackward(const BlockWeights& w, BlockWeights& dw, at::Tensor dy,
                           BlockStash stash, double dloss = 1.0) const;

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
  // BlockBackward's halves: the dense FFN (dy -> dh2, the norm2 input gradient before the
  // norm) and the attention branch (dx2 -> dx).
  at::Tensor DenseFfnBackward(const BlockWeights& w, BlockWeights& dw, const at::Tensor& dy,
                              BlockStash& s) const;
  at::Tensor AttentionBranchBackward(const BlockWeights& w, BlockWeights& dw, at::Tensor dx2,
                                     BlockStash s) const;

  ModelSpec model_;
  TensorParallel tp_;
  int64_t local_heads_, local_kv_heads_;  // H/t, K/t
  int64_t vocab_start_;                   // this rank's first vocab row
  at::Tensor cos_, sin_;  // (S, D/2) in the activation dtype
  at::Tensor mask_;       // (S,S) bool, true above the diagonal (masked)
  Communicator* cp_ = nullptr;  // context parallel: ring attention over it (cp > 1)
  std::shared_ptr<const MoeFfn> moe_;  // MoE models
  bool fused_ = false;          // the fused attention core (else naive)
};

}  // namespace meshplan
