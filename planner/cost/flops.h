// FLOPs of a training step (docs/cost_model.md section 4) and the utilisation figures
// built on them.
//
// Conventions (the ones MFU is quoted in, Megatron / PaLM style):
//  * A matmul with a W-element weight costs 2*W FLOPs per token forward, 4*W backward
//    (input and weight gradients), so training costs 6*W per token.
//  * P_dense (DenseParams) is the parameters that multiply every token: the L blocks
//    (their norm weights and biases included: a negligible over-count of 6 FLOPs each),
//    the final norm, and the lm_head matrix V*E, counted even when it is tied to the
//    embedding because the lm_head matmul runs either way. Left out: the token-embedding
//    lookup and learned positions (a gather: no FLOPs). For the spec-7b model
//    (untied) P_dense = P - V*E.
//  * Attention core (QK^T and AV, the full S x S score matrix, causal mask not
//    subtracted): 4*E*S FLOPs per token per layer forward, 12*L*E*S forward + backward.
//  * Hardware FLOPs add the recompute: full recompute replays the blocks' forward
//    (2*P_blocks + 4*L*E*S per token, the lm_head is not replayed); selective
//    replays the attention core (4*L*E*S per token).
// Pure functions, no allocation.
#pragma once

#include <cstdint>

#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

// Weight elements one block multiplies each token by (no norms, no biases):
// llama: Wq E*E + Wk, Wv E*(K*D) each + Wo E*E + up, gate, down 3*E*F;
// gpt:   Wqkv E*(E + 2*K*D) + Wo E*E + fc1, fc2 2*E*F.
int64_t BlockMatmulParams(const ModelSpec& model);

// P_dense: see the header comment. L*BlockParams + final norm + V*E.
int64_t DenseParams(const ModelSpec& model);

// Forward FLOPs of the attention core per token per layer over a context of
// `seq` keys: QK^T 2*E*S + AV 2*E*S = 4*E*S.
double AttentionCoreForwardFlopsPerToken(const ModelSpec& model, int64_t seq);

struct StepFlops {
  double model = 0;               // tokens * (6*P_dense + 12*L*E*S)
  double model_no_attention = 0;  // tokens * 6*P_dense
  double recompute = 0;           // the replayed forward (per Recompute mode)
  double hardware = 0;            // model + recompute
};
StepFlops StepFlopsOf(const ModelSpec& model, const TrainingSpec& training, Recompute recompute);

// flops / (gpus * peak_flops * seconds): MFU with model FLOPs, HFU with hardware FLOPs.
// Returns 0 when any of gpus, peak or seconds is not positive.
double Utilization(double flops, int64_t gpus, double peak_flops, double seconds);

}  // namespace meshplan
