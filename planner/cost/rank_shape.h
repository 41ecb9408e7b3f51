// RankShape: what one rank of a plan sees of one micro-batch, derived from the plan once
// (MakeRankShape) and passed to every builder of the block's ops, work and memory.
// The letters are the legend of docs/architecture.md ("Shape legend"); every extent is this
// rank's (after tp, cp and ep). Pure value; building it allocates nothing.
#pragma once

#include <cstdint>

#include "planner/cost/expert_parallel.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

struct RankShape {
  int64_t b = 1;         // B, micro-batch
  int64_t s = 0;         // S, full sequence
  int64_t s_local = 0;   // Sc = S/cp
  int64_t s_norm = 0;    // Sn = Sc/tp with sequence parallel, else Sc
  double T = 0;          // T = B*S/cp tokens of a micro-batch on this rank
  double Tn = 0;         // Tn = T/tp with sequence parallel (norms, residuals), else T
  int64_t hidden = 0;    // E
  int64_t heads = 0;     // Ht = H/tp
  int64_t kv_heads = 0;  // Kt = K/tp
  int64_t head_dim = 0;  // D
  int64_t v_head_dim = 0;  // Dv (== D except under MLA)
  int64_t ffn = 0;       // Ft = F/tp
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
  ExpertParallelWork expert_work;  // the step's routed rows and all-to-all over T tokens
  int64_t q_lora_rank = 0;    // Rq (MLA)
  int64_t kv_lora_rank = 0;   // Rkv (MLA)
  int64_t vocab = 0;     // Vt = V padded to tp / tp
  int64_t tp = 1, cp = 1;
  bool sequence_parallel = false;  // tp > 1 shards the norms' and residuals' tokens (Sn, Tn)
  double act_bytes = 2;  // A (the step work's `a`)
  double linear_input_bytes = 2;  // L: a linear's saved input; A, but FP8 (1) in fp8 runs
  bool fp8 = false;      // the blocks' linear GEMMs in FP8 (planner/cost/fp8_convention.h)
  KernelSet kernels = KernelSet::kEager;  // the framework's kernels (planner/framework_spec.h)
  bool fused_norm = false;                // FrameworkSpec::fused_norm
  bool tp_backward_async = false;  // FrameworkSpec::tp_backward_overlap is column-gemms
  AttentionKernel attention_kernel = AttentionKernel::kFlash2;  // FrameworkSpec::attention_kernel
  LossKernel loss = LossKernel::kFp32InPlace;  // FrameworkSpec::loss
};
RankShape MakeRankShape(const ModelSpec& model, const TrainingSpec& training,
                        const ParallelPlan& plan);

// R for T tokens: the routed rows a MoE layer keeps, T*k dropless, else at most
// min(T*k, X * ceil(cf * T*k / X)) (every expert full; executor/model/moe_routing.h).
double KeptExpertRows(const MoeSpec& moe, int64_t tokens);

}  // namespace meshplan
