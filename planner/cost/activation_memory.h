// Activation memory, op by op: the tensors each op of a block saves for its
// backward, with shape and dtype, on one rank for one micro-batch.
//
// This is the detailed memory model's activation term and the executor's
// contract: the executor's model is written against the same op list, and a
// test compares prediction with what it really allocates (docs/memory_model.md,
// docs/architecture.md "Seams"). When the executor changes what an op keeps, change its entry here.
//
// Shape legend (planner/model_spec.h) plus the local extents one rank sees:
//   Sc = S/cp   the tokens this rank holds (context parallel splits the sequence)
//   Sn = Sc/tp  with sequence parallel (norms, residual, dropout), else Sc
//   Skv = Sc    keys a query meets at once on this rank (context parallel: one ring step)
//   Ht = H/tp, Kt = K/tp, Ft = F/tp, Vt = V padded to tp / tp;  A = activation bytes
//   L = a linear's saved input: A, or 1 in fp8 runs (Transformer Engine saves the FP8 cast
//       of the input for the weight gradient instead: planner/cost/fp8_convention.h); a
//       tensor that a bf16 op also saves stays A, and fp8 adds the linear's FP8 copy (the
//       flash / ring attention output, which is the o projection's input)
//
// Executor contract, per op (each one entry below):
//   RMSNorm      custom autograd function: saves its input (A) and rstd (fp32, one per row).
//   LayerNorm    (gpt) saves its input (A) and mean and rstd (fp32, one per row each).
//   Linear       saves its input (the Q/K/V projections share one saved input; with
//                sequence parallel the Sn-sharded input is saved and all-gathered
//                again in backward, as Megatron does).
//   RoPE         saves nothing (multiplies by the cos/sin buffers).
//   attention    naive: q and k (for QK^T; GQA keeps K/V un-expanded, grouped by a
//                broadcast matmul, never repeat_interleave), the softmax output P
//                (B,Ht,Sc,Skv) (the pre-softmax scores are not kept: scaling and the
//                causal mask are applied without saving them), v (for P@V);
//                gpt adds the attention-dropout mask (1 byte) and its output (A).
//                fused (flash): q, k, v, the output (saved by the output projection)
//                and the logsumexp (B,Ht,Sc) fp32; dropout uses the RNG state.
//   SwiGLU       custom autograd function: saves the gate and up outputs and
//                recomputes silu(gate) in backward; the down projection saves the product.
//   q/k norm     (Qwen3) RMSNorm over each head: saves its input q or k and rstd (fp32,
//                one per head and row).
//   MLA          the latent norms save their inputs (B,Sc,Rq), (B,Sc,Rkv) and rstd; the
//                up-projections Wq_b, Wkv_b save the normed latents; K is H*D, V H*Dv.
//   MoE FFN      (executor/model/moe_block.h, MoeStash) the router saves its
//                probabilities (B,Sc,X) fp32, the top-k weights and ids (B,Sc,k) fp32 +
//                int64, and each kept row's token and slot ids (R) int64 x 2; the dispatch
//                saves the permuted tokens (R,E) for the experts' gate/up; each routed
//                expert's SwiGLU saves as above over its rows (R,Fe/tp) x 3; the combine
//                saves the experts' outputs, back on the tokens' rank, (Rs,E) for the
//                routing weights' gradient; shared experts save as a dense SwiGLU of width
//                Xs*Fe/tp. Rs = KeptExpertRows(B*Sc): B*Sc*k dropless; with a capacity
//                factor at most X times an expert's capacity (rows are not padded to it).
//                R = Rs * u, u the busiest ep rank's load imbalance (expert_parallel.h;
//                1 with ep == 1 or a capacity factor). With ep > 1 a backward step also
//                holds the all-to-all buffers: the rows received and sent, (R + Rs, E).
//   GeLU         (gpt) saves its input (the fc1 output); fc2 saves the GeLU output.
//   dropout      (gpt) saves a 1-byte mask per element.
//   residual     saves nothing.
//   ring attention (cp > 1, llama; executor/parallel/ring_attention.h): q, k, v (Sc) and the
//                logsumexp (B,Ht,Sc) fp32 in every mode but full (nothing of Sc x Sc is
//                kept: the backward recomputes each step's probabilities); its backward
//                workspace is the step-0 block (see BlockBackwardStepWorkspace).
// Recompute: selective drops the core-attention entries (P, dropout mask and output;
// the logsumexp for flash) and recomputes them from q, k, v in backward; full keeps
// only each layer's input.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "planner/attention_impl.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

// What one rank of the plan sees of one micro-batch.
struct ActivationShape {
  int64_t b = 1;         // B, micro-batch
  int64_t s = 0;         // S, full sequence
  int64_t s_local = 0;   // Sc
  int64_t s_norm = 0;    // Sn
  int64_t hidden = 0;    // E
  int64_t heads = 0;     // Ht
  int64_t kv_heads = 0;  // Kt
  int64_t head_dim = 0;  // D
  int64_t v_head_dim = 0;  // Dv (== D except under MLA)
  int64_t ffn = 0;       // Ft
  // Mixture of experts (0 for a dense model; the block is the MoE one when the model has
  // MoE layers: planner/cost/step_work.h):
  int64_t experts = 0;        // X
  int64_t top_k = 0;          // k
  double expert_rows = 0;     // R = Rs * u rows this rank's routed experts compute and
                              // keep (u: LoadImbalance, expert_parallel.h)
  double routed_rows = 0;     // Rs = KeptExpertRows(B*Sc): kept rows of this rank's tokens
  int64_t ep = 1;             // expert-parallel ranks
  int64_t expert_ffn = 0;     // Fe/tp
  int64_t shared_ffn = 0;     // Xs*Fe/tp
  int64_t q_lora_rank = 0;    // Rq (MLA)
  int64_t kv_lora_rank = 0;   // Rkv (MLA)
  int64_t vocab = 0;     // Vt
  int64_t cp = 1;
  double act_bytes = 2;  // A
  double linear_input_bytes = 2;  // L: a linear's saved input; A, but FP8 (1) in fp8 runs
};
ActivationShape MakeActivationShape(const ModelSpec& model, const TrainingSpec& training,
                                    const ParallelPlan& plan);
// R for T tokens: the routed rows a MoE layer keeps, T*k dropless, else at most
// min(T*k, X * ceil(cf * T*k / X)) (every expert full; executor/model/moe_routing.h).
double KeptExpertRows(const MoeSpec& moe, int64_t tokens);

// One tensor an op keeps alive (saved for backward, or a temporary of a backward step).
struct SavedTensor {
  const char* op = "";      // e.g. "attention.softmax"
  const char* tensor = "";  // what it is, with its shape, e.g. "output P (B,Ht,Sc,Skv)"
  double elements = 0;
  double bytes_per_element = 0;
  bool layer_input = false;     // the block's input: the one tensor kept under full recompute
  bool core_attention = false;  // recomputed under selective recompute
  bool row_statistic = false;   // a per-row norm/softmax statistic (Megatron's formula omits it)
  bool mlp_half = false;        // saved by the FFN half of the block (ffn_norm onward): freed
                                // once the backward reaches the attention half
  double bytes() const { return elements * bytes_per_element; }
};

// A short fixed-capacity list (no allocation: the search evaluates millions of plans).
class SavedTensorList {
 public:
  static constexpr size_t kCapacity = 32;
  void Add(const SavedTensor& tensor);  // beyond capacity is a programming error (aborts)
  const SavedTensor* begin() const { return items_.data(); }
  const SavedTensor* end() const { return items_.data() + size_; }
  size_t size() const { return size_; }
  double TotalBytes() const;
  // Without row statistics: what Megatron's closed form counts.
  double MegatronBytes() const;

 private:
  std::array<SavedTensor, kCapacity> items_{};
  size_t size_ = 0;
};

// One block (layer), one micro-batch: the tensors kept from forward to backward
// under the recompute policy. `impl` must be resolved (naive or fused).
SavedTensorList BlockSavedTensors(const ModelSpec& model, const ActivationShape& shape,
                                  AttentionImpl impl, Recompute recompute);
// What the backward of one block rematerialises under the policy (full: every
// tensor but the layer input; selective: the core-attention entries; none: nothing).
SavedTensorList BlockRecomputedTensors(const ModelSpec& model, const ActivationShape& shape,
                                       AttentionImpl impl, Recompute recompute);
// BlockSavedTensors' and BlockRecomputedTensors' bytes, in one pass over the block's
// tensors (the memory model's hot path): the totals (TotalBytes) and the FFN half's (the
// tensors with mlp_half), each summed in list order as the lists would sum them.
struct BlockTensorBytes {
  double saved = 0, saved_mlp = 0;
  double recomputed = 0, recomputed_mlp = 0;
};
BlockTensorBytes BlockTensorTotals(const ModelSpec& model, const ActivationShape& shape,
                                   AttentionImpl impl, Recompute recompute);
// The temporaries of one step of a block's backward: the gradient of the residual
// stream and of the branch output, plus the attention backward (naive: dv, and dP
// and dScores (B,Ht,Sc,Skv) each; fused: dq, dk, dv and the fp32 dq accumulator) or
// the FFN backward (llama: d(down input), d gate, d up (which first holds sigmoid(gate)); gpt:
// d(fc2 input), d(fc1 output)).
enum class BlockHalf { kAttention, kMlp };
SavedTensorList BlockBackwardStepWorkspace(const ModelSpec& model, const ActivationShape& shape,
                                           AttentionImpl impl, BlockHalf half);

// Pipeline stage 0, per micro-batch: token ids (int64) (+ gpt embedding dropout mask).
SavedTensorList FirstStageSavedTensors(const ModelSpec& model, const ActivationShape& shape);
// Last stage, per micro-batch, before the loss: final norm input and statistics,
// the lm_head input, target ids (int64).
SavedTensorList LastStageSavedTensors(const ModelSpec& model, const ActivationShape& shape);
// The loss, per micro-batch on the last stage. Executor contract (executor/model/ops.h): the
// lm_head writes the logits (B,Sc,Vt) into an fp32 buffer, cross-entropy softmaxes it in
// place and keeps it as the probabilities for backward; the backward turns it, in place,
// into the gradient of the logits (probs - onehot), so the loss backward allocates
// nothing more and the buffer is freed after the lm_head backward.
SavedTensorList LossSavedTensors(const ActivationShape& shape);
// The lm_head backward's new tensors: the gradient of its input (B,Sn,E) in A (the weight
// gradient is accumulated straight into the flat gradient buffer) and, when A is not fp32,
// the copy of d(logits) cast to A that the matmul reads (the fp32 buffer is freed once
// cast, before d(input) is allocated: planner/cost/memory_detailed.cc, head_backward).
SavedTensorList HeadBackwardWorkspace(const ActivationShape& shape);

}  // namespace meshplan
