// BlockLinears: the weight matrices of one llama-family block (dense or mixture of
// experts; GQA, head_dim set on its own, or multi-head latent attention) with their
// tensor-parallel split and the tokens each one sees. The one list the parameter count
// (planner/cost/param_count.h), the FLOPs (planner/cost/flops.h) and the step's GEMMs
// (planner/cost/step_work.h) read, so the three cannot disagree (docs/cost_model.md
// section 1). GPT blocks keep their closed forms in param_count.cc (biases).
//
// Shapes (planner/model_spec.h legend), whole matrices (before tp):
//   attention  Wq E x H*D (MLA: Wq_a E x Rq, Wq_b Rq x H*D), Wk, Wv E x K*D
//              (MLA: Wkv_a E x (Rkv + Dr), Wkv_b Rkv x H*(D - Dr + Dv)), Wo H*Dv x E
//   dense FFN  gate, up E x F, down F x E
//   MoE FFN    router E x X; X routed experts and Xs shared experts, each gate, up
//              E x Fe and down Fe x E
// Split: column-parallel matrices divide their output by tp, row-parallel their input;
// MLA's down-projections (Wq_a, Wkv_a) and the router are replicated (DeepSeek-V3 and
// Megatron-LM's MLA do the same). Experts are tensor-parallel like the dense FFN; expert
// parallelism divides the routed copies (planner/cost/expert_parallel.h).
// Pure values, no allocation (the search builds these per candidate).
#pragma once

#include <array>
#include <cstdint>

#include "planner/model_spec.h"

namespace meshplan {

enum class TpSplit : uint8_t { kColumn, kRow, kReplicated };

enum class LinearRole : uint8_t {
  kAttention,     // q, k, v, o projections (and MLA's low-rank ones)
  kDenseFfn,      // gate, up, down of a dense layer
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
  // This rank's in / out width of one copy.
  int64_t in_per_rank(int64_t tp) const { return split == TpSplit::kRow ? in / tp : in; }
  int64_t out_per_rank(int64_t tp) const { return split == TpSplit::kColumn ? out / tp : out; }
};

class BlockLinears {
 public:
  static constexpr int kCapacity = 12;  // MLA (5) + router + routed (3) + shared (3)
  void Add(const BlockLinear& linear);  // beyond capacity is a programming error (aborts)
  const BlockLinear* begin() const { return items_.data(); }
  const BlockLinear* end() const { return items_.data() + size_; }
  int size() const { return size_; }

 private:
  std::array<BlockLinear, kCapacity> items_{};
  int size_ = 0;
};

// The matrices of one llama block; `moe_layer` picks the MoE FFN (model.moe.enabled()
// required) over the dense one. Precondition: model.block == kLlama.
BlockLinears LlamaBlockLinears(const ModelSpec& model, bool moe_layer);

// Expert rows (tokens dispatched to routed experts) per token of a MoE layer: k when
// dropless, k * capacity_factor when every expert's buffer is padded to its capacity
// (capacity = capacity_factor * T*k/X tokens; GShard / Switch Transformer style).
double ExpertRowsPerToken(const ModelSpec& model);

// One llama block's weights outside matrices: two RMSNorms (2E), q/k norms (2D), MLA's
// latent norms (Rq when q is low-rank, Rkv), the router bias (X, MoE layers). Replicated.
int64_t LlamaBlockVectorParams(const ModelSpec& model, bool moe_layer);

}  // namespace meshplan
