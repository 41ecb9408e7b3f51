// Each op's hand-written backward against LibTorch autograd of a plain reference forward
// (out-of-place ATen ops, written here independently of executor/model/ops.cc), fp32, small shapes.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "executor/model/ops.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

using test::RequireClose;

constexpr double kRtol = 1e-4, kAtol = 1e-5;

at::Tensor Leaf(at::IntArrayRef shape) { return at::randn(shape).requires_grad_(true); }
// A random upstream gradient: loss = sum(y * dy) has d(loss)/dy = dy.
at::Tensor Upstream(const at::Tensor& like) { return at::randn(like.sizes()); }

at::Tensor RefRope(const at::Tensor& x, int64_t n, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t B = x.size(0), S = x.size(1), D = x.size(2) / n, h = D / 2;
  const at::Tensor xv = x.view({B, S, n, D}).transpose(1, 2);
  const at::Tensor x1 = xv.narrow(-1, 0, h), x2 = xv.narrow(-1, h, h);
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

std::pair<at::Tensor, at::Tensor> RopeTables(int64_t S, int64_t D) {
  const at::Tensor angles = at::outer(at::arange(S, at::kFloat), at::rand({D / 2}));
  return {angles.cos(), angles.sin()};
}

at::Tensor CausalMask(int64_t S) { return at::ones({S, S}, at::kBool).triu_(1); }

at::Tensor RefAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t H = q.size(1), S = q.size(2), D = q.size(3), G = H / k.size(1);
  const at::Tensor kr = k.repeat_interleave(G, 1), vr = v.repeat_interleave(G, 1);
  const at::Tensor scores = at::matmul(q, kr.transpose(-2, -1)) / std::sqrt(double(D));
  const at::Tensor masked =
      scores.masked_fill(CausalMask(S), -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(masked, -1), vr);
}

TEST_CASE("embedding backward matches autograd", "[executor][ops]") {
  const at::Tensor ids = at::randint(0, 10, {2, 5}, at::kLong);
  const at::Tensor wte = Leaf({10, 6});
  const at::Tensor y = EmbeddingForward(ids, wte.detach());
  const at::Tensor ref = wte.index_select(0, ids.flatten()).view({2, 5, 6});
  RequireClose(y, ref.detach(), kRtol, kAtol, "forward");
  const at::Tensor dy = Upstream(y);
  (ref * dy).sum().backward();
  at::Tensor dwte = at::zeros({10, 6});
  EmbeddingBackward(dy, ids, dwte);
  RequireClose(dwte, wte.grad(), kRtol, kAtol, "dwte");
}

TEST_CASE("rmsnorm backward matches autograd", "[executor][ops]") {
  const at::Tensor x = Leaf({2, 5, 8}), w = Leaf({8});
  at::Tensor rstd;
  const at::Tensor y = RMSNormForward(x.detach(), w.detach(), &rstd);
  const at::Tensor ref = x * at::rsqrt(x.pow(2).mean(-1, true) + kRmsNormEps) * w;
  RequireClose(y, ref.detach(), kRtol, kAtol, "forward");
  CHECK(rstd.scalar_type() == at::kFloat);
  CHECK(rstd.sizes() == at::IntArrayRef({2, 5}));
  const at::Tensor dy = Upstream(y);
  (ref * dy).sum().backward();
  at::Tensor dw = at::ones({8});  // accumulates: starts from 1
  const at::Tensor dx = RMSNormBackward(dy, x.detach(), rstd, w.detach(), dw);
  RequireClose(dx, x.grad(), kRtol, kAtol, "dx");
  RequireClose(dw, w.grad() + 1, kRtol, kAtol, "dw");
}

TEST_CASE("linear backward matches autograd, with and without dx accumulation",
          "[executor][ops]") {
  const at::Tensor x = Leaf({2, 5, 6}), w = Leaf({4, 6});
  const at::Tensor y = LinearForward(x.detach(), w.detach());
  const at::Tensor ref = at::matmul(x, w.t());
  RequireClose(y, ref.detach(), kRtol, kAtol, "forward");
  const at::Tensor dy = Upstream(y);
  (ref * dy).sum().backward();
  at::Tensor dw = at::zeros({4, 6});
  const at::Tensor dx = LinearBackward(dy, x.detach(), w.detach(), dw);
  RequireClose(dx, x.grad(), kRtol, kAtol, "dx");
  RequireClose(dw, w.grad(), kRtol, kAtol, "dw");
  at::Tensor acc = at::ones({2, 5, 6});
  const at::Tensor out = LinearBackward(dy, x.detach(), w.detach(), dw, acc);
  CHECK(out.data_ptr() == acc.data_ptr());
  RequireClose(acc, x.grad() + 1, kRtol, kAtol, "dx accumulated in place");
  RequireClose(dw, 2 * w.grad(), kRtol, kAtol, "dw accumulated twice");
}

TEST_CASE("rope backward matches autograd and the output is head-major", "[executor][ops]") {
  const int64_t B = 2, S = 5, n = 3, D = 8;
  const auto [cos, sin] = RopeTables(S, D);
  const at::Tensor x = Leaf({B, S, n * D});
  const at::Tensor y = RopeForward(x.detach(), n, cos, sin);
  CHECK(y.is_contiguous());
  CHECK(y.sizes() == at::IntArrayRef({B, n, S, D}));
  const at::Tensor ref = RefRope(x, n, cos, sin);
  RequireClose(y, ref.detach(), kRtol, kAtol, "forward");
  const at::Tensor dy = Upstream(y);
  (ref * dy).sum().backward();
  RequireClose(RopeBackward(dy, cos, sin), x.grad(), kRtol, kAtol, "dx");
}

TEST_CASE("attention backward matches autograd (MHA and GQA)", "[executor][ops]") {
  const int64_t kv_heads = GENERATE(4, 2, 1);
  const int64_t B = 2, H = 4, S = 6, D = 8;
  const at::Tensor q = Leaf({B, H, S, D}), k = Leaf({B, kv_heads, S, D}),
                   v = Leaf({B, kv_heads, S, D});
  at::Tensor probs;
  const at::Tensor out = AttentionForward(q.detach(), k.detach(), v.detach(), CausalMask(S), &probs);
  const at::Tensor ref = RefAttention(q, k, v);
  RequireClose(out, ref.detach(), kRtol, kAtol, "forward");
  RequireClose(AttentionProbs(q.detach(), k.detach(), CausalMask(S)), probs, 0, 0,
               "recomputed probs are bit-identical");
  const at::Tensor dout = Upstream(out);
  (ref * dout).sum().backward();
  const AttentionGrads g =
      AttentionBackward(dout, q.detach(), k.detach(), v.detach(), std::move(probs));
  RequireClose(g.dq, q.grad(), kRtol, kAtol, "dq");
  RequireClose(g.dk, k.grad(), kRtol, kAtol, "dk");
  RequireClose(g.dv, v.grad(), kRtol, kAtol, "dv");
}

TEST_CASE("split and merge heads are inverse layouts", "[executor][ops]") {
  const at::Tensor x = at::randn({2, 5, 12});
  const at::Tensor h = SplitHeads(x, 3);
  CHECK(h.sizes() == at::IntArrayRef({2, 3, 5, 4}));
  CHECK(at::equal(h[1][2][3], x[1][3].narrow(0, 8, 4)));
  CHECK(at::equal(MergeHeads(h), x));
}

TEST_CASE("swiglu backward matches autograd", "[executor][ops]") {
  const at::Tensor gate = Leaf({2, 5, 7}), up = Leaf({2, 5, 7});
  const at::Tensor act = SwiGLUForward(gate.detach(), up.detach());
  const at::Tensor ref = at::silu(gate) * up;
  RequireClose(act, ref.detach(), kRtol, kAtol, "forward");
  const at::Tensor dact = Upstream(act);
  (ref * dact).sum().backward();
  const SwiGLUGrads g = SwiGLUBackward(dact, gate.detach(), up.detach());
  RequireClose(g.dgate, gate.grad(), kRtol, kAtol, "dgate");
  RequireClose(g.dup, up.grad(), kRtol, kAtol, "dup");
}

TEST_CASE("cross-entropy forward and backward match autograd", "[executor][ops]") {
  const at::Tensor logits = Leaf({7, 11});
  const at::Tensor targets = at::randint(0, 11, {7}, at::kLong);
  at::Tensor buffer = logits.detach().clone();
  const at::Tensor loss = CrossEntropyForward(buffer, targets);
  const at::Tensor ref = at::cross_entropy_loss(logits, targets);
  RequireClose(loss, ref.detach(), kRtol, kAtol, "loss");
  RequireClose(buffer, at::softmax(logits.detach(), 1), kRtol, kAtol, "probs kept in place");
  (ref * 0.25).backward();
  const void* storage = buffer.data_ptr();
  const at::Tensor dlogits = CrossEntropyBackward(std::move(buffer), targets, 0.25);
  CHECK(dlogits.data_ptr() == storage);  // in place
  RequireClose(dlogits, logits.grad(), kRtol, kAtol, "dlogits");
}

}  // namespace
}  // namespace meshplan
