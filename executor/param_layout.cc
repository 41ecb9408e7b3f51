// The flat parameter groups of a model stage and their seeded initialisation.
#include "executor/param_layout.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <stdexcept>

namespace meshplan {

namespace {

// FNV-1a over the name, mixed with the seed by splitmix64: one independent stream per weight.
uint64_t WeightSeed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (h | 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void AddSlot(ParamGroup& group, std::string name, std::vector<int64_t> shape, double init_std) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  group.slots.push_back({std::move(name), std::move(shape), group.numel, numel, init_std});
  group.numel += numel;
}

void Finish(ParamGroup& group, int64_t shards) {
  group.padded_numel = (group.numel + shards - 1) / shards * shards;
  group.shard_numel = group.padded_numel / shards;
}

constexpr double kInitStd = 0.02;

}  // namespace

const ParamSlot& ParamGroup::slot(const std::string& slot_name) const {
  for (const ParamSlot& s : slots)
    if (s.name == slot_name) return s;
  throw std::logic_error("parameter group " + name + " has no weight " + slot_name);
}

int64_t ParamLayout::numel() const {
  int64_t n = 0;
  for (const ParamGroup& g : groups) n += g.numel;
  return n;
}

int64_t ParamLayout::padded_numel() const {
  int64_t n = 0;
  for (const ParamGroup& g : groups) n += g.padded_numel;
  return n;
}

StageRange VirtualStageRange(const ModelSpec& model, int64_t virtual_stages, int64_t stage) {
  if (virtual_stages < 1 || model.layers % virtual_stages != 0 || stage < 0 ||
      stage >= virtual_stages)
    throw std::invalid_argument("pipeline: " + std::to_string(model.layers) +
                                " layers do not split into " + std::to_string(virtual_stages) +
                                " virtual stages (or stage " + std::to_string(stage) +
                                " is out of range)");
  const int64_t per = model.layers / virtual_stages;
  return {stage * per, (stage + 1) * per, stage == 0, stage == virtual_stages - 1};
}

std::vector<StageRange> PipelineRankChunks(const ModelSpec& model, int64_t pp, int64_t v,
                                           int64_t pp_rank) {
  std::vector<StageRange> chunks;
  for (int64_t c = 0; c < v; ++c) chunks.push_back(VirtualStageRange(model, pp * v, c * pp + pp_rank));
  return chunks;
}

ParamLayout BuildParamLayout(const ModelSpec& model, int64_t shards, StageRange stage) {
  return BuildParamLayout(model, shards, std::vector<StageRange>{stage});
}

ParamLayout BuildParamLayout(const ModelSpec& model, int64_t shards,
                             const std::vector<StageRange>& chunks) {
  if (model.block != BlockKind::kLlama)
    throw std::invalid_argument("the executor builds llama blocks only");
  const int64_t V = model.vocab_size, E = model.hidden, F = model.ffn_hidden;
  const int64_t HD = model.heads * model.head_dim(), KD = model.kv_hidden();
  const double out_std = kInitStd / std::sqrt(2.0 * static_cast<double>(model.layers));

  ParamLayout layout;
  layout.model = model;
  layout.shards = shards;
  for (const StageRange& stage : chunks) {
    const int64_t end_block = stage.end_block < 0 ? model.layers : stage.end_block;
    ChunkGroups chunk;
    if (stage.embedding) {
      ParamGroup g;
      g.name = "embedding";
      g.kind = GroupKind::kEmbedding;
      AddSlot(g, "wte", {V, E}, kInitStd);
      Finish(g, shards);
      chunk.embedding_group = static_cast<int>(layout.groups.size());
      layout.groups.push_back(std::move(g));
    }
    chunk.first_block_group = static_cast<int>(layout.groups.size());
    chunk.first_block = stage.first_block;
    for (int64_t l = stage.first_block; l < end_block; ++l) {
      ParamGroup g;
      g.name = "block" + std::to_string(l);
      g.kind = GroupKind::kBlock;
      g.block = l;
      AddSlot(g, "attn_norm", {E}, 0);
      AddSlot(g, "wq", {HD, E}, kInitStd);
      AddSlot(g, "wk", {KD, E}, kInitStd);
      AddSlot(g, "wv", {KD, E}, kInitStd);
      AddSlot(g, "wo", {E, HD}, out_std);
      AddSlot(g, "ffn_norm", {E}, 0);
      AddSlot(g, "w_up", {F, E}, kInitStd);
      AddSlot(g, "w_gate", {F, E}, kInitStd);
      AddSlot(g, "w_down", {E, F}, out_std);
      Finish(g, shards);
      layout.groups.push_back(std::move(g));
      ++chunk.num_blocks;
    }
    if (stage.head) {
      ParamGroup g;
      g.name = "head";
      g.kind = GroupKind::kHead;
      AddSlot(g, "final_norm", {E}, 0);
      if (!model.tied_embeddings) AddSlot(g, "lm_head", {V, E}, kInitStd);
      Finish(g, shards);
      chunk.head_group = static_cast<int>(layout.groups.size());
      layout.groups.push_back(std::move(g));
    }
    if (chunk.embedding_group >= 0) layout.embedding_group = chunk.embedding_group;
    if (chunk.head_group >= 0) layout.head_group = chunk.head_group;
    layout.chunks.push_back(chunk);
  }
  if (!layout.chunks.empty()) {
    layout.first_block_group = layout.chunks.front().first_block_group;
    layout.num_blocks = layout.chunks.front().num_blocks;
  }
  return layout;
}

at::Tensor SlotView(const at::Tensor& flat, const ParamSlot& slot) {
  return flat.narrow(0, slot.offset, slot.numel).view(slot.shape);
}

at::Tensor InitGroup(const ParamGroup& group, uint64_t seed) {
  at::Tensor flat = at::zeros({group.padded_numel}, at::kFloat);  // padding stays 0
  for (const ParamSlot& slot : group.slots) {
    at::Tensor view = SlotView(flat, slot);
    if (slot.init_std == 0) {
      view.fill_(1.0);
      continue;
    }
    // The tied lm_head reads "embedding.wte": weight names are unique per model.
    at::Generator gen = at::detail::createCPUGenerator(WeightSeed(seed, group.name + "." + slot.name));
    view.normal_(0.0, slot.init_std, gen);
  }
  return flat;
}

}  // namespace meshplan
