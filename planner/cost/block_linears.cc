#include "planner/cost/block_linears.h"

#include <cstdlib>

namespace meshplan {

void BlockLinears::Add(const BlockLinear& linear) {
  if (items_.size == kCapacity) std::abort();  // a new matrix outgrew kCapacity: raise it
  items_.push_back(linear);
}

namespace {

using S = TpSplit;
using R = LinearRole;

void AddAttention(const ModelSpec& m, BlockLinears& out) {
  const int64_t E = m.hidden, H = m.heads, D = m.head_dim(), Dv = m.v_head_dim();
  if (!m.mla.enabled()) {
    out.Add({"wq", E, H * D, 1, 1, S::kColumn, R::kAttention});
    out.Add({"wk", E, m.kv_hidden(), 1, 1, S::kColumn, R::kAttention, true});
    out.Add({"wv", E, m.kv_heads * Dv, 1, 1, S::kColumn, R::kAttention, true});
  } else {
    const int64_t Rq = m.mla.q_lora_rank, Rkv = m.mla.kv_lora_rank, Dr = m.mla.rope_head_dim;
    if (Rq > 0) {
      out.Add({"wq_a", E, Rq, 1, 1, S::kReplicated, R::kAttention});
      out.Add({"wq_b", Rq, H * D, 1, 1, S::kColumn, R::kAttention});
    } else {
      out.Add({"wq", E, H * D, 1, 1, S::kColumn, R::kAttention});
    }
    out.Add({"wkv_a", E, Rkv + Dr, 1, 1, S::kReplicated, R::kAttention, true});  // reads x, as wq(_a)
    out.Add({"wkv_b", Rkv, H * (D - Dr + Dv), 1, 1, S::kColumn, R::kAttention});
  }
  out.Add({"wo", H * Dv, E, 1, 1, S::kRow, R::kAttention});
}

// gate, up (column) and down (row) of `copies` SwiGLU FFNs of width `width`.
void AddSwiGlu(BlockLinears& out, int64_t E, int64_t width, int64_t copies, int64_t active,
               R role, const char* gate, const char* up, const char* down) {
  out.Add({gate, E, width, copies, active, S::kColumn, role});
  out.Add({up, E, width, copies, active, S::kColumn, role, true});
  out.Add({down, width, E, copies, active, S::kRow, role});
}

}  // namespace

BlockLinears LlamaBlockLinears(const ModelSpec& m, bool moe_layer) {
  BlockLinears out;
  AddAttention(m, out);
  const int64_t E = m.hidden;
  if (!moe_layer) {
    if (m.gated_ffn()) {
      AddSwiGlu(out, E, m.ffn_hidden, 1, 1, R::kDenseFfn, "w_gate", "w_up", "w_down");
    } else {  // squared-relu: up (column) and down (row)
      out.Add({"w_up", E, m.ffn_hidden, 1, 1, S::kColumn, R::kDenseFfn});
      out.Add({"w_down", m.ffn_hidden, E, 1, 1, S::kRow, R::kDenseFfn});
    }
    return out;
  }
  const MoeSpec& moe = m.moe;
  out.Add({"router", E, moe.experts, 1, 1, S::kReplicated, R::kRouter});
  AddSwiGlu(out, E, moe.expert_ffn_hidden, moe.experts, moe.top_k, R::kRoutedExpert,
            "experts.w_gate", "experts.w_up", "experts.w_down");
  if (moe.shared_experts > 0)
    AddSwiGlu(out, E, moe.expert_ffn_hidden, moe.shared_experts, moe.shared_experts,
              R::kSharedExpert, "shared.w_gate", "shared.w_up", "shared.w_down");
  return out;
}

BlockLinears GptBlockLinears(const ModelSpec& m) {
  const int64_t E = m.hidden, F = m.ffn_hidden;
  BlockLinears out;
  out.Add({"wqkv", E, E + 2 * m.kv_hidden(), 1, 1, S::kColumn, R::kAttention});
  out.Add({"wo", E, E, 1, 1, S::kRow, R::kAttention});
  out.Add({"fc1", E, F, 1, 1, S::kColumn, R::kDenseFfn});
  out.Add({"fc2", F, E, 1, 1, S::kRow, R::kDenseFfn});
  return out;
}

BlockLinears BlockLinearsOf(const ModelSpec& m, bool moe_layer) {
  return m.block == BlockKind::kGpt ? GptBlockLinears(m) : LlamaBlockLinears(m, moe_layer);
}

double ExpertRowsPerToken(const ModelSpec& m) {
  const double k = static_cast<double>(m.moe.top_k);
  return m.moe.capacity_factor > 0 ? k * m.moe.capacity_factor : k;
}

int64_t LlamaBlockVectorParams(const ModelSpec& m, bool moe_layer) {
  int64_t n = 2 * m.hidden;                  // attention_norm, ffn_norm
  if (m.qk_norm) n += 2 * m.head_dim();      // q_norm, k_norm (shared over heads)
  if (m.mla.enabled()) n += m.mla.q_lora_rank + m.mla.kv_lora_rank;  // latent norms
  if (moe_layer && m.moe.router_bias) n += m.moe.experts;
  return n;
}

int64_t GptBlockVectorParamsPerTpRank(const ModelSpec& m, int64_t tp) {
  const int64_t E = m.hidden;
  return (E + 2 * m.kv_hidden()) / tp + m.ffn_hidden / tp  // qkv, fc1 biases
         + 2 * E                                           // o, fc2 biases
         + 4 * E;                                          // two LayerNorms
}

}  // namespace meshplan
