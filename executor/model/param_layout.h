// ParamLayout: where every weight of a rank's model chunks (the whole model, or its
// pipeline stage's chunks) lives inside its flat parameter groups, and the deterministic
// initialisation of those groups from a seed.
// Groups: "embedding", "block<l>" (one per block), "block<l>.experts" (the routed experts of
// a MoE layer l: what expert parallelism splits), "head"; each ONE flat 1-D buffer (the unit
// ZeRO shards and communicates), its numel padded with zeros to a multiple of `shards` (the
// dp size) so every rank owns an equal shard of shard_numel = padded_numel / shards elements.
// Initialisation is a pure function of (seed, weight name): the values do not depend on the
// world size, the sharding, the stage split or the tp split (a tp slot holds its slice of
// the whole weight, ParamSlot::splits).
// Group contents, init distributions, tp slices: docs/executor_internals.md#param-layout.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model_spec.h"
#include "planner/stage_layers.h"

namespace meshplan {

struct ParamSlot {
  std::string name;            // "wq", "lm_head", ...
  std::vector<int64_t> shape;  // e.g. {H*D, E}
  int64_t offset = 0;          // elements from the start of the group's flat buffer
  int64_t numel = 0;
  double init_std = 0;         // N(0, init_std); 0 means "ones" (norm weights)
  // The slice this rank holds of the whole weight (full_shape): one contiguous range per
  // split dim (empty: the whole weight, replicated). Tensor parallelism splits rows (dim 0)
  // or columns (dim 1); a routed-experts slot is split along the expert index (dim 0) by
  // expert parallelism and along its Fe dim by tensor parallelism.
  struct Split {
    int dim = 0;
    int64_t start = 0;  // the slice is [start, start + shape[dim]) of full_shape[dim]
  };
  std::vector<Split> splits;
  std::vector<int64_t> full_shape;  // == shape when splits is empty
};

// This rank's place in its tensor-parallel group: size t, rank i.
struct TpShard {
  int64_t size = 1;
  int64_t rank = 0;
};

// This rank's place in its expert-parallel group (ep size, rank) and how many ways expert
// groups are sharded by ZeRO: the expert-data-parallel replicas (dp x cp / ep); 0: as
// many as the other groups (the layout's `shards`, right without ep).
struct ExpertShard {
  int64_t size = 1;
  int64_t rank = 0;
  int64_t shards = 0;
};

enum class GroupKind { kEmbedding, kBlock, kExperts, kHead };

struct ParamGroup {
  std::string name;            // "embedding", "block3", "head"
  GroupKind kind = GroupKind::kBlock;
  int64_t block = -1;          // the block index for kBlock and kExperts
  int experts_group = -1;      // kBlock of a MoE layer: the index of its kExperts group
  std::vector<ParamSlot> slots;
  int64_t numel = 0;           // sum of the slots
  int64_t padded_numel = 0;    // numel rounded up to a multiple of shards
  int64_t shard_numel = 0;     // padded_numel / shards
  TpShard tp;                  // the tensor-parallel slice the slots hold

  const ParamSlot& slot(const std::string& slot_name) const;  // throws if absent
};

// The blocks [first_block, end_block) plus the embedding and/or the head: one model chunk
// (one virtual pipeline stage). The whole model (pp = 1) is the default.
struct StageRange {
  int64_t first_block = 0;
  int64_t end_block = -1;  // -1: through the last block
  bool embedding = true;
  bool head = true;
};

// The chunks of pipeline rank `pp_rank`, of the blocks `stages` gives them
// (planner/stage_layers.h: even or uneven first / last stages; with v > 1 Megatron's
// interleaved layout, chunk c of rank r being virtual stage c*pp + r, the embedding on
// virtual stage 0 and the head on the last). A chunk may hold no block (an end's chunk that
// gave up its layers: the embedding or the head alone). Throws unless the stages hold all L
// blocks, at least one each, in v chunks per rank (stages.vpp == v).
std::vector<StageRange> PipelineRankChunks(const ModelSpec& model, const StageLayers& stages,
                                           int64_t v, int64_t pp_rank);

// The groups of one chunk (indices into ParamLayout::groups; -1 / 0 when absent).
// A chunk's MoE layers have their experts groups after its blocks (ParamGroup::experts_group).
struct ChunkGroups {
  int embedding_group = -1;
  int first_block_group = -1;  // groups[first_block_group + i] is block first_block + i
  int64_t first_block = 0;
  int64_t num_blocks = 0;
  int head_group = -1;
};

struct ParamLayout {
  ModelSpec model;
  int64_t shards = 1;
  TpShard tp;
  ExpertShard ep;                  // expert groups: sharded ep.shards ways (not `shards`)
  std::vector<ParamGroup> groups;  // per chunk in chunk order: embedding?, blocks ascending, experts?, head?
  std::vector<ChunkGroups> chunks; // one per model chunk this rank holds
  // The rank-wide view: the embedding / head group wherever they are (-1 if not on this
  // rank); first_block_group and num_blocks are chunk 0's (the only chunk unless the
  // schedule is interleaved).
  int embedding_group = -1;
  int first_block_group = -1;
  int64_t num_blocks = 0;
  int head_group = -1;

  int64_t numel() const;         // sum of the groups' numel (unpadded)
  int64_t padded_numel() const;  // sum of padded_numel
};

// Throws std::invalid_argument when tp does not divide heads, kv_heads, ffn_hidden, vocab
// and the expert width, or when ep does not divide the routed experts.
// A MoE layer's block group holds its router (X,E) and shared experts
// (shared_up, shared_gate (Xs*Fe,E), shared_down (E,Xs*Fe): the Xs experts side by side, one
// SwiGLU of width Xs*Fe) in place of w_up, w_gate, w_down; its experts group holds
// expert_up, expert_gate (X,Fe,E) and expert_down (X,E,Fe), this rank's X/ep of them, each
// split over tp like the dense FFN (up, gate: Fe/tp rows; down: Fe/tp columns); the router
// is replicated over tp, the shared experts are split like the dense FFN.
ParamLayout BuildParamLayout(const ModelSpec& model, int64_t shards, StageRange stage = {},
                             TpShard tp = {}, ExpertShard ep = {});
// Several chunks on one rank (the ZeRO unit stays the group).
ParamLayout BuildParamLayout(const ModelSpec& model, int64_t shards,
                             const std::vector<StageRange>& chunks, TpShard tp = {},
                             ExpertShard ep = {});

// A view of one weight inside a group's flat buffer (parameters or gradients alike).
at::Tensor SlotView(const at::Tensor& flat, const ParamSlot& slot);

// The group's full padded flat buffer (padded_numel, fp32 on CPU), freshly initialised.
at::Tensor InitGroup(const ParamGroup& group, uint64_t seed);

// Copies a tensor- or expert-parallel shard's weights (shard_flat: the flat buffer of
// `shard`, padded or not) into their place in the full group's flat buffer (full: the same
// group built with tp {1,0} and ep {1,0}). Replicated weights (norms) are copied whole.
// Reassembles a full group from its shards (tests, snapshots).
void PlaceTpShard(const ParamGroup& shard, const at::Tensor& shard_flat, const ParamGroup& full,
                  at::Tensor& full_flat);

}  // namespace meshplan
