// ModelSpec: the shape of a decoder-only transformer (docs/cost_model.md section 1).
//
// Shape legend used across meshplan (planner, simulator, executor):
//   V vocab_size   E hidden   L layers   H heads   K kv_heads
//   F ffn_hidden   D = E / H (head dim)   S sequence   B micro-batch
// A plain value type; LoadModel() in planner/config/config_loader.h builds and validates it.
#pragma once

#include <cstdint>
#include <string>

namespace meshplan {

// llama: RMSNorm, RoPE, SwiGLU FFN (up, gate, down), no biases.
// gpt:   LayerNorm with bias, learned positions, GeLU MLP (E -> F -> E) with bias, dropout.
enum class BlockKind { kLlama, kGpt };

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

  int64_t head_dim() const { return hidden / heads; }         // D
  int64_t kv_hidden() const { return kv_heads * head_dim(); }  // K * D
  bool operator==(const ModelSpec&) const = default;
};

}  // namespace meshplan
