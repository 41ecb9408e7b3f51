// The zigzag context-parallel split (see context_split.h).
#include "executor/parallel/context_split.h"

#include <stdexcept>
#include <string>

namespace meshplan {

at::Tensor LocalPositions(int64_t seq_len, int64_t cp, int64_t rank) {
  if (cp < 1 || seq_len % (2 * cp) != 0)
    throw std::invalid_argument("LocalPositions: the sequence " + std::to_string(seq_len) +
                                " is not a multiple of 2*cp = " + std::to_string(2 * cp));
  if (rank < 0 || rank >= cp)
    throw std::invalid_argument("LocalPositions: rank " + std::to_string(rank) +
                                " is outside cp = " + std::to_string(cp));
  const int64_t c = seq_len / (2 * cp);
  const at::Tensor early = at::arange(rank * c, (rank + 1) * c, at::kLong);
  const at::Tensor late = at::arange((2 * cp - 1 - rank) * c, (2 * cp - rank) * c, at::kLong);
  return at::cat({early, late});
}

at::Tensor SelectLocalTokens(const at::Tensor& full, int64_t cp, int64_t rank) {
  if (cp == 1) return full;
  const at::Tensor positions = LocalPositions(full.size(1), cp, rank).to(full.device());
  return at::index_select(full, 1, positions);  // (B,Sc), contiguous
}

}  // namespace meshplan
