// Activation memory: the tensors a block's ops save for backward (its op list,
// planner/cost/block_ops.h, which also lists its backward temporaries) under a recompute
// policy, and the embedding's, head's and loss's tensors, on one rank for one micro-batch.
//
// The executor's contract: its model keeps exactly these tensors, and a test compares the
// prediction with what it allocates. The per-op list, the recompute policies and the
// workspaces are derived in docs/memory_model.md ("Activations, op by op"); shapes use the
// legend of docs/architecture.md. When the executor changes what an op keeps, change the
// op in block_ops*.cc and the table there.
#pragma once

#include <cstdint>

#include "planner/attention_impl.h"
#include "planner/cost/block_ops.h"
#include "planner/cost/rank_shape.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

// One block (layer), one micro-batch: the tensors kept from forward to backward
// under the block's recompute policy (kNone .. kOp: BlockRecompute resolves every:N; op:
// the kept saved tensors, then the op outputs). `impl` must be resolved (naive or fused).
SavedTensorList BlockSavedTensors(const ModelSpec& model, const RankShape& shape,
                                  AttentionImpl impl, Recompute recompute);
// What the backward of one block rematerialises under the policy (full: every
// tensor but the layer input; selective: the core-attention entries; op: every saved
// tensor but the layer input and those its op outputs hold; none: nothing).
SavedTensorList BlockRecomputedTensors(const ModelSpec& model, const RankShape& shape,
                                       AttentionImpl impl, Recompute recompute);
// The block as `impl` (resolved) runs it on a rank of `shape`.
BlockOps BlockOpsOf(const ModelSpec& model, const RankShape& shape, AttentionImpl impl);
// BlockSavedTensors' and BlockRecomputedTensors' bytes for the block `ops` (BlockOpsOf), in
// one pass over its tensors (the memory model's hot path): the totals (TotalBytes) and the
// FFN half's (the tensors with mlp_half), each summed in list order as the lists would sum them.
struct BlockTensorBytes {
  double saved = 0, saved_mlp = 0;
  double recomputed = 0, recomputed_mlp = 0;
};
BlockTensorBytes BlockTensorTotals(const BlockOps& ops, Recompute recompute);

// Pipeline stage 0, per micro-batch: token ids (int64) (+ gpt embedding dropout mask).
SavedTensorList FirstStageSavedTensors(const ModelSpec& model, const RankShape& shape);
// Last stage, per micro-batch, before the loss: final norm input and statistics,
// the lm_head input, target ids (int64).
SavedTensorList LastStageSavedTensors(const ModelSpec& model, const RankShape& shape);
// The loss, per micro-batch on the last stage. Executor contract (executor/model/ops.h): the
// lm_head writes the logits (B,Sc,Vt) into an fp32 buffer, cross-entropy softmaxes it in
// place and keeps it as the probabilities for backward; the backward turns it, in place,
// into the gradient of the logits (probs - onehot), so the loss backward allocates
// nothing more and the buffer is freed after the lm_head backward.
// A PyTorch cross-entropy (shape.loss kCrossEntropy, kCrossEntropyFp32: plain PyTorch,
// torchtitan until June 2024) keeps two copies of the logits' size instead: the logits the
// caller holds and log_softmax's output, which autograd saves; kCrossEntropyFp32Freed
// (torchtitan's `del pred`) log_softmax's fp32 output alone.
SavedTensorList LossSavedTensors(const RankShape& shape);
// Of those, the bytes alive outside the loss's own backward too (the caller's logits, which a
// training loop drops only when the next step's forward assigns them again); 0 otherwise.
double LossHeldBytes(const RankShape& shape);
// The lm_head backward's new tensors: the gradient of its input (B,Sn,E) in A (the weight
// gradient is accumulated straight into the flat gradient buffer) and, when A is not fp32,
// the copy of d(logits) cast to A that the matmul reads (the fp32 buffer is freed once
// cast, before d(input) is allocated: planner/cost/memory_detailed.cc, head_backward).
// A PyTorch cross-entropy: the loss backward's two gradients of the logits' size, alive at once
// beside the two copies (nll_loss's, then log_softmax's); what follows is smaller.
SavedTensorList HeadBackwardWorkspace(const RankShape& shape);

}  // namespace meshplan
