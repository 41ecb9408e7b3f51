#include "planner/cost/rank_shape.h"

#include <algorithm>
#include <cmath>

#include "planner/cost/fp8_convention.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/param_count.h"

namespace meshplan {

double KeptExpertRows(const MoeSpec& moe, int64_t tokens) {
  const double all = double(tokens) * double(moe.top_k);  // T*k
  if (moe.capacity_factor <= 0) return all;
  const double capacity = std::ceil(moe.capacity_factor * all / double(moe.experts));
  return std::min(all, capacity * double(moe.experts));
}

RankShape MakeRankShape(const ModelSpec& model, const TrainingSpec& training,
                        const ParallelPlan& plan) {
  const FrameworkSpec& framework = training.framework;
  const int64_t s_local = training.seq_len / plan.cp;
  const double T = static_cast<double>(plan.micro_batch * training.seq_len / plan.cp);
  const double act_bytes = ActivationBytesPerElement(training.precision);
  const bool fp8 = training.precision == Precision::kFp8;
  const bool moe = model.moe_layers() > 0;
  const ExpertParallelWork expert_work = ExpertParallelOf(model, plan, T, act_bytes);
  // R: the rows kept for the routed experts (no padding to the capacity: the executor's
  // MoeStash), times the busiest ep rank's load imbalance u (expert_parallel.h: 1 with a
  // capacity factor or ep == 1); Rs: the kept rows of this rank's own tokens.
  const double routed_rows = moe ? KeptExpertRows(model.moe, plan.micro_batch * s_local) : 0;
  // Every field named once, in order: a designated initializer writes each, where a default-
  // constructed value zero-filled first costs the search a `rep stos` per candidate.
  return RankShape{
      .b = plan.micro_batch,
      .s = training.seq_len,
      .s_local = s_local,
      .s_norm = plan.sequence_parallel ? s_local / plan.tp : s_local,
      .T = T,
      .Tn = plan.sequence_parallel ? T / static_cast<double>(plan.tp) : T,
      .hidden = model.hidden,
      .heads = model.heads / plan.tp,
      .kv_heads = model.kv_heads / plan.tp,
      .head_dim = model.head_dim(),
      .v_head_dim = model.v_head_dim(),
      .ffn = model.ffn_hidden / plan.tp,
      .experts = moe ? model.moe.experts : 0,
      .top_k = moe ? model.moe.top_k : 0,
      .expert_rows = routed_rows * expert_work.imbalance,
      .routed_rows = routed_rows,
      .ep = moe ? plan.ep : 1,
      .expert_ffn = moe ? model.moe.expert_ffn_hidden / plan.tp : 0,
      .shared_ffn = moe ? model.moe.shared_experts * model.moe.expert_ffn_hidden / plan.tp : 0,
      .expert_work = expert_work,
      .q_lora_rank = model.mla.q_lora_rank,
      .kv_lora_rank = model.mla.kv_lora_rank,
      .vocab = PaddedVocab(model, plan.tp) / plan.tp,
      .tp = plan.tp,
      .cp = plan.cp,
      .sequence_parallel = plan.sequence_parallel && plan.tp > 1,
      .act_bytes = act_bytes,
      .linear_input_bytes = fp8 ? kFp8Bytes : act_bytes,
      .fp8 = fp8,
      .kernels = framework.kernels,
      .fused_norm = framework.fused_norm,
      .tp_backward_async = framework.tp_backward_overlap == TpBackwardOverlap::kColumnGemms,
      .attention_kernel = framework.attention_kernel,
      .loss = framework.loss,
  };
}

}  // namespace meshplan
