#include "planner/cost/param_count.h"

#include <algorithm>

#include "planner/cost/block_linears.h"
#include "planner/stage_layers.h"

namespace meshplan {
namespace {

// The experts' share of one llama MoE block on one rank: shared experts' tp shards and
// X/ep routed experts' tp shards.
int64_t ExpertParamsPerRank(const ModelSpec& m, int64_t tp, int64_t ep) {
  int64_t n = 0;
  for (const BlockLinear& l : LlamaBlockLinears(m, /*moe_layer=*/true))
    if (l.role == LinearRole::kSharedExpert) n += l.params_per_tp_rank(tp);
  return n + RoutedExpertParamsPerRank(m, tp, ep);
}

}  // namespace

int64_t RoutedExpertParamsPerRank(const ModelSpec& m, int64_t tp, int64_t ep) {
  if (!m.moe.enabled() || m.block != BlockKind::kLlama) return 0;
  int64_t n = 0;
  for (const BlockLinear& l : LlamaBlockLinears(m, /*moe_layer=*/true))
    if (l.role == LinearRole::kRoutedExpert) n += l.params_per_rank(tp, ep);
  return n;
}

int64_t BlockParamsPerRank(const ModelSpec& m, const ParallelPlan& plan, bool moe_layer) {
  return BlockParamsPerRank(m, plan.tp, plan.ep, moe_layer, BlockLinearsOf(m, moe_layer));
}

int64_t BlockParamsPerRank(const ModelSpec& m, const ParallelPlan& plan) {
  return BlockParamsPerRank(m, plan, m.moe_layers() > 0);
}

int64_t BlockParamsPerRank(const ModelSpec& m, int64_t tp, int64_t ep, bool moe_layer,
                           const BlockLinears& linears) {
  int64_t n = m.block == BlockKind::kLlama ? LlamaBlockVectorParams(m, moe_layer)  // replicated
                                           : GptBlockVectorParamsPerTpRank(m, tp);
  for (const BlockLinear& l : linears) n += l.params_per_rank(tp, ep);
  return n;
}

int64_t BlockParamsPerTpRank(const ModelSpec& m, int64_t tp, bool moe_layer) {
  return BlockParamsPerRank(m, tp, 1, moe_layer, BlockLinearsOf(m, moe_layer));
}

int64_t BlockParamsPerTpRank(const ModelSpec& m, int64_t tp) {
  return BlockParamsPerTpRank(m, tp, m.moe_layers() > 0);
}

int64_t BlockParams(const ModelSpec& model) { return BlockParamsPerTpRank(model, 1); }

int64_t PaddedVocab(const ModelSpec& m, int64_t tp) { return (m.vocab_size + tp - 1) / tp * tp; }

namespace {

int64_t FinalNormParams(const ModelSpec& m) {
  return m.block == BlockKind::kLlama ? m.hidden : 2 * m.hidden;
}
int64_t PositionParams(const ModelSpec& m) {
  return m.block == BlockKind::kGpt ? m.max_seq * m.hidden : 0;
}
// All L blocks: Ld dense ones and L - Ld MoE ones.
int64_t AllBlocksParams(const ModelSpec& m) {
  int64_t n = m.dense_ffn_layers() * BlockParamsPerTpRank(m, 1, false);
  if (m.moe_layers() > 0) n += m.moe_layers() * BlockParamsPerTpRank(m, 1, true);
  return n;
}
// Routed-expert parameters one token skips in one MoE layer: X - k experts.
int64_t SkippedExpertParams(const ModelSpec& m) {
  int64_t n = 0;
  for (const BlockLinear& l : LlamaBlockLinears(m, /*moe_layer=*/true))
    n += l.params() - l.active_params();
  return n;
}

}  // namespace

int64_t CountParams(const ModelSpec& m) {
  const int64_t embedding = m.vocab_size * m.hidden;
  const int64_t lm_head = m.tied_embeddings ? 0 : m.vocab_size * m.hidden;
  return embedding + PositionParams(m) + AllBlocksParams(m) + FinalNormParams(m) + lm_head;
}

int64_t CountActiveParams(const ModelSpec& m) {
  if (m.moe_layers() == 0) return CountParams(m);
  return CountParams(m) - m.moe_layers() * SkippedExpertParams(m);
}

int64_t BlocksActiveParams(const ModelSpec& m) {
  const int64_t skipped = m.moe_layers() > 0 ? m.moe_layers() * SkippedExpertParams(m) : 0;
  return AllBlocksParams(m) - skipped;
}

int64_t MoeLayersOfStage(const ModelSpec& m, const ParallelPlan& plan, int64_t stage) {
  if (m.moe_layers() == 0) return 0;
  const int64_t Ld = m.moe.dense_layers;
  // Layers [begin, end) that are MoE: those at index >= Ld.
  const auto moe_in = [Ld](int64_t begin, int64_t end) {
    return std::max<int64_t>(0, end - std::max(begin, Ld));
  };
  // Each model chunk of the stage holds a run of layers (one run unless interleaved).
  const StageLayers split = SplitLayers(m.layers, plan);
  int64_t n = 0;
  for (int64_t c = 0; c < split.vpp; ++c) {
    const int64_t begin = split.FirstBlockOfChunk(stage, c);
    n += moe_in(begin, begin + split.ChunkOf(stage, c));
  }
  return n;
}

StageParams CountStageParams(const ModelSpec& m, const ParallelPlan& plan, int64_t stage) {
  return CountStageParams(m, plan, stage, LayersOfStage(m, plan, stage),
                          MoeLayersOfStage(m, plan, stage), BlockParamsPerTpRank(m, plan.tp, false));
}

StageParams CountStageParams(const ModelSpec& m, const ParallelPlan& plan, int64_t stage,
                             int64_t layers, int64_t moe, int64_t dense_block_params) {
  StageParams out;
  const int64_t vocab_shard = PaddedVocab(m, plan.tp) / plan.tp * m.hidden;
  out.blocks = (layers - moe) * dense_block_params;
  if (moe > 0) {
    out.blocks += moe * BlockParamsPerRank(m, plan, true);
    out.experts = moe * ExpertParamsPerRank(m, plan.tp, plan.ep);
    out.routed_experts = moe * RoutedExpertParamsPerRank(m, plan.tp, plan.ep);
  }
  if (stage == 0) out.embedding = vocab_shard + PositionParams(m);
  if (stage == plan.pp - 1) {
    out.final_norm = FinalNormParams(m);
    // Tied weights share storage only when embedding and lm_head sit on one stage.
    if (!m.tied_embeddings || plan.pp > 1) out.lm_head = vocab_shard;
  }
  return out;
}

}  // namespace meshplan
