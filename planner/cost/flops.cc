#include "planner/cost/flops.h"

#include "planner/cost/block_linears.h"
#include "planner/cost/block_ops.h"
#include "planner/cost/param_count.h"
#include "planner/stage_layers.h"

namespace meshplan {

int64_t BlockMatmulParams(const ModelSpec& m) {
  int64_t n = 0;
  for (const BlockLinear& l : BlockLinearsOf(m, m.moe_layers() > 0)) n += l.active_params();
  return n;
}

int64_t AttentionMatmulParams(const ModelSpec& m) {
  int64_t n = 0;
  for (const BlockLinear& l : BlockLinearsOf(m, false))
    if (l.role == LinearRole::kAttention) n += l.params();
  return n;
}

int64_t DenseParams(const ModelSpec& m) {
  const int64_t final_norm = m.block == BlockKind::kLlama ? m.hidden : 2 * m.hidden;
  return BlocksActiveParams(m) + final_norm + m.vocab_size * m.hidden;
}

double AttentionCoreForwardFlopsPerToken(const ModelSpec& m, int64_t seq) {
  const double H = static_cast<double>(m.heads);
  const double dims = static_cast<double>(m.head_dim() + m.v_head_dim());  // QK^T: D, AV: Dv
  return 2.0 * H * dims * static_cast<double>(seq);
}

StepFlops StepFlopsOf(const ModelSpec& m, const TrainingSpec& training, Recompute recompute) {
  const double tokens = static_cast<double>(training.tokens_per_step());
  const double L = static_cast<double>(m.layers);
  const double attention_fwd = L * AttentionCoreForwardFlopsPerToken(m, training.seq_len);
  StepFlops out;
  out.model_no_attention = tokens * 6.0 * static_cast<double>(DenseParams(m));
  out.model = out.model_no_attention + tokens * 3.0 * attention_fwd;  // 12*L*E*S per token
  switch (recompute) {
    case Recompute::kNone:
      break;
    case Recompute::kSelective:
      out.recompute = tokens * attention_fwd;
      break;
    case Recompute::kFull:
      out.recompute = tokens * (2.0 * static_cast<double>(BlocksActiveParams(m)) + attention_fwd);
      break;
    case Recompute::kOp: {
      const int64_t moe = m.moe_layers();
      out.recompute = tokens * 2.0 *
                      static_cast<double>((m.layers - moe) * OpReplayedParams(m, false) +
                                          moe * OpReplayedParams(m, true));
      break;
    }
    case Recompute::kEvery: break;  // a plan's policy: the overload below
  }
  out.hardware = out.model + out.recompute;
  return out;
}

StepFlops StepFlopsOf(const ModelSpec& m, const TrainingSpec& training, const ParallelPlan& plan) {
  if (plan.recompute.kind != Recompute::kEvery) return StepFlopsOf(m, training, plan.recompute.kind);
  StepFlops out = StepFlopsOf(m, training, Recompute::kFull);
  const StageLayers split = SplitLayers(m.layers, plan);
  int64_t checkpointed = 0;
  for (int64_t stage = 0; stage < split.pp; ++stage)
    checkpointed += CheckpointedBlocks(plan.recompute, split.Of(stage));
  out.recompute *= m.layers > 0 ? static_cast<double>(checkpointed) / static_cast<double>(m.layers) : 0.0;
  out.hardware = out.model + out.recompute;
  return out;
}

int64_t OpReplayedParams(const ModelSpec& m, bool moe) {
  int64_t replayed = 0;
  int matmuls = 0;
  for (const BlockLinear& l : BlockLinearsOf(m, moe))
    if (!OpPolicySavesOutput(l, &matmuls)) replayed += l.active_params();
  return replayed;
}

double PerGpuRate(double per_step, int64_t gpus, double seconds) {
  if (gpus <= 0 || seconds <= 0) return 0;
  return per_step / (static_cast<double>(gpus) * seconds);
}

double Utilization(double flops, int64_t gpus, double peak_flops, double seconds) {
  if (gpus <= 0 || peak_flops <= 0 || seconds <= 0) return 0;
  return flops / (static_cast<double>(gpus) * peak_flops * seconds);
}

}  // namespace meshplan
