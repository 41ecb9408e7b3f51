// ModelSpec: the shape of a decoder-only transformer (docs/cost_model.md section 1).
//
// Shape legend used across meshplan (planner, simulator, executor):
//   V vocab_size   E hidden   L layers   H heads   K kv_heads
//   F ffn_hidden   D head dim (E / H unless set on its own)   S sequence   B micro-batch
// Mixtures of experts (MoeSpec):
//   X routed experts   k experts per token (top-k)   Xs shared experts
//   Fe expert FFN width   Ld first layers with a dense FFN (the other L - Ld are MoE)
// Multi-head latent attention (MlaSpec, DeepSeek-V2/V3):
//   Rq q low rank   Rkv kv low rank   Dr RoPE part of a q/k head   Dv value head dim
// A plain value type; LoadModel() in planner/config/config_loader.h builds and validates it.
#pragma once

#include <cstdint>
#include <string>

namespace meshplan {

// llama: RMSNorm, RoPE, SwiGLU FFN (up, gate, down), no biases.
// gpt:   LayerNorm with bias, learned positions, GeLU MLP (E -> F -> E) with bias, dropout.
enum class BlockKind { kLlama, kGpt };

// The dense FFN of a llama block: swiglu, gated (w_down(silu(w_gate x) * w_up x), three
// matrices); squared-relu, not gated (w_down(relu(w_up x)^2), two matrices: Nemotron,
// Megatron's --squared-relu).
enum class FfnActivation { kSwiGlu, kSquaredRelu };

// The default load imbalance u of dropless routing over ep ranks (the busiest rank's routed
// rows over the mean; planner/cost/expert_parallel.h): 1.25, the capacity factor Switch
// Transformer trains with (Fedus et al. 2021, arXiv:2101.03961, section 2.2 and Table 1:
// capacity factor 1.25 keeps dropped tokens low), i.e. the headroom over the even share that
// a load-balanced router is provisioned for. A convention, not a measurement of a model:
// set moe.load_imbalance from your own routing statistics.
inline constexpr double kDefaultLoadImbalance = 1.25;

// A mixture-of-experts FFN (llama blocks only): a router (E x X, softmax, top-k), X routed
// SwiGLU experts of width Fe of which k run per token, and Xs shared SwiGLU experts of
// width Fe that run for every token. experts == 0: a dense model.
struct MoeSpec {
  int64_t experts = 0;            // X
  int64_t top_k = 0;              // k, 1 <= k <= X
  int64_t shared_experts = 0;     // Xs
  int64_t expert_ffn_hidden = 0;  // Fe
  int64_t dense_layers = 0;       // Ld: the first Ld layers keep the dense FFN of width F
  bool router_bias = false;       // a per-expert bias on the router (DeepSeek-V3's noaux_tc)
  // Tokens an expert takes, as a multiple of its even share T*k/X; 0: dropless (every
  // routed token is computed). Sets the dispatch buffers (docs/memory_model.md).
  double capacity_factor = 0;
  // Dropless with expert parallelism (ep > 1): the busiest ep rank's routed rows over the
  // mean, >= 1 (u; planner/cost/expert_parallel.h). Capped at ep when applied.
  double load_imbalance = kDefaultLoadImbalance;
  bool enabled() const { return experts > 0; }
  bool operator==(const MoeSpec&) const = default;
};

// Multi-head latent attention (DeepSeek-V2/V3): q = Wq_b norm(Wq_a x) (Rq: low-rank q;
// 0: a full-rank E x H*D Wq), [c_kv, k_rope] = Wkv_a x, [k_nope, v] = Wkv_b norm(c_kv).
// A q/k head is D = (D - Dr) "nope" + Dr RoPE elements; v heads are Dv wide.
// kv_lora_rank == 0: not MLA.
struct MlaSpec {
  int64_t q_lora_rank = 0;    // Rq
  int64_t kv_lora_rank = 0;   // Rkv
  int64_t rope_head_dim = 0;  // Dr
  int64_t v_head_dim = 0;     // Dv
  bool enabled() const { return kv_lora_rank > 0; }
  bool operator==(const MlaSpec&) const = default;
};

struct ModelSpec {
  std::string name;
  int64_t vocab_size = 0;       // V
  int64_t hidden = 0;           // E
  int64_t layers = 0;           // L
  int64_t heads = 0;            // H
  int64_t kv_heads = 0;         // K (== H for multi-head attention)
  int64_t ffn_hidden = 0;       // F
  bool tied_embeddings = false; // lm_head shares the embedding matrix
  BlockKind block = BlockKind::kLlama;
  int64_t max_seq = 0;          // longest sequence the model supports (0 = unbounded)
  int64_t attention_head_dim = 0;  // D set on its own (Qwen3, Gemma, MLA); 0: D = E / H
  bool qk_norm = false;            // RMSNorm over each q and k head (Qwen3), weights of D
  FfnActivation ffn_activation = FfnActivation::kSwiGlu;  // llama blocks' dense FFN
  MoeSpec moe;
  MlaSpec mla;

  int64_t head_dim() const { return attention_head_dim > 0 ? attention_head_dim : hidden / heads; }  // D
  int64_t v_head_dim() const { return mla.enabled() ? mla.v_head_dim : head_dim(); }  // Dv
  int64_t q_hidden() const { return heads * head_dim(); }      // H * D: q and attention-output width
  int64_t kv_hidden() const { return kv_heads * head_dim(); }  // K * D
  bool gated_ffn() const { return ffn_activation == FfnActivation::kSwiGlu; }
  // Layers whose FFN is a mixture of experts (L - Ld), and dense ones (Ld, or L).
  int64_t moe_layers() const { return moe.enabled() ? layers - moe.dense_layers : 0; }
  int64_t dense_ffn_layers() const { return layers - moe_layers(); }
  // Layer `index` (0-based) has the MoE FFN.
  bool IsMoeLayer(int64_t index) const { return moe.enabled() && index >= moe.dense_layers; }
  bool operator==(const ModelSpec&) const = default;
};

}  // namespace meshplan
