// The counting CPU allocator, and the ops' memory contracts of executor/model/ops.h measured
// with it: what each op allocates beyond its inputs ("peak inside") is what the header
// says, so the detailed memory model can count it (no hidden copies).
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <functional>

#include "executor/device/memory_probe.h"
#include "executor/model/ops.h"

namespace meshplan {
namespace {

constexpr int64_t kF32 = 4;

// Bytes allocated at the peak of fn() beyond what was live before it.
int64_t PeakInside(const std::function<void()>& fn) {
  MemoryProbe& probe = CpuMemoryProbe();
  probe.ResetPeak();
  const int64_t before = probe.live_bytes();
  fn();
  return probe.peak_bytes() - before;
}

TEST_CASE("the counting allocator tracks live and peak bytes", "[executor][memory]") {
  MemoryProbe& probe = CpuMemoryProbe();
  const int64_t base = probe.live_bytes();
  probe.ResetPeak();
  {
    const at::Tensor a = at::empty({1000}, at::kFloat);
    CHECK(probe.live_bytes() - base == 4000);
    {
      const at::Tensor b = at::empty({500}, at::kDouble);
      CHECK(probe.live_bytes() - base == 8000);
    }
    CHECK(probe.live_bytes() - base == 4000);
    CHECK(probe.peak_bytes() - base == 8000);
    probe.ResetPeak();
    CHECK(probe.peak_bytes() - base == 4000);
  }
  CHECK(probe.live_bytes() == base);
}

// Small reductions ((B,S,1), (N,1), (E)) are allowed on top of the listed tensors.
constexpr int64_t kSlack = 64 * 1024;

TEST_CASE("ops allocate what their contract lists", "[executor][memory]") {
  CpuMemoryProbe();  // install before the tensors below
  const int64_t B = 2, S = 64, E = 32, H = 4, K = 2, D = 8, F = 48, V = 512, N = B * S;
  const at::Tensor x = at::randn({B, S, E}), w = at::randn({E}), wq = at::randn({H * D, E});
  const int64_t bse = B * S * E * kF32, bsf = B * S * F * kF32, probs = B * H * S * S * kF32;

  SECTION("rmsnorm: forward y + rstd; backward xhat + dx") {
    at::Tensor rstd, dw = at::zeros({E});
    CHECK(PeakInside([&] { RMSNormForward(x, w, &rstd); }) <= bse + B * S * kF32 + kSlack);
    RMSNormForward(x, w, &rstd);
    const int64_t bwd = PeakInside([&] { RMSNormBackward(x, x, rstd, w, dw); });
    CHECK(bwd >= 2 * bse);
    CHECK(bwd <= 2 * bse + kSlack);
  }
  SECTION("linear: the output only; backward dx only (dw in place)") {
    at::Tensor dw = at::zeros({H * D, E});
    const at::Tensor dy = at::randn({B, S, H * D});
    CHECK(PeakInside([&] { LinearForward(x, wq); }) == B * S * H * D * kF32);
    CHECK(PeakInside([&] { LinearBackward(dy, x, wq, dw); }) == bse);
    at::Tensor dx = at::zeros({B, S, E});
    CHECK(PeakInside([&] { LinearBackward(dy, x, wq, dw, dx); }) == 0);
  }
  SECTION("rope and head layouts: the output only") {
    const at::Tensor q = at::randn({B, S, H * D});
    const auto [cos, sin] = std::make_pair(at::randn({S, D / 2}), at::randn({S, D / 2}));
    CHECK(PeakInside([&] { RopeForward(q, H, cos, sin); }) == B * S * H * D * kF32);
    const at::Tensor dy = at::randn({B, H, S, D});
    CHECK(PeakInside([&] { RopeBackward(dy, cos, sin); }) == B * S * H * D * kF32);
    CHECK(PeakInside([&] { SplitHeads(q, H); }) == B * S * H * D * kF32);
  }
  SECTION("attention: forward probs + out; backward dv + dprobs + one temporary") {
    const at::Tensor q = at::randn({B, H, S, D}), k = at::randn({B, K, S, D}),
                     v = at::randn({B, K, S, D});
    const at::Tensor mask = at::ones({S, S}, at::kBool).triu(1);
    at::Tensor p;
    const int64_t out = B * H * S * D * kF32, kv = B * K * S * D * kF32;
    const int64_t fwd = PeakInside([&] { AttentionForward(q, k, v, mask, &p); });
    CHECK(fwd >= probs + out);
    CHECK(fwd <= probs + out + kSlack);
    const at::Tensor dout = at::randn({B, H, S, D});
    AttentionForward(q, k, v, mask, &p);
    const int64_t bwd = PeakInside([&] { AttentionBackward(dout, q, k, v, std::move(p)); });
    CHECK(bwd >= 2 * probs + kv);
    CHECK(bwd <= 2 * probs + kv + kSlack);
  }
  SECTION("swiglu: forward act; backward dup + dgate") {
    const at::Tensor g = at::randn({B, S, F}), u = at::randn({B, S, F});
    CHECK(PeakInside([&] { SwiGLUForward(g, u); }) == bsf);
    const int64_t bwd = PeakInside([&] { SwiGLUBackward(g, g, u); });
    CHECK(bwd >= 2 * bsf);
    CHECK(bwd <= 2 * bsf + kSlack);  // + scalar operands
  }
  SECTION("cross-entropy: nothing of size (N,V), forward or backward") {
    at::Tensor logits = at::randn({N, V});
    const at::Tensor t = at::randint(0, V, {N}, at::kLong);
    CHECK(PeakInside([&] { CrossEntropyForward(logits, t); }) <= kSlack);
    CHECK(PeakInside([&] { CrossEntropyBackward(logits, t, 1.0); }) <= kSlack);
  }
}

}  // namespace
}  // namespace meshplan
