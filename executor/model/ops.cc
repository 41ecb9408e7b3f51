// Embedding, RMSNorm, Linear, SwiGLU, residual and cross-entropy (see ops.h for the
// memory contract of each; the comments here say how it is kept).
#include "executor/model/ops.h"

#include <cmath>

namespace meshplan {

// ---------------------------------------------------------------------------------------
// Embedding

at::Tensor EmbeddingForward(const at::Tensor& ids, const at::Tensor& wte) {
  const int64_t B = ids.size(0), S = ids.size(1), E = wte.size(1);
  return at::index_select(wte, 0, ids.reshape({-1})).view({B, S, E});  // (B,S,E)
}

void EmbeddingBackward(const at::Tensor& dx, const at::Tensor& ids, at::Tensor& dwte) {
  const int64_t E = dwte.size(1);
  dwte.index_add_(0, ids.reshape({-1}), dx.reshape({-1, E}));  // rows += dx, in place
}

// ---------------------------------------------------------------------------------------
// RMSNorm

at::Tensor RMSNormForward(const at::Tensor& x, const at::Tensor& w, at::Tensor* rstd) {
  const int64_t E = x.size(-1);
  // ||x||_2 over E is a reduction: no (B,S,E) temporary (x.pow(2) would allocate one).
  at::Tensor norm = at::linalg_vector_norm(x, 2, {-1}, /*keepdim=*/false, at::kFloat);  // (B,S)
  *rstd = norm.square_().div_(static_cast<double>(E)).add_(kRmsNormEps).rsqrt_();
  at::Tensor y = at::empty_like(x);  // (B,S,E)
  at::mul_out(y, x, rstd->unsqueeze(-1).to(x.scalar_type()));  // rstd in act: (B,S,1)
  y.mul_(w);
  return y;
}

at::Tensor RMSNormBackward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& rstd,
                           const at::Tensor& w, at::Tensor& dw) {
  const int64_t E = x.size(-1);
  const at::Tensor r = rstd.unsqueeze(-1).to(x.scalar_type());  // (B,S,1) in act
  at::Tensor xhat = at::empty_like(x);      // (B,S,E) temporary, in act (not promoted to fp32)
  at::mul_out(xhat, x, r);
  at::Tensor dx = at::mul(dy, xhat);        // (B,S,E): first holds dy * xhat
  dw.add_(dx.reshape({-1, E}).sum(0, /*keepdim=*/false, at::kFloat));  // dw += sum_{B,S} dy * xhat
  // c = mean_E(dxhat * xhat) with dxhat = dy * w, i.e. (dy * xhat) @ w / E: no temporary.
  at::Tensor c = at::matmul(dx, w).div_(static_cast<double>(E)).unsqueeze(-1);  // (B,S,1)
  at::mul_out(dx, dy, w);                   // dx buffer now holds dxhat
  xhat.mul_(c);
  dx.sub_(xhat).mul_(r);                    // dx = rstd * (dxhat - xhat * c)
  return dx;
}

// ---------------------------------------------------------------------------------------
// Linear

at::Tensor LinearForward(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(x.is_contiguous(), "LinearForward: the input must be contiguous");
  return at::matmul(x, w.t());  // (...,in) @ (in,out): folded to one mm, no copy
}

at::Tensor LinearBackward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w,
                          at::Tensor& dw, at::Tensor dx) {
  const int64_t in = w.size(1), out = w.size(0);
  TORCH_CHECK(dy.is_contiguous() && x.is_contiguous(), "LinearBackward: contiguous tensors");
  const at::Tensor dy2 = dy.view({-1, out});  // (N,out)
  dw.addmm_(dy2.t(), x.view({-1, in}));       // (out,in) += (out,N) @ (N,in)
  if (dx.defined()) {
    dx.view({-1, in}).addmm_(dy2, w);         // (N,in) += (N,out) @ (out,in)
    return dx;
  }
  return at::matmul(dy, w);                   // (...,in)
}

// ---------------------------------------------------------------------------------------
// SwiGLU

at::Tensor SwiGLUForward(const at::Tensor& gate, const at::Tensor& up) {
  at::Tensor act = at::silu(gate);  // (B,S,F)
  act.mul_(up);
  return act;
}

SwiGLUGrads SwiGLUBackward(const at::Tensor& dact, const at::Tensor& gate, const at::Tensor& up) {
  // silu(g) = g * s, s = sigmoid(g); silu'(g) = s * (1 + g - g * s).
  SwiGLUGrads grads;
  grads.dup = at::sigmoid(gate);               // (B,S,F): s for now
  grads.dgate = at::mul(gate, grads.dup);      // g * s
  grads.dgate.neg_().add_(gate).add_(1.0).mul_(grads.dup).mul_(dact).mul_(up);
  grads.dup.mul_(gate).mul_(dact);             // dup = dact * silu(g)
  return grads;
}

// ---------------------------------------------------------------------------------------
// Residual

at::Tensor ResidualForward(const at::Tensor& x, const at::Tensor& r) { return at::add(x, r); }

// ---------------------------------------------------------------------------------------
// Cross-entropy

at::Tensor CrossEntropyForward(at::Tensor& logits, const at::Tensor& targets) {
  TORCH_CHECK(logits.scalar_type() == at::kFloat && logits.dim() == 2 && logits.is_contiguous(),
              "CrossEntropyForward: logits must be contiguous (N,V) fp32");
  const at::Tensor t = targets.reshape({-1, 1});           // (N,1)
  const at::Tensor target_logit = logits.gather(1, t);     // (N,1)
  const at::Tensor max = std::get<0>(logits.max(1, true)); // (N,1)
  logits.sub_(max).exp_();
  const at::Tensor sum = logits.sum(1, true);              // (N,1)
  logits.div_(sum);                                        // logits buffer = softmax
  return (sum.log() + max - target_logit).mean();          // log-sum-exp - target logit
}

at::Tensor CrossEntropyBackward(at::Tensor probs, const at::Tensor& targets, double dloss) {
  const int64_t N = probs.size(0);
  const at::Tensor t = targets.reshape({-1, 1});
  probs.scatter_add_(1, t, at::full({N, 1}, -1.0, probs.options()));  // probs - onehot
  probs.mul_(dloss / static_cast<double>(N));
  return probs;
}

}  // namespace meshplan
