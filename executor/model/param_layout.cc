// The flat parameter groups of a model stage and their seeded initialisation.
#include "executor/model/param_layout.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <stdexcept>
#include <utility>

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

// One split of a weight: along `dim`, `by` (size, rank) ways; size 1 leaves the dim whole.
struct SplitBy {
  int dim;
  TpShard by;
};

// A weight of full shape `shape`, this rank's slice of it after the splits (none: replicated).
void AddSlot(ParamGroup& group, std::string name, std::vector<int64_t> shape, double init_std,
             std::vector<SplitBy> splits = {}) {
  ParamSlot slot;
  slot.name = std::move(name);
  slot.full_shape = shape;
  slot.init_std = init_std;
  for (const SplitBy& s : splits) {
    if (s.by.size == 1) continue;
    int64_t& extent = shape[static_cast<size_t>(s.dim)];
    extent /= s.by.size;
    slot.splits.push_back({s.dim, s.by.rank * extent});
  }
  slot.numel = 1;
  for (int64_t d : shape) slot.numel *= d;
  slot.shape = std::move(shape);
  slot.offset = group.numel;
  group.numel += slot.numel;
  group.slots.push_back(std::move(slot));
}

// This slot's slice of a tensor of the whole weight's shape (a view).
at::Tensor SliceOf(const ParamSlot& slot, at::Tensor whole) {
  for (const ParamSlot::Split& s : slot.splits)
    whole = whole.narrow(s.dim, s.start, slot.shape[static_cast<size_t>(s.dim)]);
  return whole;
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

std::vector<StageRange> PipelineRankChunks(const ModelSpec& model, const StageLayers& stages,
                                           int64_t v, int64_t pp_rank) {
  const int64_t pp = stages.pp;
  const bool empty_stage = stages.first < 1 || stages.last < 1 || (pp > 2 && stages.middle < 1);
  // The chunks tile the layers: a middle share that does not divide by v, or an end chunk
  // that ChunkOf clamped at 0, leaves the last chunk ending elsewhere.
  const bool chunks_fit = stages.vpp == v && stages.FirstBlockOfChunk(pp - 1, v - 1) +
                                                     stages.ChunkOf(pp - 1, v - 1) ==
                                                 model.layers;
  if (stages.Total() != model.layers || empty_stage || !chunks_fit || pp_rank < 0 || pp_rank >= pp)
    throw std::invalid_argument("pipeline: " + std::to_string(model.layers) +
                                " layers do not split into " + std::to_string(pp) + " stages of " +
                                std::to_string(v) + " chunk(s) as planned (or stage " +
                                std::to_string(pp_rank) + " is out of range)");
  std::vector<StageRange> chunks;
  for (int64_t c = 0; c < v; ++c) {
    const int64_t first = stages.FirstBlockOfChunk(pp_rank, c);
    chunks.push_back({first, first + stages.ChunkOf(pp_rank, c), pp_rank == 0 && c == 0,
                      pp_rank == pp - 1 && c == v - 1});
  }
  return chunks;
}

ParamLayout BuildParamLayout(const ModelSpec& model, int64_t shards, StageRange stage,
                             TpShard tp, ExpertShard ep) {
  return BuildParamLayout(model, shards, std::vector<StageRange>{stage}, tp, ep);
}

ParamLayout BuildParamLayout(const ModelSpec& model, int64_t shards,
                             const std::vector<StageRange>& chunks, TpShard tp, ExpertShard ep) {
  if (model.block != BlockKind::kLlama)
    throw std::invalid_argument("the executor builds llama blocks only");
  if (tp.size < 1 || tp.rank < 0 || tp.rank >= tp.size)
    throw std::invalid_argument("BuildParamLayout: bad tensor-parallel rank");
  for (const auto& [what, n] : {std::pair<const char*, int64_t>{"heads", model.heads},
                                {"kv_heads", model.kv_heads},
                                {"ffn_hidden", model.ffn_hidden},
                                {"vocab_size", model.vocab_size},
                                {"moe.expert_ffn_hidden", model.moe.expert_ffn_hidden}})
    if (n % tp.size != 0)
      throw std::invalid_argument(std::string("BuildParamLayout: tp=") + std::to_string(tp.size) +
                                  " does not divide " + what + "=" + std::to_string(n));
  if (ep.shards == 0) ep.shards = shards;
  if (ep.size < 1 || ep.rank < 0 || ep.rank >= ep.size || ep.shards < 1)
    throw std::invalid_argument("BuildParamLayout: bad expert-parallel rank");
  if (ep.size > 1 && !model.moe.enabled())
    throw std::invalid_argument("BuildParamLayout: ep=" + std::to_string(ep.size) +
                                " on a dense model (no experts to split)");
  if (model.moe.enabled() && model.moe.experts % ep.size != 0)
    throw std::invalid_argument("BuildParamLayout: ep=" + std::to_string(ep.size) +
                                " does not divide model.moe.experts=" +
                                std::to_string(model.moe.experts));
  const int64_t V = model.vocab_size, E = model.hidden, F = model.ffn_hidden;
  const int64_t X = model.moe.experts, Fe = model.moe.expert_ffn_hidden;
  const int64_t XsFe = model.moe.shared_experts * Fe;
  const int64_t HD = model.heads * model.head_dim(), KD = model.kv_hidden();
  const double out_std = kInitStd / std::sqrt(2.0 * static_cast<double>(model.layers));

  ParamLayout layout;
  layout.model = model;
  layout.shards = shards;
  layout.tp = tp;
  layout.ep = ep;
  for (const StageRange& stage : chunks) {
    const int64_t end_block = stage.end_block < 0 ? model.layers : stage.end_block;
    ChunkGroups chunk;
    if (stage.embedding) {
      ParamGroup g;
      g.tp = tp;
      g.name = "embedding";
      g.kind = GroupKind::kEmbedding;
      AddSlot(g, "wte", {V, E}, kInitStd, {{0, tp}});  // vocabulary parallel: rows split
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
      g.tp = tp;
      AddSlot(g, "attn_norm", {E}, 0);
      AddSlot(g, "wq", {HD, E}, kInitStd, {{0, tp}});  // column parallel: output rows split
      AddSlot(g, "wk", {KD, E}, kInitStd, {{0, tp}});
      AddSlot(g, "wv", {KD, E}, kInitStd, {{0, tp}});
      AddSlot(g, "wo", {E, HD}, out_std, {{1, tp}});  // row parallel: input columns split
      AddSlot(g, "ffn_norm", {E}, 0);
      if (!model.IsMoeLayer(l)) {
        AddSlot(g, "w_up", {F, E}, kInitStd, {{0, tp}});
        AddSlot(g, "w_gate", {F, E}, kInitStd, {{0, tp}});
        AddSlot(g, "w_down", {E, F}, out_std, {{1, tp}});
      } else {
        AddSlot(g, "router", {X, E}, kInitStd);  // replicated
        if (XsFe > 0) {
          AddSlot(g, "shared_up", {XsFe, E}, kInitStd, {{0, tp}});
          AddSlot(g, "shared_gate", {XsFe, E}, kInitStd, {{0, tp}});
          AddSlot(g, "shared_down", {E, XsFe}, out_std, {{1, tp}});
        }
      }
      Finish(g, shards);
      layout.groups.push_back(std::move(g));
      ++chunk.num_blocks;
    }
    // The routed experts of the chunk's MoE layers, after its blocks.
    for (int64_t l = stage.first_block; l < end_block; ++l) {
      if (!model.IsMoeLayer(l)) continue;
      ParamGroup g;
      g.name = "block" + std::to_string(l) + ".experts";
      g.kind = GroupKind::kExperts;
      g.block = l;
      g.tp = tp;
      // ep splits the experts (dim 0); tp each expert like the dense FFN (its Fe dim).
      const TpShard by_ep{ep.size, ep.rank};
      AddSlot(g, "expert_up", {X, Fe, E}, kInitStd, {{0, by_ep}, {1, tp}});
      AddSlot(g, "expert_gate", {X, Fe, E}, kInitStd, {{0, by_ep}, {1, tp}});
      AddSlot(g, "expert_down", {X, E, Fe}, out_std, {{0, by_ep}, {2, tp}});
      Finish(g, ep.shards);
      layout.groups[static_cast<size_t>(chunk.first_block_group + (l - stage.first_block))]
          .experts_group = static_cast<int>(layout.groups.size());
      layout.groups.push_back(std::move(g));
    }
    if (stage.head) {
      ParamGroup g;
      g.name = "head";
      g.kind = GroupKind::kHead;
      g.tp = tp;
      AddSlot(g, "final_norm", {E}, 0);
      if (!model.tied_embeddings) AddSlot(g, "lm_head", {V, E}, kInitStd, {{0, tp}});
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
    if (slot.splits.empty()) {
      view.normal_(0.0, slot.init_std, gen);
      continue;
    }
    // Draw the whole weight (the single-process values), keep this rank's slice.
    at::Tensor whole = at::empty(slot.full_shape, at::kFloat);
    whole.normal_(0.0, slot.init_std, gen);
    view.copy_(SliceOf(slot, whole));
  }
  return flat;
}

void PlaceTpShard(const ParamGroup& shard, const at::Tensor& shard_flat, const ParamGroup& full,
                  at::Tensor& full_flat) {
  for (const ParamSlot& s : shard.slots) {
    SliceOf(s, SlotView(full_flat, full.slot(s.name))).copy_(SlotView(shard_flat, s));
  }
}

}  // namespace meshplan
