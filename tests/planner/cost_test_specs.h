// In-code specs for the cost-model tests, so they do not depend on configs/ files.
#pragma once

#include "planner/cluster_spec.h"
#include "planner/model_spec.h"
#include "planner/training_spec.h"

namespace meshplan::testing {

// docs/cost_model.md section 1: Llama-style, V = 50257, F = 1.5 E, untied unless asked.
inline ModelSpec SpecLlama(int64_t E, int64_t H, int64_t L, int64_t F, bool tied = false) {
  ModelSpec m;
  m.name = "spec-llama";
  m.vocab_size = 50257;
  m.hidden = E;
  m.heads = H;
  m.kv_heads = H;
  m.layers = L;
  m.ffn_hidden = F;
  m.tied_embeddings = tied;
  return m;
}
inline ModelSpec Spec7b() { return SpecLlama(4096, 32, 48, 6144); }

// An H100-SXM-like GPU (data-sheet numbers) in nodes of `gpus_per_node`,
// NVLink inside a node, 50 GB/s per GPU between nodes.
inline ClusterSpec H100Cluster(int64_t nodes, int64_t gpus_per_node = 8) {
  ClusterSpec c;
  c.name = "test-h100";
  c.gpu.name = "h100";
  c.gpu.memory_bytes = 80'000'000'000;
  c.gpu.peak_flops_fp32 = 66.9e12;
  c.gpu.peak_flops_bf16 = 989.4e12;
  c.gpu.memory_bandwidth_Bps = 3.35e12;
  c.gpu.kernel_overhead_s = 4e-6;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.intra_node = {"nvlink", 450e9, 3e-6};
  c.inter_node = {"ib", 50e9, 6e-6};
  return c;
}

inline TrainingSpec Training(int64_t global_batch, int64_t seq,
                             Precision precision = Precision::kMixed) {
  TrainingSpec t;
  t.global_batch = global_batch;
  t.seq_len = seq;
  t.precision = precision;
  return t;
}

}  // namespace meshplan::testing
