#include "planner/cost/block_ops.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <utility>

#include "planner/cost/block_ops_builder.h"

namespace meshplan {

Lowering LoweringOf(const RankShape& shape, AttentionImpl resolved_attention) {
  return {shape.kernels, resolved_attention, shape.fused_norm, shape.attention_kernel};
}

TensorFate FateUnder(const SavedTensor& t, Recompute recompute) {
  if (t.checkpoint_only && (recompute == Recompute::kNone || recompute == Recompute::kSelective))
    return TensorFate::kNotSaved;
  bool kept = true;
  switch (recompute) {
    case Recompute::kNone: break;
    case Recompute::kSelective: kept = !t.core_attention; break;
    case Recompute::kFull: kept = t.layer_input; break;
    case Recompute::kOp:
      if (t.op_output && !t.layer_input) return TensorFate::kInOpOutputs;
      kept = t.layer_input;
      break;
    case Recompute::kEvery: assert(false && "a plan's policy: BlockRecompute resolves it"); break;
  }
  return kept ? TensorFate::kKept : TensorFate::kRecomputed;
}

bool KeptUnder(const SavedTensor& t, Recompute recompute) {
  return FateUnder(t, recompute) == TensorFate::kKept;
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



// The tensor-parallel collectives where a tp-split linear reads its (T, E) input (a half's
// first linears, the lm_head). Sequence parallel: an all-gather of the normed input, whose
// backward reduce-scatters the input's gradient and re-gathers the saved sharded input for the
// weight gradients (Megatron, and the executor: executor/model/llama_model.h). Else Megatron's
// f: identity forward, all-reduce of the input's gradient.
void BlockOpsBuilder::TpInputCollectives(const TpInputNames& names, CollectivePosition before,
                                         CollectivePosition after) {
  if (sh_.tp <= 1) return;
  using K = CollectiveKind;
  const double bytes = sh_.T * E_ * a_;
  // The input gradient's reduce-scatter (all-reduce) behind the weight-gradient GEMM and the
  // re-gather behind the input-gradient GEMM, where the framework issues them asynchronously.
  const bool behind = sh_.tp_backward_async;
  if (sh_.sequence_parallel) {
    Collective(names.sp_gather, MeshDim::kTp, bytes, {K::kAllGather, 1, before},
               {K::kReduceScatter, 1, after}, /*saved_by_op=*/false, behind);
    Collective(names.sp_regather, MeshDim::kTp, bytes, {K::kAllGather, 0, before},
               {K::kAllGather, 1, before}, /*saved_by_op=*/false, behind);
  } else {
    Collective(names.tp_input, MeshDim::kTp, bytes, {K::kAllReduce, 0, before},
               {K::kAllReduce, 1, after}, /*saved_by_op=*/false, behind);
  }
}

// Those entering a half (after its norm: TpInputCollectives) or leaving it (after its last
// linear), over the (T, E) activation: with sequence parallel a reduce-scatter of the output
// (backward: an all-gather of its gradient), whose output the op policy saves; else
// Megatron's g (all-reduce forward, identity backward).
void BlockOpsBuilder::TpHalfCollectives(bool entering) {
  if (sh_.tp <= 1) return;
  using K = CollectiveKind;
  const CollectivePosition before = mlp_ ? P::kBeforeMlp : P::kBeforeAttention;
  const CollectivePosition after = mlp_ ? P::kAfterMlp : P::kAfterAttention;
  if (entering) {
    TpInputCollectives(mlp_ ? TpInputNames{"mlp.sp_gather", "mlp.sp_regather", "mlp.tp_input"}
                            : TpInputNames{"attention.sp_gather", "attention.sp_regather",
                                           "attention.tp_input"},
                       before, after);
    return;
  }
  const double bytes = sh_.T * E_ * a_;
  if (sh_.sequence_parallel) {
    Collective(mlp_ ? "mlp.sp_scatter" : "attention.sp_scatter", MeshDim::kTp, bytes,
               {K::kReduceScatter, 1, after}, {K::kAllGather, 1, before}, /*saved_by_op=*/true);
    OpOutput("reduce_scatter", "output (B,Sn,E)", double(sh_.b) * sh_.s_norm * sh_.hidden, a_);
  } else {
    Collective(mlp_ ? "mlp.tp_output" : "attention.tp_output", MeshDim::kTp, bytes,
               {K::kAllReduce, 1, after}, {K::kAllReduce, 0, before});
  }
}

// The lookup reads the rows and writes (T, E); its weight gradient scatter-adds the (T, E)
// output gradient into the rows. gpt adds the learned positions (read 2, write 1) and
// dropout (read, write, 1-byte mask); the position lookup itself is left out
// (docs/cost_model.md, Megatron-LM's kernels).
void BlockOpsBuilder::Embedding() {
  const double T = sh_.T;
  Memory("embedding", G::kNone, {2 * T * E_ * a_, 1}, {});
  (out_.ops_.end() - 1)->backward_weight = {3 * T * E_ * a_, 1};
  // Vocabulary-parallel: each tp rank looks up its rows, then the output is all-reduced
  // (sequence parallel: reduce-scattered, whose backward all-gathers the gradient).
  if (sh_.tp > 1) {
    using K = CollectiveKind;
    const bool sp = sh_.sequence_parallel;
    Collective("embedding.tp_output", MeshDim::kTp, T * E_ * a_,
               {sp ? K::kReduceScatter : K::kAllReduce, 1, P::kEmbeddingOutput},
               {K::kAllGather, static_cast<int8_t>(sp ? 1 : 0), P::kEmbeddingOutput});
  }
  if (m_.block != BlockKind::kGpt) return;
  Memory("embedding.positions", G::kNone, {3 * T * E_ * a_, 1}, {});
  Memory("embedding.dropout", G::kNone, {(2 * a_ + 1) * T * E_, 1}, {});
}

namespace {

// The cross-entropy over this rank's (T, V/tp) logits: bytes per logit and kernels.
struct LossWork {
  double fwd_bytes = 0, bwd_bytes = 0;
  int64_t fwd_kernels = 0, bwd_kernels = 0;
};

// The loss as FrameworkSpec::loss runs it (the memory side: LossSavedTensors,
// planner/cost/activation_memory.h), bytes per logit of this rank's (T, V/tp) logits in
// the activation dtype a. The per-token gathers, nll_loss's (T) values and the all-reduces of
// (T) values are left out.
//
// fp32-in-place: Megatron-LM's loss, which the executor runs too (executor/model/ops.cc
// CrossEntropyForward, executor/parallel/vocab_parallel_ops.cc with tp > 1):
// megatron/model/gpt_model.py post_language_model_processing with fp16_lm_cross_entropy off,
// its default, passes output.float(); mpu/cross_entropy.py _VocabParallelCrossEntropy works in
// place on that fp32 copy. Forward, the cast (read a, write 4; none when the logits are fp32),
// max (read 4), sub_ of the max (read 4, write 4), exp (read 4, write 4), sum (read 4), div_ by
// the sum, the softmax kept for backward (read 4, write 4); backward, mul_ by the loss gradient
// (read 4, write 4) and the cast's gradient back to the logits' type (read 4, write a).
//
// cross-entropy: PyTorch's F.cross_entropy (torch/nn/functional.py: log_softmax, then
// nll_loss) on logits of L bytes. log_softmax runs aten/src/ATen/native/cuda/SoftMax.cu's
// cunn_SoftMaxForward, one block per row, which reads the row three times (its max, its sum of
// exponentials, the output pass) and writes it once: 4L; its shared-memory variant needs the
// row within cudaDeviceProp::sharedMemPerBlock (48 KiB), which no LLM vocabulary row fits.
// Backward, nll_loss_backward's zero-filled gradient (write L) and its scatter, then
// cunn_SoftMaxBackward: the gradient read for its sum, then the gradient and the saved output
// read and the input gradient written (4L). cross-entropy-fp32 runs it on logits the model
// casts to fp32 (L = 4): the cast (read a, write 4) before it and the cast's gradient (read 4,
// write a) after it; cross-entropy-fp32-freed is the same work, the cast made by the loss.
//
// fp32-fused: Megatron-Core's fused vocab-parallel cross-entropy (--cross-entropy-loss-fusion;
// core_r0.8.0 megatron/core/fusions/fused_cross_entropy.py), the fp32-in-place steps in four
// jit_fuser functions (torch.compile from PyTorch 2.2, megatron/core/jit.py). Forward,
// calculate_logits_max casts and takes the max (read a, write 4; fp32 logits: read 4),
// calculate_predicted_logits subtracts it, exponentiates and sums (read 4, write 4),
// calculate_cross_entropy_loss divides (read 4, write 4): three kernels. Backward,
// calculate_gradients updates the saved softmax, scales it and casts it to bf16 in one
// (read 4, write 2: its `.to(torch.bfloat16)`): one kernel.
LossWork LossOf(double a, LossKernel kind) {
  if (kind == LossKernel::kFp32InPlace) {
    const bool cast = a != 4;
    const double cast_bytes = cast ? a + 4 : 0;
    return {cast_bytes + 4 + 8 + 8 + 4 + 8, 8 + cast_bytes, cast ? 6 : 5, cast ? 2 : 1};
  }
  if (kind == LossKernel::kFp32Fused) return {(a != 4 ? a + 4 : 4) + 8 + 8, 4 + 2, 3, 1};
  const bool fp32 = CrossEntropyInFp32(kind);
  const bool cast = fp32 && a != 4;
  const double L = fp32 ? 4 : a, cast_bytes = cast ? a + 4 : 0;
  const int64_t casts = cast ? 1 : 0;
  return {4 * L + cast_bytes, 5 * L + cast_bytes, 2 + casts, 3 + casts};
}

}  // namespace

// The final norm (the blocks' norm, as the lowering runs it), the lm_head (T, E) x (E, V/tp),
// which stays bf16 in fp8 runs, and the loss.
void BlockOpsBuilder::Head() {
  NormOp("final_norm");
  const double T = sh_.T, Vt = static_cast<double>(sh_.vocab);
  // The lm_head's input: with sequence parallel all-gathered (backward: the gradient
  // reduce-scattered, the saved input re-gathered), else its gradient all-reduced.
  TpInputCollectives({"lm_head.sp_gather", "lm_head.sp_regather", "lm_head.tp_input"},
                     P::kLmHeadInput, P::kLmHeadInput);
  Add("lm_head", OpKind::kLinear, G::kNone).gemm = {T, Vt, E_, 1, false, /*fp8=*/false};
  const LossWork loss = LossOf(a_, sh_.loss);
  Memory("cross_entropy", G::kCrossEntropy, {T * Vt * loss.fwd_bytes, loss.fwd_kernels},
         {T * Vt * loss.bwd_bytes, loss.bwd_kernels});
  // The vocabulary-parallel loss's all-reduces of a value per token (fp32): the max, the
  // sum of exponentials and the target logit.
  if (sh_.tp > 1)
    Collective("cross_entropy.tp_reductions", MeshDim::kTp, T * 4,
               {CollectiveKind::kAllReduce, 3, P::kInLoss}, {CollectiveKind::kAllReduce, 0, P::kInLoss});
}

bool OpPolicySavesOutput(const BlockLinear& linear, int* matmuls) {
  if (linear.role == LinearRole::kRouter || linear.role == LinearRole::kRoutedExpert) return false;
  return ++*matmuls % 2 == 1;
}

bool RunsRingAttention(const RankShape& shape, const Lowering& lowering) {
  return shape.cp > 1 && lowering.kernels == KernelSet::kEager;
}

NormLaunches RmsNormLaunches(const RankShape& shape) {
  const int64_t cast = shape.act_bytes != 4 ? 1 : 0;
  return {7 + cast, 10 + cast};
}

BlockOps BuildBlockOps(const ModelSpec& model, const RankShape& shape, const Lowering& lowering) {
  BlockOps out;
  BlockOpsBuilder(model, shape, lowering, &out).Build();
  return out;
}

BlockOps BuildEmbeddingOps(const ModelSpec& model, const RankShape& shape) {
  BlockOps out;
  BlockOpsBuilder(model, shape, LoweringOf(shape, AttentionImpl::kFused), &out).Embedding();
  return out;
}

BlockOps BuildHeadOps(const ModelSpec& model, const RankShape& shape, const Lowering& lowering) {
  BlockOps out;
  BlockOpsBuilder(model, shape, lowering, &out).Head();
  return out;
}

}  // namespace meshplan
