#include "planner/executor_support.h"

#include <string>
#include <vector>

#include "planner/names.h"
#include "planner/plan_fields.h"

namespace meshplan {

std::vector<std::string> ModelLimitations(const ModelSpec& m) {
  std::vector<std::string> reasons;
  const std::string predicted =
      " (meshplan estimate, search and simulate predict this model; the executor would train "
      "a different one)";
  if (m.moe.enabled() && m.moe.router_bias)
    reasons.push_back("model.moe.router_bias: the executor's router is softmax top-k without "
                      "a bias (DeepSeek-V3's noaux_tc is not built)" + predicted);
  if (m.mla.enabled())
    reasons.push_back("model.mla: the executor builds grouped-query attention only, not "
                      "multi-head latent attention" + predicted);
  if (m.qk_norm)
    reasons.push_back("model.qk_norm: the executor's attention has no q/k RMSNorm" + predicted);
  if (!m.gated_ffn())
    reasons.push_back(std::string("model.ffn_activation: ") + ToString(m.ffn_activation) +
                      ": the executor's FFN is SwiGLU" + predicted);
  return reasons;
}

std::vector<std::string> ExecutorLimitations(const PlanFile& pf) {
  std::vector<std::string> reasons = ModelLimitations(pf.model);
  const ParallelPlan& plan = pf.plan;
  if (pf.model.block != BlockKind::kLlama)
    reasons.push_back(std::string("model.block: the executor builds llama blocks only, not ") +
                      ToString(pf.model.block));
  if (plan.tp > 1 && pf.model.vocab_size % plan.tp != 0)
    reasons.push_back("tp=" + std::to_string(plan.tp) + ": the executor splits the vocabulary " +
                      "(embedding, lm_head) across tp ranks, so tp must divide model.vocab_size=" +
                      std::to_string(pf.model.vocab_size) + " (pad the vocabulary)");
  if (plan.pp > 1 && pf.model.tied_embeddings)
    reasons.push_back("pp=" + std::to_string(plan.pp) +
                      " with tied embeddings: the embedding (first stage) and the lm_head "
                      "(last stage) would share one weight across stages, which the executor "
                      "does not do; use an untied model (tied_embeddings: false) or pp=1");
  if (pf.model.moe.enabled() && plan.cp > 1)
    reasons.push_back("cp=" + std::to_string(plan.cp) + " with model.moe: routing capacity and "
                      "the aux loss are per micro-batch, which cp would split; allowed: cp=1");
  if (pf.training.precision == Precision::kFp8)
    reasons.push_back("training.precision: fp8: the executor does not train in FP8 (the planner "
                      "predicts it, docs/cost_model.md \"FP8\"); run the plan in bf16 or mixed");
  // The plan fields the executor does not build (planner/plan_fields.h marks them).
  for (const PlanFieldSpec& f : PlanFields())
    if (f.executor == ExecutorSupport::kRefusedUnlessDefault && !f.is_default(plan))
      reasons.push_back(std::string(f.key) + "=" + FormatFieldValue(f, f.get(plan)) + ": " +
                        f.executor_instead + ", so a measurement would not be of this plan; use " +
                        f.key + "=" + FormatFieldValue(f, f.default_value));
  if (plan.recompute.kind == Recompute::kOp)
    reasons.push_back("recompute=op: the executor keeps a block's tensors whole or replays the "
                      "whole block (none, selective, full, every:N), not torchtitan's op-level "
                      "policy, which the planner and simulator predict; use recompute=none, "
                      "selective, full or every:N");
  if (plan.pp > 1 && plan.schedule == PipelineSchedule::kZeroBubbleH1)
    reasons.push_back("schedule=zb_h1: the executor runs each weight-gradient pass inside its "
                      "backward (1F1B's timeline), so a measurement would not be of ZB-H1, which "
                      "the planner and simulator predict; use schedule 1f1b, gpipe or interleaved");
  return reasons;
}

}  // namespace meshplan
