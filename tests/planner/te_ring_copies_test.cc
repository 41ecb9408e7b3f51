// Transformer Engine 1.8's context-parallel ring copies (planner/cost/te_ring_copies.h): the
// per-rank branches of AttnFuncWithCP walked step by step against the closed form, summed by
// hand for cp = 2, the cuDNN backend's extra dk/dv concatenation and growth with cp. Their
// place in a block's op list: block_ops_test.cc.
#include <catch2/catch.hpp>

#include "planner/cost/te_ring_copies.h"

namespace meshplan {
namespace {

// TE 1.8's AttnFuncWithCP walked step by step for every rank, its branches as its code writes
// them (forward: the halves taken and the output corrections; backward: the halves made
// contiguous, the dq and dk/dv accumulations, FusedAttention's dk/dv cat): the bytes summed
// over the ranks. The model's closed form must equal their mean.
double WalkedBytes(int64_t cp, double q, double kv, double a, bool cudnn, bool backward) {
  auto copy = [a](double n) { return 2 * a * n; };
  auto add = [a](double n) { return 3 * a * n; };
  double sum = 0;
  for (int64_t r = 0; r < cp; ++r) {
    if (!backward) {
      sum += copy(kv) + a * q;  // torch.cat((k, v)); out zero-filled
      for (int64_t i = 0; i < cp; ++i) {
        if (i > 0) sum += i <= r ? copy(kv / 2) : copy(q / 2);
        sum += i <= r ? add(q) : add(q / 2);
      }
      continue;
    }
    sum += copy(kv);  // p2p_comm_buffers[0][0].copy_(kv)
    for (int64_t i = 0; i < cp; ++i) {
      const bool diagonal = i == cp - 1;
      const bool kv_half = !diagonal && i >= cp - 1 - r;
      const bool q_half = !diagonal && !kv_half;
      if (kv_half) sum += copy(kv / 2);
      if (q_half) sum += 3 * copy(q / 2);
      if (i > cp - 1 - r) sum += add(q);
      else if (i == cp - 1 - r) sum += r == cp - 1 ? copy(q) : copy(q / 2) + add(q / 2);
      else sum += i > 0 ? add(q / 2) : copy(q / 2);
      if (cudnn) sum += copy(kv_half ? kv / 2 : kv);
      if (diagonal) sum += r == 0 ? add(kv / 2) + copy(kv / 2) : add(kv);
      else if (kv_half) sum += i == 0 && r == cp - 1 ? copy(kv / 2) : add(kv / 2);
      else sum += i > 0 ? add(kv) : copy(kv);
    }
  }
  return sum;
}

TEST_CASE("TE's ring copies: the closed form is TE's branches, walked", "[planner][block_ops]") {
  const double a = 2, q = 1000, kv = 300;
  for (int64_t cp = 2; cp <= 16; ++cp) {
    for (const bool cudnn : {false, true}) {
      const TeRingCopies c = TeRingAttentionCopies(cp, q, kv, a, cudnn);
      CHECK(c.forward.bytes == Approx(WalkedBytes(cp, q, kv, a, cudnn, false) / cp));
      CHECK(c.backward.bytes == Approx(WalkedBytes(cp, q, kv, a, cudnn, true) / cp));
    }
  }
  const TeRingCopies none = TeRingAttentionCopies(1, q, kv, a, false);
  CHECK(none.forward.bytes == 0);
  CHECK(none.backward.bytes == 0);
}

TEST_CASE("TE's ring copies at cp = 2, rank by rank", "[planner][block_ops]") {
  const double a = 2, q = 1000, kv = 500;
  // Forward. Rank 0: the k/v cat (2a kv), out's zero fill (a q), step 0's correction over all
  // of q (3a q), step 1's half of q made contiguous (a q) and its correction over that half
  // (1.5a q): 2a kv + 6.5a q. Rank 1: step 1 takes half of kv instead (a kv) and corrects all
  // of q (3a q): 3a kv + 7a q. Mean: 2.5a kv + 6.75a q.
  // Backward. Rank 0: kv's copy into the ring buffer (2a kv); step 0 copies the second halves
  // of q, out and dout (3a q), copies its half of dq (a q) and all of dkv (2a kv); step 1 (the
  // diagonal) copies half of dq and adds the other (2.5a q), adds and copies halves of dkv
  // (2.5a kv): 6.5a kv + 6.5a q. Rank 1: 2a kv; step 0 copies half of kv (a kv), all of dq
  // (2a q), half of dkv (a kv); step 1 adds dq (3a q) and dkv (3a kv): 7a kv + 5a q.
  // Mean: 6.75a kv + 5.75a q.
  const TeRingCopies flash = TeRingAttentionCopies(2, q, kv, a, /*cudnn=*/false);
  CHECK(flash.forward.bytes == Approx(a * (2.5 * kv + 6.75 * q)));
  CHECK(flash.backward.bytes == Approx(a * (6.75 * kv + 5.75 * q)));
  // cuDNN's FusedAttention returns dk and dv apart: torch.cat per step, all of kv at steps
  // where the rank's gradient is whole, half where it took half of kv (rank 1, step 0).
  const TeRingCopies cudnn = TeRingAttentionCopies(2, q, kv, a, /*cudnn=*/true);
  CHECK(cudnn.forward.bytes == Approx(flash.forward.bytes));
  CHECK(cudnn.backward.bytes == Approx(flash.backward.bytes + a * 3.5 * kv));
  CHECK(flash.forward.kernels > 0);
  CHECK(flash.backward.kernels > flash.forward.kernels);
  // More ranks, more steps: each corrects, copies halves and accumulates once more.
  const TeRingCopies wider = TeRingAttentionCopies(4, q, kv, a, false);
  CHECK(wider.forward.bytes > flash.forward.bytes);
  CHECK(wider.backward.bytes > flash.backward.bytes);
}

}  // namespace
}  // namespace meshplan
