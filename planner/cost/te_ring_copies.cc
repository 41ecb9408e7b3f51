#include "planner/cost/te_ring_copies.h"

namespace meshplan {

// Rank r of cp holds the sequence halves r and 2cp-1-r. Forward step i runs its kernel on the
// kv received i hops away: step 0 the local causal block; for 0 < i <= r, half of kv (the
// first half of what arrived: kv[:, 0].contiguous()); for i > r, the second half of q
// (q[1].contiguous()). After the ring, out = zeros, then flash_attn_fwd_out_correction adds
// each step's output rescaled by its softmax statistics (one fused pass: read out and the
// step's output, write out), over all of q where i <= r and its second half elsewhere. The
// backward walks the ring in reverse with its own copies (TE's branches, line for line below).
TeRingCopies TeRingAttentionCopies(int64_t cp, double q, double kv, double element_bytes,
                                   bool cudnn) {
  const double a = element_bytes;
  auto copy = [a](double n) { return OpPass{2 * a * n, 1}; };  // read + write n elements
  auto add = [a](double n) { return OpPass{3 * a * n, 1}; };   // x.add_(y): read 2, write 1
  TeRingCopies sum;
  for (int64_t r = 0; r < cp; ++r) {
    OpPass fwd = copy(kv);                    // p2p_comm_buffers[0] = torch.cat((k, v))
    fwd += OpPass{a * q, 1};                  // out = torch.empty_like(q).zero_()
    for (int64_t i = 0; i < cp; ++i) {
      if (i > 0) fwd += i <= r ? copy(kv / 2) : copy(q / 2);  // the step's half, contiguous
      fwd += i <= r ? add(q) : add(q / 2);                   // the output correction
    }
    OpPass bwd = copy(kv);                    // p2p_comm_buffers[0][0].copy_(kv)
    for (int64_t i = 0; i < cp; ++i) {
      const bool diagonal = i == cp - 1;
      const bool kv_half = !diagonal && i >= cp - 1 - r;
      const bool q_half = !diagonal && !kv_half;
      if (kv_half) bwd += copy(kv / 2);                     // kv[:, 0].contiguous()
      if (q_half) {                                         // q[1], out[1], dout[1] .contiguous()
        bwd += copy(q / 2);
        bwd += copy(q / 2);
        bwd += copy(q / 2);
      }
      // dq: the step's gradient added into (or copied to) the rank's dq.
      if (i > cp - 1 - r) {
        bwd += add(q);
      } else if (i == cp - 1 - r) {
        if (r == cp - 1) {
          bwd += copy(q);
        } else {
          bwd += copy(q / 2);
          bwd += add(q / 2);
        }
      } else {
        bwd += i > 0 ? add(q / 2) : copy(q / 2);
      }
      // dk, dv: FusedAttention returns them apart (torch.cat), then into the ring's buffer.
      const double dkv = kv_half ? kv / 2 : kv;
      if (cudnn) bwd += copy(dkv);
      if (diagonal) {
        if (r == 0) {
          bwd += add(kv / 2);
          bwd += copy(kv / 2);
        } else {
          bwd += add(kv);
        }
      } else if (kv_half) {
        bwd += i == 0 && r == cp - 1 ? copy(kv / 2) : add(kv / 2);
      } else {
        bwd += i > 0 ? add(kv) : copy(kv);
      }
    }
    sum.forward += fwd;
    sum.backward += bwd;
  }
  const double ranks = static_cast<double>(cp);
  sum.forward.bytes /= ranks;
  sum.backward.bytes /= ranks;
  sum.forward.kernels = (sum.forward.kernels + cp - 1) / cp;
  sum.backward.kernels = (sum.backward.kernels + cp - 1) / cp;
  return sum;
}

}  // namespace meshplan
