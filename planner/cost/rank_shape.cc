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
  RankShape sh;
  sh.b = plan.micro_batch;
  sh.s = training.seq_len;
  sh.s_local = training.seq_len / plan.cp;
  sh.s_norm = plan.sequence_parallel ? sh.s_local / plan.tp : sh.s_local;
  sh.tp = plan.tp;
  sh.sequence_parallel = plan.sequence_parallel && plan.tp > 1;
  sh.cp = plan.cp;
  sh.T = static_cast<double>(plan.micro_batch * training.seq_len / plan.cp);
  sh.Tn = plan.sequence_parallel ? sh.T / static_cast<double>(plan.tp) : sh.T;
  sh.hidden = model.hidden;
  sh.heads = model.heads / plan.tp;
  sh.kv_heads = model.kv_heads / plan.tp;
  sh.head_dim = model.head_dim();
  sh.v_head_dim = model.v_head_dim();
  sh.ffn = model.ffn_hidden / plan.tp;
  sh.act_bytes = ActivationBytesPerElement(training.precision);
  sh.fp8 = training.precision == Precision::kFp8;
  sh.kernels = training.framework.kernels;
  sh.fused_norm = training.framework.fused_norm;
  sh.tp_backward_async =
      training.framework.tp_backward_overlap == TpBackwardOverlap::kColumnGemms;
  sh.attention_kernel = training.framework.attention_kernel;
  sh.loss = training.framework.loss;
  sh.linear_input_bytes = sh.fp8 ? kFp8Bytes : sh.act_bytes;
  sh.expert_work = ExpertParallelOf(model, plan, sh.T, sh.act_bytes);
  if (model.moe_layers() > 0) {
    sh.experts = model.moe.experts;
    sh.top_k = model.moe.top_k;
    // R: the rows kept for the routed experts (no padding to the capacity: the executor's
    // MoeStash), times the busiest ep rank's load imbalance u (expert_parallel.h: 1 with a
    // capacity factor or ep == 1); Rs: the kept rows of this rank's own tokens.
    sh.routed_rows = KeptExpertRows(model.moe, sh.b * sh.s_local);
    sh.expert_rows = sh.routed_rows * sh.expert_work.imbalance;
    sh.ep = plan.ep;
    sh.expert_ffn = model.moe.expert_ffn_hidden / plan.tp;
    sh.shared_ffn = model.moe.shared_experts * model.moe.expert_ffn_hidden / plan.tp;
  }
  sh.q_lora_rank = model.mla.q_lora_rank;
  sh.kv_lora_rank = model.mla.kv_lora_rank;
  sh.vocab = PaddedVocab(model, plan.tp) / plan.tp;
  return sh;
}

}  // namespace meshplan
