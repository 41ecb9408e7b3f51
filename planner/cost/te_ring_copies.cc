#include "planner/cost/te_ring_copies.h"

namespace meshplan {

// Rank r of c holds the sequence halves r and 2c-1-r. Forward step i runs its kernel on the
// k and v received i hops away: step 0 the local causal block; for 0 < i <= r half of kv (the
// first half of what arrived, kv[:, 0].contiguous()); for i > r the second half of q
// (q[1].contiguous()). After the ring, out = zeros, then flash_attn_fwd_out_correction adds each
// step's output rescaled by its softmax statistics (one fused pass: read out and the step's
// output, write out) over all of q where i <= r, its second half elsewhere. The backward walks
// the ring in reverse: the diagonal step last; the r steps before it on half of kv; the c-1-r
// first ones on the second halves of q, out and dout. Each step's dq is copied into or added to
// the rank's dq, and its dk, dv into the ring's buffer (FusedAttention: first torch.cat'ed),
// whole or half as TE's branches say. The sums over r below add those branches up per rank
// (tests/planner/te_ring_copies_test.cc walks them step by step and checks these sums); a copy
// of n elements reads and writes them, 2a n; an in-place add reads two and writes one, 3a n.
TeRingCopies TeRingAttentionCopies(int64_t cp, double q, double kv, double element_bytes,
                                   bool cudnn) {
  TeRingCopies out;
  if (cp < 2) return out;
  const double a = element_bytes, c = static_cast<double>(cp);
  const double pairs = c * (c - 1) / 2;        // sum of r over the ranks
  const double later = (c - 1) * (c - 2) / 2;  // sum of (r - 1) over r >= 1
  // Forward, summed over the ranks: the k/v cat, out's zero fill, step 0's correction; then per
  // later step a half of kv and a whole correction (r steps) or a half of q and a half
  // correction (c-1-r steps).
  const double fwd = c * (2 * a * kv + a * q + 3 * a * q) + pairs * (a * kv + 3 * a * q) +
                     pairs * (a * q + 1.5 * a * q);
  // Backward, summed over the ranks.
  double bwd = c * 2 * a * kv;                                // kv into the ring's buffer
  bwd += 2.5 * a * q + 3 * a * q * (c - 1);                   // diagonal: dq (rank 0: half each)
  bwd += 2.5 * a * kv + 3 * a * kv * (c - 1);                 // diagonal: dkv (rank 0 likewise)
  bwd += pairs * a * kv;                                      // kv halves made contiguous
  bwd += 3 * a * q * later + 2.5 * a * q * (c - 2) + 2 * a * q;  // dq on the kv-half steps
  bwd += a * kv + 1.5 * a * kv * (c - 2) + 1.5 * a * kv * later;  // dkv on the kv-half steps
  bwd += 3 * a * q * pairs;                                   // q, out, dout halves made contiguous
  bwd += (c - 1) * a * q + 1.5 * a * q * later;               // dq on the q-half steps
  bwd += 2 * a * kv * (c - 1) + 3 * a * kv * later;           // dkv on the q-half steps
  if (cudnn) bwd += 2 * a * kv * c + 3 * a * kv * pairs;      // torch.cat of dk and dv per step
  out.forward = {fwd / c, 3 + 2 * (cp - 1)};
  // Launches per rank: the buffer copy, the diagonal's two accumulations, about four per other
  // step (its copies and accumulations), and cuDNN's cat per step.
  out.backward = {bwd / c, 3 + 4 * (cp - 1) + (cudnn ? cp : 0)};
  return out;
}

}  // namespace meshplan
