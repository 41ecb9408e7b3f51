// FLOPs of a training step (docs/cost_model.md section 4) and the utilisation figures
// built on them.
//
// Conventions (the ones MFU is quoted in, Megatron / PaLM style):
//  * A matmul with a W-element weight costs 2*W FLOPs per token forward, 4*W backward
//    (input and weight gradients), so training costs 6*W per token.
//  * P_dense (DenseParams) is the parameters that multiply every token: the L blocks
//    (their norm weights and biases included: a negligible over-count of 6 FLOPs each;
//    in a MoE layer the router, the shared experts and k of the X routed experts: the
//    active ones, planner/cost/param_count.h BlocksActiveParams),
//    the final norm, and the lm_head matrix V*E, counted even when it is tied to the
//    embedding because the lm_head matmul runs either way. Left out: the token-embedding
//    lookup and learned positions (a gather: no FLOPs). For the spec-7b model
//    (untied) P_dense = P - V*E.
//  * Attention core (QK^T and AV, the full S x S score matrix, causal mask not
//    subtracted): 2*H*S*(D + Dv) FLOPs per token per layer forward (4*E*S when
//    D = Dv = E/H), three times that forward + backward. This is torchtitan's
//    get_num_flop_per_token (6*P + 12*L*H*D*S); Megatron-LM's num_floating_point_operations
//    halves the core for the causal mask (docs/cost_model.md section 4, "Which convention").
//  * Hardware FLOPs add the recompute: full recompute replays the blocks' forward
//    (2*P_blocks + the attention core per token, the lm_head is not replayed; P_blocks
//    counts active experts only); selective replays the attention core; op replays the
//    linears whose outputs it does not save (2 x OpReplayedParams per token and block; the
//    attention kernel's outputs are saved); every:N replays full's forward on its
//    checkpointed blocks only (docs/memory_model.md "Recompute policies").
// Pure functions, no allocation.
#pragma once

#include <cstdint>

#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

// Weight elements one block multiplies each token by (no norms, no biases):
// llama: Wq E*H*D + Wk, Wv E*(K*D) each + Wo H*D*E + up, gate, down 3*E*F (MoE block:
//        router E*X + (k + Xs) experts of 3*E*Fe; MLA: its five matrices);
// gpt:   Wqkv E*(E + 2*K*D) + Wo E*E + fc1, fc2 2*E*F.
// The block of StepWork (the MoE one when the model has MoE layers).
int64_t BlockMatmulParams(const ModelSpec& model);
// The attention projections' share of BlockMatmulParams (Q, K, V, O; MLA's five).
int64_t AttentionMatmulParams(const ModelSpec& model);

// P_dense: see the header comment. BlocksActiveParams + final norm + V*E
// (L*BlockParams + final norm + V*E for a dense model).
int64_t DenseParams(const ModelSpec& model);

// Forward FLOPs of the attention core per token per layer over a context of
// `seq` keys: QK^T 2*H*D*S + AV 2*H*Dv*S (4*E*S when D = Dv = E/H).
double AttentionCoreForwardFlopsPerToken(const ModelSpec& model, int64_t seq);

struct StepFlops {
  double model = 0;               // tokens * (6*P_dense + 3 * L * attention core)
  double model_no_attention = 0;  // tokens * 6*P_dense
  double recompute = 0;           // the replayed forward (per Recompute mode)
  double hardware = 0;            // model + recompute
};
// `recompute` is a block's policy (kNone .. kOp), the same on every block.
StepFlops StepFlopsOf(const ModelSpec& model, const TrainingSpec& training, Recompute recompute);
// The plan's policy, every:N's checkpointed blocks counted on each pipeline rank.
StepFlops StepFlopsOf(const ModelSpec& model, const TrainingSpec& training,
                      const ParallelPlan& plan);
// Weight elements per token of one block's linears whose outputs the op policy does not
// save (OpPolicySavesOutput): the matmuls it replays (the MoE block's when `moe`).
int64_t OpReplayedParams(const ModelSpec& model, bool moe);

// The FLOP convention of every model TFLOP/s and MFU meshplan prints, in one line for the
// outputs' legends (docs/cost_model.md section 4, "Per-GPU figures").
inline constexpr const char* kModelFlopsConvention =
    "model FLOPs count causal attention over the full S x S, as torchtitan does";

// per_step / (gpus * seconds): a step's amount (tokens, FLOPs) as a rate per GPU, the
// figure NeMo, Megatron-LM and torchtitan log (tokens/s/GPU, TFLOP/s/GPU). Returns 0 when
// gpus or seconds is not positive.
double PerGpuRate(double per_step, int64_t gpus, double seconds);
// flops / (gpus * peak_flops * seconds) (PerGpuRate over the peak): MFU with model FLOPs,
// HFU with hardware FLOPs. Returns 0 when any of gpus, peak or seconds is not positive.
double Utilization(double flops, int64_t gpus, double peak_flops, double seconds);

}  // namespace meshplan
