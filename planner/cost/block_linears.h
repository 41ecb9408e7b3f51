// BlockLinears: the weight matrices of one block (llama: dense or mixture of experts; GQA,
// head_dim set on its own, or multi-head latent attention; gpt) with their tensor-parallel
// split, in forward order. The one list the parameter count (planner/cost/param_count.h),
// the FLOPs (planner/cost/flops.h) and the block's op list (planner/cost/block_ops.h) read,
// so they cannot disagree. The matrices, their shapes and splits (column-parallel outputs
// /tp, row-parallel inputs /tp, MLA's down-projections and the router replicated, experts
// tensor-parallel like the dense FFN): docs/cost_model.md section 1(a).
// Pure values, no allocation (the search builds these per candidate).
#pragma once

#include <algorithm>
#include <cstdint>

#include "planner/cost/compute_work.h"  // FixedList
#include "planner/model_spec.h"

namespace meshplan {

enum class TpSplit : uint8_t { kColumn, kRow, kReplicated };

enum class LinearRole : uint8_t {
  kAttention,     // q, k, v, o projections (and MLA's low-rank ones)
  kDenseFfn,      // gate (SwiGLU only), up, down of a dense layer
  kRouter,        // the MoE router (gating) matrix
  kRoutedExpert,  // one matrix of each of the X routed experts
  kSharedExpert,  // one matrix of each of the Xs shared experts
};

struct BlockLinear {
  const char* name = "";
  int64_t in = 0, out = 0;  // the weight is in x out (whole, before tp)
  int64_t copies = 1;       // identical matrices: X routed experts, Xs shared experts
  int64_t active = 1;       // copies a token passes through: k of X routed; all otherwise
  TpSplit split = TpSplit::kReplicated;
  LinearRole role = LinearRole::kAttention;
  bool shares_input = false;  // reads an input an earlier linear already read: k, v (q's),
                              // up (gate's), MLA's wkv_a (wq(_a)'s)

  int64_t params() const { return in * out * copies; }
  int64_t active_params() const { return in * out * active; }
  int64_t params_per_tp_rank(int64_t tp) const {
    return split == TpSplit::kReplicated ? params() : params() / tp;
  }
  // This rank's share with `ep` expert-parallel ranks: the tp shard, of X/ep copies for the
  // routed experts (every other matrix is whole on each ep rank).
  int64_t params_per_rank(int64_t tp, int64_t ep) const {
    const int64_t shard = params_per_tp_rank(tp);
    return role == LinearRole::kRoutedExpert ? shard / std::max<int64_t>(ep, 1) : shard;
  }
  // This rank's in / out width of one copy.
  int64_t in_per_rank(int64_t tp) const { return split == TpSplit::kRow ? in / tp : in; }
  int64_t out_per_rank(int64_t tp) const { return split == TpSplit::kColumn ? out / tp : out; }
};

class BlockLinears {
 public:
  static constexpr int kCapacity = 12;  // MLA (5) + router + routed (3) + shared (3)
  void Add(const BlockLinear& linear);  // beyond capacity is a programming error (aborts)
  const BlockLinear* begin() const { return items_.begin(); }
  const BlockLinear* end() const { return items_.end(); }
  const BlockLinear& operator[](int i) const { return items_[i]; }
  int size() const { return items_.size; }

 private:
  FixedList<BlockLinear, kCapacity> items_;  // no zero-fill: built per candidate
};

// The matrices of one llama block; `moe_layer` picks the MoE FFN (model.moe.enabled()
// required) over the dense one (gate, up, down; up and down when not gated).
// Precondition: model.block == kLlama.
BlockLinears LlamaBlockLinears(const ModelSpec& model, bool moe_layer);
// The matrices of one gpt block: qkv E x (E + 2*K*D) and fc1 E x F column-parallel, o
// E x E and fc2 F x E row-parallel (their biases and the LayerNorms: param_count.cc).
BlockLinears GptBlockLinears(const ModelSpec& model);
// The matrices of one block of `model`, whichever its kind (moe_layer: llama only).
BlockLinears BlockLinearsOf(const ModelSpec& model, bool moe_layer);

// Expert rows (tokens dispatched to routed experts) per token of a MoE layer: k when
// dropless, k * capacity_factor when every expert's buffer is padded to its capacity
// (capacity = capacity_factor * T*k/X tokens; GShard / Switch Transformer style).
double ExpertRowsPerToken(const ModelSpec& model);

// One llama block's weights outside matrices: two RMSNorms (2E), q/k norms (2D), MLA's
// latent norms (Rq when q is low-rank, Rkv), the router bias (X, MoE layers). Replicated.
int64_t LlamaBlockVectorParams(const ModelSpec& model, bool moe_layer);
// One gpt block's weights outside matrices on a tp rank: the column-parallel biases (qkv
// E + 2KD, fc1 F) split, the row-parallel ones (o, fc2: E each) and two LayerNorms (weight
// and bias, 2E each) replicated.
int64_t GptBlockVectorParamsPerTpRank(const ModelSpec& model, int64_t tp);

}  // namespace meshplan
