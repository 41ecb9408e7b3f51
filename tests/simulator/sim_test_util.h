// Small setups for the simulator tests: a tiny Llama, a GPU without kernel overhead, and
// clusters whose network is free (huge bandwidth, no latency) or chosen by the test.
#pragma once

#include <cstdint>

#include "planner/cluster_spec.h"
#include "planner/cost/step_work.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan::test {

inline ModelSpec TinyLlama(int64_t layers = 8) {
  ModelSpec m;
  m.name = "tiny";
  m.vocab_size = 1024;
  m.hidden = 256;
  m.layers = layers;
  m.heads = 8;
  m.kv_heads = 4;
  m.ffn_hidden = 768;
  return m;
}

inline GpuSpec TestGpu(double kernel_overhead_s = 0) {
  GpuSpec g;
  g.name = "test-gpu";
  g.memory_bytes = int64_t{80} << 30;
  g.peak_flops_fp32 = 5e13;
  g.peak_flops_bf16 = 1e15;
  g.memory_bandwidth_Bps = 3e12;
  g.kernel_overhead_s = kernel_overhead_s;
  return g;
}

// `nodes` x `gpus_per_node` GPUs; intra/inter-node bandwidth (bytes/s) and latency (s).
inline ClusterSpec TestCluster(int64_t nodes, int64_t gpus_per_node, double intra_Bps,
                               double inter_Bps, double latency_s = 0,
                               double kernel_overhead_s = 0) {
  ClusterSpec c;
  c.name = "test";
  c.gpu = TestGpu(kernel_overhead_s);
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.intra_node = {"fast", intra_Bps, latency_s};
  c.inter_node = {"slow", inter_Bps, latency_s};
  return c;
}

// Communication that costs (next to) nothing.
inline ClusterSpec FreeNetwork(int64_t nodes, int64_t gpus_per_node) {
  return TestCluster(nodes, gpus_per_node, 1e30, 1e30, 0);
}

inline TrainingSpec Training(int64_t global_batch, int64_t seq = 128) {
  TrainingSpec t;
  t.global_batch = global_batch;
  t.seq_len = seq;
  t.precision = Precision::kMixed;
  return t;
}

// Equal pipeline stages: no embedding or head work, no optimizer.
inline StepWork EqualStages(StepWork work) {
  work.embedding = PartWork{};
  work.head = PartWork{};
  work.optimizer_bytes_per_param = 0;
  return work;
}

}  // namespace meshplan::test
