// RoPE, head split/merge and the naive causal attention core (see ops.h for the memory
// contract). Grouped-query attention views q (B,H,S,D) as (B,K,G*S,D): query head
// h = kv * G + g uses kv head kv, so one batched matmul per kv head covers its G query
// heads and K/V are never repeated.
#include <cmath>
#include <limits>

#include "executor/ops.h"

namespace meshplan {

// ---------------------------------------------------------------------------------------
// RoPE: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin (x1, x2 the two halves of a head).

at::Tensor RopeForward(const at::Tensor& x, int64_t n_heads, const at::Tensor& cos,
                       const at::Tensor& sin) {
  const int64_t B = x.size(0), S = x.size(1), D = x.size(2) / n_heads, h = D / 2;
  const at::Tensor xv = x.view({B, S, n_heads, D}).transpose(1, 2);  // (B,n,S,D) view
  at::Tensor y = at::empty({B, n_heads, S, D}, x.options());         // contiguous
  const at::Tensor x1 = xv.narrow(-1, 0, h), x2 = xv.narrow(-1, h, h);
  at::Tensor y1 = y.narrow(-1, 0, h), y2 = y.narrow(-1, h, h);
  at::mul_out(y1, x1, cos);
  y1.addcmul_(x2, sin, -1.0);
  at::mul_out(y2, x2, cos);
  y2.addcmul_(x1, sin, 1.0);
  return y;
}

at::Tensor RopeBackward(const at::Tensor& dy, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t B = dy.size(0), n = dy.size(1), S = dy.size(2), D = dy.size(3), h = D / 2;
  at::Tensor dx = at::empty({B, S, n * D}, dy.options());
  at::Tensor dxv = dx.view({B, S, n, D}).transpose(1, 2);  // (B,n,S,D) view into dx
  const at::Tensor dy1 = dy.narrow(-1, 0, h), dy2 = dy.narrow(-1, h, h);
  at::Tensor dx1 = dxv.narrow(-1, 0, h), dx2 = dxv.narrow(-1, h, h);
  at::mul_out(dx1, dy1, cos);  // dx1 = dy1 cos + dy2 sin
  dx1.addcmul_(dy2, sin, 1.0);
  at::mul_out(dx2, dy2, cos);  // dx2 = dy2 cos - dy1 sin
  dx2.addcmul_(dy1, sin, -1.0);
  return dx;
}

at::Tensor SplitHeads(const at::Tensor& x, int64_t n_heads) {
  const int64_t B = x.size(0), S = x.size(1), D = x.size(2) / n_heads;
  return x.view({B, S, n_heads, D}).transpose(1, 2).contiguous();  // (B,n,S,D)
}

at::Tensor MergeHeads(const at::Tensor& x) {
  const int64_t B = x.size(0), n = x.size(1), S = x.size(2), D = x.size(3);
  return x.transpose(1, 2).contiguous().view({B, S, n * D});  // (B,S,n*D)
}

// ---------------------------------------------------------------------------------------
// Attention core

at::Tensor AttentionProbs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& causal_mask) {
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3), K = k.size(1);
  const at::Tensor qg = q.view({B, K, H / K * S, D});                 // (B,K,G*S,D)
  at::Tensor scores = at::matmul(qg, k.transpose(-2, -1));            // (B,K,G*S,S)
  scores.mul_(1.0 / std::sqrt(static_cast<double>(D)));
  at::Tensor s4 = scores.view({B, H, S, S});
  s4.masked_fill_(causal_mask, -std::numeric_limits<double>::infinity());
  // Softmax in place over the last dim (the diagonal is never masked: no empty row).
  s4.sub_(std::get<0>(s4.max(-1, true))).exp_();
  s4.div_(s4.sum(-1, true));
  return s4;  // (B,H,S,S) probs
}

at::Tensor AttentionForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& causal_mask, at::Tensor* probs) {
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3), K = k.size(1);
  *probs = AttentionProbs(q, k, causal_mask);
  const at::Tensor pg = probs->view({B, K, H / K * S, S});
  return at::matmul(pg, v).view({B, H, S, D});  // (B,K,G*S,S) @ (B,K,S,D)
}

AttentionGrads AttentionBackward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, at::Tensor probs) {
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3), K = k.size(1);
  const int64_t GS = H / K * S;
  TORCH_CHECK(dout.is_contiguous(), "AttentionBackward: dout must be contiguous");
  const at::Tensor dout_g = dout.view({B, K, GS, D});
  AttentionGrads grads;
  {
    at::Tensor pg = probs.view({B, K, GS, S});
    grads.dv = at::matmul(pg.transpose(-2, -1), dout_g);          // (B,K,S,D), sums the G heads
    at::Tensor dscores = at::matmul(dout_g, v.transpose(-2, -1));  // (B,K,G*S,S): dprobs
    // Softmax backward: dscores = probs * (dprobs - sum_j dprobs_j probs_j).
    const at::Tensor row = at::mul(dscores, pg).sum(-1, true);    // temporary freed here
    dscores.sub_(row).mul_(pg);
    pg.reset();
    probs.reset();  // the caller moved its only reference in: freed now
    dscores.mul_(1.0 / std::sqrt(static_cast<double>(D)));
    grads.dq = at::matmul(dscores, k).view({B, H, S, D});                     // (B,H,S,D)
    grads.dk = at::matmul(dscores.transpose(-2, -1), q.view({B, K, GS, D}));  // (B,K,S,D)
  }
  return grads;
}

}  // namespace meshplan
