// Training data: a stream of sequences of S+1 token ids (inputs = the first S, targets =
// the last S), and each rank's share of every global batch.
//
// Sequence n of the stream is a pure function of n (no iterator state), so a resumed run
// continues from its step count alone. Global batch `step` (0-based) is sequences
// [step * G, (step+1) * G), G = global_batch; dp rank r takes the contiguous G/dp of them
// starting at r * G/dp, split into micro-batches of B = micro_batch sequences in order.
// The union over ranks and micro-batches is exactly the single-process batch.
// Sources: synthetic (the default, identical on every machine) or a token file of uint16 /
// uint32 ids; a bad file (missing, a size not a multiple of the id width, fewer windows than
// one global batch, an id >= V) throws InputError naming the file.
// Thread-safe for concurrent reads (const, pread). Sources: docs/executor_internals.md#data.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>

#include "executor/token_file.h"

namespace meshplan {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Writes sequence n (S+1 ids, each in [0, V)) to out.
  virtual void Sequence(int64_t n, int64_t* out) const = 0;
  virtual int64_t seq_len() const = 0;  // S
};

std::unique_ptr<TokenSource> MakeSyntheticTokens(uint64_t seed, int64_t vocab, int64_t seq_len);

// min_sequences: the windows one global batch needs (the file's checks: token_file.h).
std::unique_ptr<TokenSource> OpenTokenFile(const std::string& path, TokenDtype dtype,
                                           int64_t vocab, int64_t seq_len, int64_t min_sequences);

// Which sequences a rank's micro-batch holds (see the header comment).
struct BatchShard {
  int64_t global_batch = 1;  // G
  int64_t dp_rank = 0;
  int64_t dp_size = 1;
  int64_t micro_batch = 1;   // B
  int64_t microbatches() const { return global_batch / (dp_size * micro_batch); }
  int64_t FirstSequence(int64_t step, int64_t micro_index) const {
    return step * global_batch + dp_rank * (global_batch / dp_size) + micro_index * micro_batch;
  }
};

// (B, S+1) int64 ids of micro-batch `micro_index` of global batch `step` on this rank.
at::Tensor MicroBatchTokens(const TokenSource& source, const BatchShard& shard, int64_t step,
                            int64_t micro_index);

}  // namespace meshplan
