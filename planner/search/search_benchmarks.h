// The two plan-search benchmark setups (`meshplan search --bench` and
// tests/bench/): large models on large clusters, searched exhaustively.
//
//  (a) MT-NLG 530B (GPT block, 105 layers, hidden 20480, 128 heads) on 5,120 A100 80GB
//      (640 DGX A100 nodes): global batch 1920 sequences of 2048 tokens, as in the
//      MT-NLG paper (Smith et al. 2022) at its final batch size.
//  (b) Llama 3.1 405B on 16,384 H100 (2,048 nodes): 2048 sequences of 8192 tokens
//      (16M tokens per step, the Llama 3 paper's pre-training batch at 8K context).
// Mixed precision, the detailed memory model, default headroom.
#pragma once

#include <cstdint>
#include <vector>

namespace meshplan {

struct SearchBenchmarkCase {
  const char* name;     // short label
  const char* model;    // configs/models name
  const char* cluster;  // configs/clusters name
  int64_t global_batch;
  int64_t seq_len;
};

inline std::vector<SearchBenchmarkCase> SearchBenchmarkCases() {
  return {{"mt-nlg-530b on 5120 A100", "mt-nlg-530b", "5120xa100-ib", 1920, 2048},
          {"llama3.1-405b on 16384 H100", "llama3.1-405b", "16384xh100-ib", 2048, 8192}};
}

}  // namespace meshplan
