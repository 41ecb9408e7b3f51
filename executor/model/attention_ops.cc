// RoPE, head split/merge and the naive causal attention core (see ops.h for the memory
// contract). Grouped-query attention views q (B,H,S,D) as (B,K,G*S,D): query head
// h = kv * G + g uses kv head kv, so one batched matmul per kv head covers its G query
// heads and K/V are never repeated.
#include <cmath>
#include <limits>
#include <vector>

#include "executor/model/ops.h"

namespace meshplan {

// ---------------------------------------------------------------------------------------
// Token order: a token-major tensor is (B,S,n*D) (chunks == 1) or chunk-major
// (c,B,S/c,n*D). Both are viewed as (B,n,c,S/c,D), which is (B,n,S,D) in natural order.

namespace {

at::Tensor HeadsView(const at::Tensor& x, int64_t n_heads, int64_t chunks) {
  if (chunks == 1) {
    TORCH_CHECK(x.dim() == 3, "expected a (B,S,n*D) tensor");
    return x.view({1, x.size(0), x.size(1), n_heads, -1}).permute({1, 3, 0, 2, 4});
  }
  TORCH_CHECK(x.dim() == 4 && x.size(0) == chunks, "expected a chunk-major (c,B,S/c,n*D) tensor");
  return x.view({chunks, x.size(1), x.size(2), n_heads, -1}).permute({1, 3, 0, 2, 4});
}

// The token-major shape of a head-major (B,n,S,D) tensor.
std::vector<int64_t> TokenMajorShape(const at::Tensor& heads, int64_t chunks) {
  const int64_t B = heads.size(0), n = heads.size(1), S = heads.size(2), D = heads.size(3);
  if (chunks == 1) return {B, S, n * D};
  return {chunks, B, S / chunks, n * D};
}

}  // namespace

// ---------------------------------------------------------------------------------------
// RoPE: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin (x1, x2 the two halves of a head).

at::Tensor RopeForward(const at::Tensor& x, int64_t n_heads, const at::Tensor& cos,
                       const at::Tensor& sin, int64_t chunks) {
  const at::Tensor xv = HeadsView(x, n_heads, chunks);  // (B,n,c,S/c,D) view
  const int64_t B = xv.size(0), s = xv.size(3), D = xv.size(4), h = D / 2;
  at::Tensor y = at::empty({B, n_heads, chunks * s, D}, x.options());  // contiguous
  const at::Tensor yv = y.view({B, n_heads, chunks, s, D});
  // The tables in x's dtype (LlamaModel keeps them so: then no copy).
  const at::Tensor c = cos.view({chunks, s, h}).to(x.scalar_type());
  const at::Tensor sn = sin.view({chunks, s, h}).to(x.scalar_type());
  const at::Tensor x1 = xv.narrow(-1, 0, h), x2 = xv.narrow(-1, h, h);
  at::Tensor y1 = yv.narrow(-1, 0, h), y2 = yv.narrow(-1, h, h);
  at::mul_out(y1, x1, c);
  y1.addcmul_(x2, sn, -1.0);
  at::mul_out(y2, x2, c);
  y2.addcmul_(x1, sn, 1.0);
  return y;
}

at::Tensor RopeBackward(const at::Tensor& dy, const at::Tensor& cos, const at::Tensor& sin,
                        int64_t chunks) {
  const int64_t B = dy.size(0), n = dy.size(1), S = dy.size(2), D = dy.size(3), h = D / 2;
  const int64_t s = S / chunks;
  at::Tensor dx = at::empty(TokenMajorShape(dy, chunks), dy.options());
  const at::Tensor dxv = HeadsView(dx, n, chunks);  // (B,n,c,S/c,D) view into dx
  const at::Tensor dyv = dy.view({B, n, chunks, s, D});
  // The tables in dy's dtype (LlamaModel keeps them so: then no copy).
  const at::Tensor c = cos.view({chunks, s, h}).to(dy.scalar_type());
  const at::Tensor sn = sin.view({chunks, s, h}).to(dy.scalar_type());
  const at::Tensor dy1 = dyv.narrow(-1, 0, h), dy2 = dyv.narrow(-1, h, h);
  at::Tensor dx1 = dxv.narrow(-1, 0, h), dx2 = dxv.narrow(-1, h, h);
  at::mul_out(dx1, dy1, c);  // dx1 = dy1 cos + dy2 sin
  dx1.addcmul_(dy2, sn, 1.0);
  at::mul_out(dx2, dy2, c);  // dx2 = dy2 cos - dy1 sin
  dx2.addcmul_(dy1, sn, -1.0);
  return dx;
}

at::Tensor SplitHeads(const at::Tensor& x, int64_t n_heads, int64_t chunks) {
  const at::Tensor xv = HeadsView(x, n_heads, chunks);  // (B,n,c,S/c,D)
  const int64_t B = xv.size(0), s = xv.size(3), D = xv.size(4);
  return xv.contiguous().view({B, n_heads, chunks * s, D});  // (B,n,S,D)
}

at::Tensor HeadsOf(const at::Tensor& x, int64_t n_heads, int64_t chunks) {
  const at::Tensor xv = HeadsView(x, n_heads, chunks);  // (B,n,c,S/c,D)
  return xv.reshape({xv.size(0), n_heads, chunks * xv.size(3), xv.size(4)});
}

at::Tensor MergeHeads(const at::Tensor& x, int64_t chunks) {
  const int64_t B = x.size(0), n = x.size(1), S = x.size(2), D = x.size(3);
  at::Tensor out = at::empty(TokenMajorShape(x, chunks), x.options());
  HeadsView(out, n, chunks).copy_(x.view({B, n, chunks, S / chunks, D}));
  return out;
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
