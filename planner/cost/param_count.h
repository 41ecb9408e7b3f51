// Exact parameter counts: whole model (docs/cost_model.md section 1) and per rank.
//
// Per rank follows the Megatron layout: tensor-parallel matrices split by tp,
// norms (and row-parallel biases) replicated; the vocabulary padded to a
// multiple of tp and split (vocabulary-parallel embedding and lm_head);
// expert parallelism (plan.ep) splits each MoE layer's routed experts X/ep per rank
// (planner/mesh_layout.h); shared experts, the router and the rest stay on every rank;
// pipeline stage 0 holds the embedding, the last stage the final norm and the
// lm_head (with tied embeddings and pp > 1 the last stage keeps its own copy
// of the embedding matrix as the lm_head, as Megatron does).
#pragma once

#include <cstdint>

#include "planner/model_spec.h"
#include "planner/parallel_plan.h"

namespace meshplan {

class BlockLinears;

// Llama: 4*E*E + 3*E*F + 2*E for MHA (Q, K, V, O; up, gate, down; two RMSNorms);
// with GQA K and V are E x (K*D); in general the matrices of planner/cost/block_linears.h
// plus its vectors (norms, q/k norms, router bias). GPT: QKV and O with biases, E->F->E
// MLP with biases, two LayerNorms (weight + bias).
// `moe_layer` picks a MoE layer's block (model.moe.enabled()) over a dense layer's.
int64_t BlockParamsPerTpRank(const ModelSpec& model, int64_t tp, bool moe_layer);
// The block StepWork describes (planner/cost/step_work.h): the MoE layer's when the model
// has MoE layers, else the dense one. For a dense model, every block.
int64_t BlockParamsPerTpRank(const ModelSpec& model, int64_t tp);
int64_t BlockParams(const ModelSpec& model);  // BlockParamsPerTpRank(model, 1)
// One MoE layer's routed experts on one rank: X/ep experts' tp shards,
// (X/ep) * 3*E*Fe / tp. 0 for a dense model.
int64_t RoutedExpertParamsPerRank(const ModelSpec& model, int64_t tp, int64_t ep);
// A block on one rank of `plan`: BlockParamsPerTpRank with only X/ep routed experts
// (moe_layer); the second form is StepWork's block, as BlockParamsPerTpRank(model, tp).
int64_t BlockParamsPerRank(const ModelSpec& model, const ParallelPlan& plan, bool moe_layer);
int64_t BlockParamsPerRank(const ModelSpec& model, const ParallelPlan& plan);
// The same from the block's matrices already listed (BlockOps::linears(): BlockLinearsOf(model,
// moe_layer)), with X/ep routed experts: each form above is this with ep = 1 or plan.ep.
int64_t BlockParamsPerRank(const ModelSpec& model, int64_t tp, int64_t ep, bool moe_layer,
                           const BlockLinears& linears);
// V rounded up to a multiple of tp (vocabulary-parallel layers need equal shards).
int64_t PaddedVocab(const ModelSpec& model, int64_t tp);
// P = V*E + Ld*dense block + (L-Ld)*MoE block + final norm + [V*E if untied]
// (+ positions for GPT); a dense model has Ld = L.
int64_t CountParams(const ModelSpec& model);
// Parameters one token passes through ("active"; Mixtral 8x7B: 12.9e9 of 46.7e9): P less
// the X - k routed experts a token skips in each MoE layer. Equal to P for a dense model.
int64_t CountActiveParams(const ModelSpec& model);
// Parameters of the blocks a token passes through, summed over all L layers (the routed
// experts counted k of X): the matmuls a forward multiplies each token by, plus the
// blocks' vectors (norms, router bias).
int64_t BlocksActiveParams(const ModelSpec& model);
// MoE layers on pipeline `stage` (the first Ld layers are dense; 0 for a dense model).
int64_t MoeLayersOfStage(const ModelSpec& model, const ParallelPlan& plan, int64_t stage);

// The parameters that live on one rank of a pipeline stage (before ZeRO sharding).
struct StageParams {
  int64_t embedding = 0;  // token (+ position) embedding shard
  int64_t blocks = 0;     // this stage's blocks (all virtual chunks), tp shard
  int64_t experts = 0;    // of `blocks`: the routed (X/ep) and shared experts' tp shards
  int64_t routed_experts = 0;  // of `experts`: the X/ep routed experts' (expert-data-parallel)
  int64_t final_norm = 0;
  int64_t lm_head = 0;    // lm_head shard (or the tied copy on the last stage when pp > 1)
  int64_t total() const { return embedding + blocks + final_norm + lm_head; }
};
StageParams CountStageParams(const ModelSpec& model, const ParallelPlan& plan, int64_t stage);
// The same from the stage's `layers` (LayersOfStage), `moe_layers` (MoeLayersOfStage) and a
// dense block's parameters on a tp rank (BlockParamsPerTpRank(model, plan.tp, false)), when
// the caller has them (PlanShape).
StageParams CountStageParams(const ModelSpec& model, const ParallelPlan& plan, int64_t stage,
                             int64_t layers, int64_t moe_layers, int64_t dense_block_params);

}  // namespace meshplan
