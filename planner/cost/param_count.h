// Exact parameter counts: whole model (docs/cost_model.md section 1) and per rank.
//
// Per rank follows the Megatron layout: tensor-parallel matrices split by tp,
// norms (and row-parallel biases) replicated; the vocabulary padded to a
// multiple of tp and split (vocabulary-parallel embedding and lm_head);
// pipeline stage 0 holds the embedding, the last stage the final norm and the
// lm_head (with tied embeddings and pp > 1 the last stage keeps its own copy
// of the embedding matrix as the lm_head, as Megatron does).
#pragma once

#include <cstdint>

#include "planner/model_spec.h"
#include "planner/parallel_plan.h"

namespace meshplan {

// Llama: 4*E*E + 3*E*F + 2*E for MHA (Q, K, V, O; up, gate, down; two RMSNorms);
// with GQA K and V are E x (K*D). GPT: QKV and O with biases, E->F->E MLP with
// biases, two LayerNorms (weight + bias).
int64_t BlockParams(const ModelSpec& model);
// One block's parameters on one tensor-parallel rank.
int64_t BlockParamsPerTpRank(const ModelSpec& model, int64_t tp);
// V rounded up to a multiple of tp (vocabulary-parallel layers need equal shards).
int64_t PaddedVocab(const ModelSpec& model, int64_t tp);
// P = V*E + L*block + final norm + [V*E if untied] (+ positions for GPT).
int64_t CountParams(const ModelSpec& model);

// The parameters that live on one rank of a pipeline stage (before ZeRO sharding).
struct StageParams {
  int64_t embedding = 0;  // token (+ position) embedding shard
  int64_t blocks = 0;     // this stage's blocks (all virtual chunks), tp shard
  int64_t final_norm = 0;
  int64_t lm_head = 0;    // lm_head shard (or the tied copy on the last stage when pp > 1)
  int64_t total() const { return embedding + blocks + final_norm + lm_head; }
};
StageParams CountStageParams(const ModelSpec& model, const ParallelPlan& plan, int64_t stage);

}  // namespace meshplan
