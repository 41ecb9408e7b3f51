// Fixed setups for the fuzz targets (no file access): a 7B Llama and a node of H100-like
// GPUs, and the analytic estimate of what a target loaded, so the cost model's int64 and
// double arithmetic runs on fuzzed models, clusters and plans under UBSan too.
#pragma once

#include <algorithm>
#include <cstdint>

#include "planner/cluster_spec.h"
#include "planner/cost/cost_model.h"
#include "planner/figure_check.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan::fuzz {

inline ModelSpec Llama7b() {
  ModelSpec m;
  m.name = "fuzz-7b";
  m.vocab_size = 32000;
  m.hidden = 4096;
  m.layers = 32;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 11008;
  m.max_seq = 4096;
  return m;
}

inline ClusterSpec H100Node() {
  ClusterSpec c;
  c.name = "fuzz-8xgpu";
  c.nodes = 1;
  c.gpus_per_node = 8;
  c.gpu.name = "fuzz-gpu";
  c.gpu.memory_bytes = 80LL << 30;
  c.gpu.peak_flops_fp32 = 67e12;
  c.gpu.peak_flops_tf32 = 495e12;
  c.gpu.peak_flops_bf16 = 989e12;
  c.gpu.memory_bandwidth_Bps = 3.35e12;
  c.intra_node = {"nvlink", 450e9, 3e-6};
  c.inter_node = {"ib", 50e9, 5e-6};
  return c;
}

// The estimate of `plan` when it is valid for this setup (what `meshplan estimate` does),
// with the check every command makes before it prints: a figure that is not finite or is
// negative throws FigureError (planner/figure_check.h), which the fuzzer reports as a
// finding, since the loaders' bounds (docs/limits.md) should make one impossible.
inline void EstimateIfValid(const ModelSpec& model, const ClusterSpec& cluster,
                            const TrainingSpec& training, const ParallelPlan& plan) {
  if (Validate(plan, model, training, cluster.world_size()).empty())
    CheckFigures(Estimate(model, cluster, training, plan), "a fuzzed input");
}

// A loaded model, estimated as plain data parallel on one node with a short sequence.
inline void EstimateModel(const ModelSpec& model) {
  TrainingSpec training;
  training.global_batch = 8;
  training.seq_len = model.max_seq > 0 ? std::min<int64_t>(model.max_seq, 128) : 128;
  ParallelPlan plan;
  plan.dp = 8;
  EstimateIfValid(model, H100Node(), training, plan);
}

}  // namespace meshplan::fuzz
