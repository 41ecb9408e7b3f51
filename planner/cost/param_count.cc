#include "planner/cost/param_count.h"

#include "planner/stage_layers.h"

namespace meshplan {

int64_t BlockParams(const ModelSpec& model) { return BlockParamsPerTpRank(model, 1); }

int64_t BlockParamsPerTpRank(const ModelSpec& m, int64_t tp) {
  const int64_t E = m.hidden, F = m.ffn_hidden, KD = m.kv_hidden();
  if (m.block == BlockKind::kLlama) {
    const int64_t attention = (E * E + 2 * E * KD + E * E) / tp;  // Wq, Wk, Wv (cols), Wo (rows)
    const int64_t ffn = 3 * E * F / tp;                           // up, gate (cols), down (rows)
    const int64_t norms = 2 * E;                                  // two RMSNorm weights, replicated
    return attention + ffn + norms;
  }
  // GPT: column-parallel weights and biases split; row-parallel biases replicated.
  const int64_t qkv = (E * (E + 2 * KD) + (E + 2 * KD)) / tp;
  const int64_t proj = E * E / tp + E;
  const int64_t mlp = (E * F + F) / tp + F * E / tp + E;
  const int64_t norms = 4 * E;  // two LayerNorms, weight + bias
  return qkv + proj + mlp + norms;
}

int64_t PaddedVocab(const ModelSpec& m, int64_t tp) { return (m.vocab_size + tp - 1) / tp * tp; }

namespace {

int64_t FinalNormParams(const ModelSpec& m) {
  return m.block == BlockKind::kLlama ? m.hidden : 2 * m.hidden;
}
int64_t PositionParams(const ModelSpec& m) {
  return m.block == BlockKind::kGpt ? m.max_seq * m.hidden : 0;
}

}  // namespace

int64_t CountParams(const ModelSpec& m) {
  const int64_t embedding = m.vocab_size * m.hidden;
  const int64_t lm_head = m.tied_embeddings ? 0 : m.vocab_size * m.hidden;
  return embedding + PositionParams(m) + m.layers * BlockParams(m) + FinalNormParams(m) + lm_head;
}

StageParams CountStageParams(const ModelSpec& m, const ParallelPlan& plan, int64_t stage) {
  StageParams out;
  const int64_t vocab_shard = PaddedVocab(m, plan.tp) / plan.tp * m.hidden;
  out.blocks = LayersOfStage(m, plan, stage) * BlockParamsPerTpRank(m, plan.tp);
  if (stage == 0) out.embedding = vocab_shard + PositionParams(m);
  if (stage == plan.pp - 1) {
    out.final_norm = FinalNormParams(m);
    // Tied weights share storage only when embedding and lm_head sit on one stage.
    if (!m.tied_embeddings || plan.pp > 1) out.lm_head = vocab_shard;
  }
  return out;
}

}  // namespace meshplan
