// The MoE FFN (executor/model/moe_block.h) against a straightforward reference written here:
// a loop over tokens and their chosen experts, differentiated by LibTorch's autograd.
// Dropless and with a capacity that drops, with and without a shared expert; then the
// same layer split over two expert-parallel ranks, and over two tensor-parallel ranks with
// and without sequence parallelism (Gloo threads), against the single process.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <cmath>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>

#include "executor/comm/gloo_communicator.h"
#include "executor/model/moe_block.h"
#include "executor/model/moe_routing.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

// X=4 experts, top-2, Fe=8, E=16, T=24 tokens.
MoeSpec TinyMoe(double capacity_factor, int64_t shared) {
  MoeSpec moe;
  moe.experts = 4;
  moe.top_k = 2;
  moe.expert_ffn_hidden = 8;
  moe.shared_experts = shared;
  moe.capacity_factor = capacity_factor;
  return moe;
}

constexpr int64_t kE = 16, kT = 24;
constexpr double kAuxCoef = 0.1, kDloss = 0.5;

struct Weights {  // whole weights (all X experts), fp32, seeded
  at::Tensor router, shared_up, shared_gate, shared_down, expert_up, expert_gate, expert_down;
};

Weights MakeWeights(const MoeSpec& moe, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  auto randn = [&](std::vector<int64_t> shape, double std) {
    return at::empty(shape, at::kFloat).normal_(0.0, std, gen);
  };
  const int64_t X = moe.experts, Fe = moe.expert_ffn_hidden, XsFe = moe.shared_experts * Fe;
  Weights w;
  w.router = randn({X, kE}, 0.5);  // large enough that the routing is far from ties
  if (XsFe > 0) {
    w.shared_up = randn({XsFe, kE}, 0.2);
    w.shared_gate = randn({XsFe, kE}, 0.2);
    w.shared_down = randn({kE, XsFe}, 0.2);
  }
  w.expert_up = randn({X, Fe, kE}, 0.2);
  w.expert_gate = randn({X, Fe, kE}, 0.2);
  w.expert_down = randn({X, kE, Fe}, 0.2);
  return w;
}

// Experts [first, first + n) of w as MoeWeights views; `grads` zero-filled alike.
MoeWeights Views(const Weights& w, int64_t first, int64_t n) {
  MoeWeights v;
  v.router = w.router;
  v.shared_up = w.shared_up;
  v.shared_gate = w.shared_gate;
  v.shared_down = w.shared_down;
  v.expert_up = w.expert_up.narrow(0, first, n);
  v.expert_gate = w.expert_gate.narrow(0, first, n);
  v.expert_down = w.expert_down.narrow(0, first, n);
  return v;
}

Weights ZerosLike(const Weights& w) {
  auto z = [](const at::Tensor& t) { return t.defined() ? at::zeros_like(t) : at::Tensor(); };
  return {z(w.router),    z(w.shared_up),   z(w.shared_gate), z(w.shared_down),
          z(w.expert_up), z(w.expert_gate), z(w.expert_down)};
}

at::Tensor SwiGLU(const at::Tensor& x, const at::Tensor& up, const at::Tensor& gate,
                  const at::Tensor& down) {
  return at::matmul(at::silu(at::matmul(x, gate.t())) * at::matmul(x, up.t()), down.t());
}

// The reference: loss = sum(y * g) + dloss * aux, differentiated by autograd. Returns y and
// fills the gradients of h and every weight.
struct Reference {
  at::Tensor y, dh;
  Weights dw;
  int64_t dropped = 0;
};

Reference ReferenceMoe(const MoeSpec& moe, const Weights& w0, const at::Tensor& h0,
                       const at::Tensor& g) {
  const int64_t X = moe.experts, k = moe.top_k, T = h0.size(0);
  auto leaf = [](const at::Tensor& t) {
    return t.defined() ? t.detach().clone().requires_grad_(true) : at::Tensor();
  };
  const at::Tensor h = leaf(h0);
  Weights w{leaf(w0.router),    leaf(w0.shared_up),   leaf(w0.shared_gate), leaf(w0.shared_down),
            leaf(w0.expert_up), leaf(w0.expert_gate), leaf(w0.expert_down)};
  const at::Tensor p = at::softmax(at::matmul(h, w.router.t()), -1);  // (T,X)
  const auto [top_p, top_e] = at::topk(p, k, -1);
  const at::Tensor weights = top_p / top_p.sum(-1, true);
  // Capacity: first choices of every token (in token order), then second choices.
  const int64_t capacity =
      moe.capacity_factor > 0
          ? static_cast<int64_t>(std::ceil(moe.capacity_factor * double(T * k) / double(X)))
          : T * k;
  std::vector<int64_t> taken(static_cast<size_t>(X), 0), routed(static_cast<size_t>(X), 0);
  std::vector<std::vector<bool>> kept(static_cast<size_t>(T), std::vector<bool>(k, false));
  Reference ref;
  for (int64_t j = 0; j < k; ++j)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t e = top_e[t][j].item<int64_t>();
      ++routed[static_cast<size_t>(e)];
      if (taken[static_cast<size_t>(e)] < capacity) {
        ++taken[static_cast<size_t>(e)];
        kept[static_cast<size_t>(t)][static_cast<size_t>(j)] = true;
      } else {
        ++ref.dropped;
      }
    }
  std::vector<at::Tensor> rows;
  for (int64_t t = 0; t < T; ++t) {
    at::Tensor y_t = at::zeros({kE}, at::kFloat);
    for (int64_t j = 0; j < k; ++j) {
      if (!kept[static_cast<size_t>(t)][static_cast<size_t>(j)]) continue;
      const int64_t e = top_e[t][j].item<int64_t>();
      y_t = y_t + weights[t][j] * SwiGLU(h[t], w.expert_up[e], w.expert_gate[e], w.expert_down[e]);
    }
    rows.push_back(y_t);
  }
  at::Tensor y = at::stack(rows);
  if (moe.shared_experts > 0) y = y + SwiGLU(h, w.shared_up, w.shared_gate, w.shared_down);
  at::Tensor f = at::empty({X}, at::kFloat);
  for (int64_t i = 0; i < X; ++i) f[i] = double(routed[static_cast<size_t>(i)]) / double(T * k);
  const at::Tensor aux = kAuxCoef * double(X) * (f * p.mean(0)).sum();
  ((y * g).sum() + kDloss * aux).backward();
  ref.y = y.detach();
  ref.dh = h.grad();
  auto grad = [](const at::Tensor& t) { return t.defined() ? t.grad() : at::Tensor(); };
  ref.dw = {grad(w.router),    grad(w.shared_up),   grad(w.shared_gate), grad(w.shared_down),
            grad(w.expert_up), grad(w.expert_gate), grad(w.expert_down)};
  return ref;
}

void RequireGradsClose(const Weights& got, const Weights& want, const std::string& what) {
  const double rtol = 1e-4, atol = 1e-6;
  test::RequireClose(got.router, want.router, rtol, atol, what + " router");
  if (want.shared_up.defined()) {
    test::RequireClose(got.shared_up, want.shared_up, rtol, atol, what + " shared_up");
    test::RequireClose(got.shared_gate, want.shared_gate, rtol, atol, what + " shared_gate");
    test::RequireClose(got.shared_down, want.shared_down, rtol, atol, what + " shared_down");
  }
  test::RequireClose(got.expert_up, want.expert_up, rtol, atol, what + " expert_up");
  test::RequireClose(got.expert_gate, want.expert_gate, rtol, atol, what + " expert_gate");
  test::RequireClose(got.expert_down, want.expert_down, rtol, atol, what + " expert_down");
}

TEST_CASE("MoE capacity is ceil(cf * T*k / X), dropless without a factor", "[executor][moe]") {
  CHECK(ExpertCapacity(TinyMoe(0, 0), 24) == -1);
  CHECK(ExpertCapacity(TinyMoe(1.0, 0), 24) == 12);   // 24*2/4
  CHECK(ExpertCapacity(TinyMoe(0.5, 0), 24) == 6);
  CHECK(ExpertCapacity(TinyMoe(1.1, 0), 24) == 14);   // ceil(13.2)
}

TEST_CASE("MoE FFN forward and gradients equal the reference loop", "[executor][moe]") {
  const double cf = GENERATE(0.0, 0.5);     // dropless; a capacity that drops
  const int64_t shared = GENERATE(0, 1);    // with and without a shared expert
  INFO("capacity_factor " << cf << " shared experts " << shared);
  const MoeSpec moe = TinyMoe(cf, shared);
  const Weights w = MakeWeights(moe, 7);
  at::Generator gen = at::detail::createCPUGenerator(11);
  const at::Tensor h = at::empty({2, kT / 2, kE}, at::kFloat).normal_(0.0, 1.0, gen);  // (B,S,E)
  const at::Tensor g = at::empty({kT, kE}, at::kFloat).normal_(0.0, 1.0, gen);
  const Reference ref = ReferenceMoe(moe, w, h.view({kT, kE}), g);
  if (cf > 0) CHECK(ref.dropped > 0);  // the case tests drops

  const MoeFfn ffn(moe, kAuxCoef, ExpertParallel(nullptr, moe.experts));
  MoeStash stash;
  const at::Tensor y = ffn.Forward(Views(w, 0, moe.experts), h, &stash);
  int64_t kept = 0;
  for (int64_t n : stash.routing.rows_per_expert) kept += n;
  CHECK(kept == kT * moe.top_k - ref.dropped);
  test::RequireClose(y.view({kT, kE}), ref.y, 1e-5, 1e-6, "y");
  Weights dw = ZerosLike(w);
  MoeWeights dv = Views(dw, 0, moe.experts);
  const at::Tensor dh = ffn.Backward(Views(w, 0, moe.experts), dv, h, g.view({2, kT / 2, kE}),
                                     kDloss, std::move(stash));
  test::RequireClose(dh.view({kT, kE}), ref.dh, 1e-4, 1e-6, "dh");
  RequireGradsClose(dw, ref.dw, "single process");
}

TEST_CASE("expert-parallel MoE FFN (ep=2, Gloo) equals the single process", "[executor][moe]") {
  const double cf = GENERATE(0.0, 0.5);
  INFO("capacity_factor " << cf);
  const MoeSpec moe = TinyMoe(cf, 1);
  const Weights w = MakeWeights(moe, 3);
  constexpr int kRanks = 2;
  std::vector<at::Tensor> h(kRanks), g(kRanks);
  at::Generator gen = at::detail::createCPUGenerator(19);
  for (int r = 0; r < kRanks; ++r) {  // each rank's own tokens (different routing counts)
    h[static_cast<size_t>(r)] = at::empty({kT, kE}, at::kFloat).normal_(0.0, 1.0, gen);
    g[static_cast<size_t>(r)] = at::empty({kT, kE}, at::kFloat).normal_(0.0, 1.0, gen);
  }
  // Single process: both ranks' tokens through all experts; expert gradients summed.
  const MoeFfn single(moe, kAuxCoef, ExpertParallel(nullptr, moe.experts));
  std::vector<at::Tensor> want_y(kRanks), want_dh(kRanks);
  std::vector<Weights> want_dw(kRanks);
  Weights want_experts = ZerosLike(w);
  for (int r = 0; r < kRanks; ++r) {
    MoeStash stash;
    want_y[static_cast<size_t>(r)] = single.Forward(Views(w, 0, moe.experts), h[static_cast<size_t>(r)], &stash);
    want_dw[static_cast<size_t>(r)] = ZerosLike(w);
    MoeWeights dv = Views(want_dw[static_cast<size_t>(r)], 0, moe.experts);
    want_dh[static_cast<size_t>(r)] = single.Backward(Views(w, 0, moe.experts), dv, h[static_cast<size_t>(r)],
                                                      g[static_cast<size_t>(r)], kDloss, std::move(stash));
    want_experts.expert_up.add_(want_dw[static_cast<size_t>(r)].expert_up);
    want_experts.expert_gate.add_(want_dw[static_cast<size_t>(r)].expert_gate);
    want_experts.expert_down.add_(want_dw[static_cast<size_t>(r)].expert_down);
  }
  // Expert parallel: rank r holds experts [2r, 2r+2).
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<at::Tensor> got_y(kRanks), got_dh(kRanks);
  std::vector<Weights> got_dw(kRanks);
  test::OnThreads(kRanks, [&](int r) {
    GlooCommunicator ep(store, r, {0, 1}, "ep", GlooOptions{});
    const MoeFfn ffn(moe, kAuxCoef, ExpertParallel(&ep, moe.experts));
    const int64_t Xl = ffn.ep().local_experts(), first = ffn.ep().first_expert();
    test::Expect(Xl == 2 && first == 2 * r, "local experts");
    MoeStash stash;
    const size_t i = static_cast<size_t>(r);
    got_y[i] = ffn.Forward(Views(w, first, Xl), h[i], &stash);
    got_dw[i] = ZerosLike(w);
    MoeWeights dv = Views(got_dw[i], first, Xl);
    got_dh[i] = ffn.Backward(Views(w, first, Xl), dv, h[i], g[i], kDloss, std::move(stash));
  });
  for (int r = 0; r < kRanks; ++r) {
    const size_t i = static_cast<size_t>(r);
    const std::string what = "rank " + std::to_string(r);
    test::RequireClose(got_y[i], want_y[i], 1e-5, 1e-6, what + " y");
    test::RequireClose(got_dh[i], want_dh[i], 1e-4, 1e-6, what + " dh");
    test::RequireClose(got_dw[i].router, want_dw[i].router, 1e-4, 1e-6, what + " router");
    test::RequireClose(got_dw[i].shared_up, want_dw[i].shared_up, 1e-4, 1e-6, what + " shared_up");
    // Its experts' gradients hold both ranks' tokens; the others' stay zero.
    for (auto [got, want] : {std::pair{got_dw[i].expert_up, want_experts.expert_up},
                             {got_dw[i].expert_gate, want_experts.expert_gate},
                             {got_dw[i].expert_down, want_experts.expert_down}}) {
      test::RequireClose(got.narrow(0, 2 * r, 2), want.narrow(0, 2 * r, 2), 1e-4, 1e-6,
                         what + " own experts");
      CHECK(got.narrow(0, 2 * (1 - r), 2).abs().max().item<double>() == 0);
    }
  }
}

// Tensor-parallel rank i of 2: its Fe/2 slice of every expert (shared ones too), the
// router whole.
MoeWeights TpViews(const Weights& w, int64_t i) {
  MoeWeights v;
  auto part = [&](const at::Tensor& t, int64_t dim) {
    return t.narrow(dim, i * t.size(dim) / 2, t.size(dim) / 2);
  };
  v.router = w.router;
  v.shared_up = part(w.shared_up, 0);
  v.shared_gate = part(w.shared_gate, 0);
  v.shared_down = part(w.shared_down, 1);
  v.expert_up = part(w.expert_up, 1);
  v.expert_gate = part(w.expert_gate, 1);
  v.expert_down = part(w.expert_down, 2);
  return v;
}

TEST_CASE("tensor-parallel MoE FFN (tp=2, Gloo, sp on and off) equals the reference",
          "[executor][moe][tp]") {
  const double cf = GENERATE(0.0, 0.5);
  const bool sp = GENERATE(false, true);
  INFO("capacity_factor " << cf << (sp ? " sp" : ""));
  const MoeSpec moe = TinyMoe(cf, 1);
  const Weights w = MakeWeights(moe, 5);
  constexpr int kRanks = 2;
  constexpr int64_t B = 2, S = kT / B;  // two sequences: sp's chunk-major order differs
  // (Seed 1: under sp routing these tokens in chunk-major order instead of sequence order
  // would drop other rows, which this case would catch.)
  at::Generator gen = at::detail::createCPUGenerator(1);
  const at::Tensor h = at::empty({B, S, kE}, at::kFloat).normal_(0.0, 1.0, gen);
  const at::Tensor g = at::empty({B, S, kE}, at::kFloat).normal_(0.0, 1.0, gen);
  const Reference ref = ReferenceMoe(moe, w, h.view({kT, kE}), g.view({kT, kE}));
  if (cf > 0) CHECK(ref.dropped > 0);
  // What rank i holds outside the region: everything, or its sequence shard under sp.
  auto shard = [&](const at::Tensor& t, int64_t i) {
    return sp ? t.narrow(1, i * S / kRanks, S / kRanks).contiguous() : t;
  };
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<at::Tensor> got_y(kRanks), got_dh(kRanks);
  std::vector<Weights> got_dw(kRanks);
  test::OnThreads(kRanks, [&](int r) {
    GlooCommunicator tp(store, r, {0, 1}, "tp", GlooOptions{});
    const MoeFfn ffn(moe, kAuxCoef, ExpertParallel(nullptr, moe.experts),
                     TensorParallel(TpConfig{&tp, sp}));
    const size_t i = static_cast<size_t>(r);
    MoeStash stash;
    const at::Tensor hr = shard(h, r);
    got_y[i] = ffn.Forward(TpViews(w, r), hr, &stash);
    got_dw[i] = ZerosLike(w);
    MoeWeights dv = TpViews(got_dw[i], r);
    got_dh[i] = ffn.Backward(TpViews(w, r), dv, hr, shard(g, r), kDloss, std::move(stash));
  });
  const at::Tensor want_y = ref.y.view({B, S, kE}), want_dh = ref.dh.view({B, S, kE});
  Weights dw = ZerosLike(w);  // the ranks' slices put together
  for (int r = 0; r < kRanks; ++r) {
    const size_t i = static_cast<size_t>(r);
    const std::string what = "tp rank " + std::to_string(r);
    test::RequireClose(got_y[i], shard(want_y, r), 1e-5, 1e-6, what + " y");
    test::RequireClose(got_dh[i], shard(want_dh, r), 1e-4, 1e-6, what + " dh");
    test::RequireClose(got_dw[i].router, ref.dw.router, 1e-4, 1e-6, what + " router (whole)");
    const MoeWeights mine = TpViews(got_dw[i], r);
    MoeWeights into = TpViews(dw, r);
    into.shared_up.copy_(mine.shared_up);
    into.shared_gate.copy_(mine.shared_gate);
    into.shared_down.copy_(mine.shared_down);
    into.expert_up.copy_(mine.expert_up);
    into.expert_gate.copy_(mine.expert_gate);
    into.expert_down.copy_(mine.expert_down);
  }
  dw.router = got_dw[0].router;
  RequireGradsClose(dw, ref.dw, "tp=2 slices");
}

}  // namespace
}  // namespace meshplan
