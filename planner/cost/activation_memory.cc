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

}  // namespace

BlockOps BlockOpsOf(const ModelSpec& model, const RankShape& sh, AttentionImpl impl) {
  return BuildBlockOps(model, sh, LoweringOf(sh, impl));
}

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
  const BlockOps ops = BlockOpsOf(model, shape, impl);  // alive for the loop (not a temporary's member)
  for (const SavedTensor& t : ops.saved())
    if (FateUnder(t, recompute) == TensorFate::kRecomputed) out.Add(t);
  return out;
}

BlockTensorBytes BlockTensorTotals(const BlockOps& ops, Recompute recompute) {
  BlockTensorBytes out;
  auto add = [&out](const SavedTensor& t, bool kept) {
    (kept ? out.saved : out.recomputed) += t.bytes();
    if (t.mlp_half) (kept ? out.saved_mlp : out.recomputed_mlp) += t.bytes();
  };
  for (const SavedTensor& t : ops.saved()) {
    const TensorFate fate = FateUnder(t, recompute);
    if (fate == TensorFate::kKept || fate == TensorFate::kRecomputed)
      add(t, fate == TensorFate::kKept);
  }
  if (recompute == Recompute::kOp)
    for (const SavedTensor& t : ops.op_outputs()) add(t, true);
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

namespace {

// The logits of a micro-batch on this rank: (B,Sc,Vt) elements.
double LogitElements(const RankShape& sh) { return double(sh.b) * sh.s_local * sh.vocab; }

// The logits' element size under a PyTorch cross-entropy (FrameworkSpec::loss), 0 under the
// executor's in-place fp32 buffer.
double CrossEntropyLogitBytes(const RankShape& sh) {
  if (CrossEntropyInFp32(sh.loss)) return kFp32Bytes;
  return sh.loss == LossKernel::kCrossEntropy ? sh.act_bytes : 0;
}

}  // namespace

// PyTorch's F.cross_entropy: log_softmax saves its output; the caller's logits live on
// (nanoGPT-style loops hold `logits`; torchtitan's train.py at 157a12c56 holds `pred`, its
// model's `self.output(h).float()`, until the next step's forward assigns it again: its
// `del pred`, "to save 3.9G memory" on Llama 3 8B, came in e29b6b4d4, June 2024: from then
// its loss_fn casts the model's logits, `pred.flatten(0, 1).float()`, and train.py deletes
// `pred` before `loss.backward()`, cross-entropy-fp32-freed).
SavedTensorList LossSavedTensors(const RankShape& sh) {
  SavedTensorList out;
  const double logits = LogitElements(sh);
  if (const double e = CrossEntropyLogitBytes(sh); e > 0) {
    if (CallerHoldsLogits(sh.loss)) out.Add({"lm_head", "logits, held by the caller (B,Sc,Vt)", logits, e});
    out.Add({"cross_entropy.log_softmax", "output (B,Sc,Vt)", logits, e});
    return out;
  }
  out.Add({"cross_entropy.softmax", "logits, softmaxed in place (B,Sc,Vt) fp32", logits,
           kFp32Bytes});
  return out;
}

double LossHeldBytes(const RankShape& sh) {
  return CallerHoldsLogits(sh.loss) ? LogitElements(sh) * CrossEntropyLogitBytes(sh) : 0.0;
}

SavedTensorList HeadBackwardWorkspace(const RankShape& sh) {
  SavedTensorList out;
  if (const double e = CrossEntropyLogitBytes(sh); e > 0) {
    // nll_loss_backward's zeros-and-scatter gradient, then log_softmax_backward's output,
    // alive together; afterwards the saved output and the first are freed, and a cast to A
    // and d(normed h) fit in what they leave.
    out.Add({"cross_entropy backward", "d(log_softmax output) (B,Sc,Vt)", LogitElements(sh), e});
    out.Add({"cross_entropy backward", "d(logits) (B,Sc,Vt)", LogitElements(sh), e});
    return out;
  }
  out.Add({"lm_head backward", "d(normed h) (B,Sn,E)", double(sh.b) * sh.s_norm * sh.hidden,
           sh.act_bytes});
  if (sh.act_bytes != kFp32Bytes)
    out.Add({"lm_head backward", "d(logits) cast to A (B,Sc,Vt)", LogitElements(sh), sh.act_bytes});
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
