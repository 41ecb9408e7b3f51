// TrainingSpec: what is trained per step, independent of how it is split.
#pragma once

#include <cstdint>
#include <string>

namespace meshplan {

// bf16:  params, grads, Adam m and v all bf16 (the blog's regime).
// mixed: bf16 params and grads + fp32 master params, m and v (ZeRO paper's 16 bytes/param).
// fp32:  everything fp32 (what the executor trains in on CPU).
enum class Precision { kBf16, kMixed, kFp32 };

struct TrainingSpec {
  int64_t global_batch = 0;     // sequences per optimizer step, over all data-parallel ranks
  int64_t seq_len = 0;          // S, tokens per sequence
  Precision precision = Precision::kMixed;
  int64_t steps = 10;           // optimizer steps (executor)
  double learning_rate = 3e-4;  // AdamW (the only optimizer)

  int64_t tokens_per_step() const { return global_batch * seq_len; }
  bool operator==(const TrainingSpec&) const = default;
};

}  // namespace meshplan
