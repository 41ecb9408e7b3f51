// AdamW on flat buffers: the ATen path against the closed form of the first step, and
// LibTorch's fused kernel (CPU from LibTorch 2.4) against the ATen path over several steps,
// fp32 and bf16. The update against torch.optim.AdamW itself: tests/reference/.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cmath>

#include "executor/model/adamw.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

using test::RequireClose;

struct AdamWState {
  at::Tensor param, m, v;
};

AdamWState Fresh(at::ScalarType dtype) {
  at::manual_seed(3);
  return {at::randn({1000}).to(dtype), at::zeros({1000}, dtype), at::zeros({1000}, dtype)};
}

TEST_CASE("AdamW (ATen path): the first step is p (1 - lr wd) - lr g / (|g| + eps)",
          "[executor][adamw]") {
  AdamWOptions o;
  o.lr = 1e-2;
  o.fused = false;
  AdamWState s = Fresh(at::kFloat);
  const at::Tensor p0 = s.param.clone();
  const at::Tensor g = at::randn({1000});
  AdamWUpdate(s.param, g, s.m, s.v, 1, o);
  const at::Tensor want = p0 * (1 - o.lr * o.weight_decay) - o.lr * g / (g.abs() + o.eps);
  RequireClose(s.param, want, 1e-5, 1e-7, "params after step 1");
  RequireClose(s.v, (1 - o.beta2) * g * g, 1e-6, 0, "v after step 1");
}

TEST_CASE("AdamW: the fused kernel equals the ATen path on CPU", "[executor][adamw]") {
  REQUIRE(FusedAdamWBuiltIn(at::kCPU));
  const at::ScalarType dtype = GENERATE(at::kFloat, at::kBFloat16);
  AdamWOptions aten, fused;
  aten.fused = false;
  aten.lr = fused.lr = 1e-2;
  AdamWState a = Fresh(dtype), f = Fresh(dtype), r = Fresh(dtype);
  r = {r.param.to(at::kFloat), r.m.to(at::kFloat), r.v.to(at::kFloat)};  // fp32 from the same start
  const at::Tensor p0 = f.param.clone();
  for (int64_t step = 1; step <= 5; ++step) {
    const at::Tensor g = at::randn({1000}).to(dtype);
    AdamWUpdate(a.param, g, a.m, a.v, step, aten);
    AdamWUpdate(f.param, g, f.m, f.v, step, fused);
    AdamWUpdate(r.param, g.to(at::kFloat), r.m, r.v, step, aten);
  }
  CHECK_FALSE(at::equal(f.param, p0));  // it moved
  // fp32: the same update up to summation order. bf16: a step of lr = 1e-2 is below one bf16
  // ulp of |p| ~ 2 (2^-6), so rounding decides each step: the fused kernel rounds p once per
  // step (fp32 math inside), the ATen path after each op, so after 5 steps they may be 5 ulps
  // (5 x 2^-7 of |p|) apart; the fused one lands nearer the fp32 update.
  const double rtol = dtype == at::kFloat ? 1e-5 : 5 * std::ldexp(1.0, -7);
  if (dtype == at::kBFloat16) {
    const auto mean_error = [&](const at::Tensor& p) {
      return (p.to(at::kFloat) - r.param).abs().mean().item<double>();
    };
    CHECK(mean_error(f.param) <= mean_error(a.param));
  }
  // m and v near 0 (where b1 m and (1 - b1) g cancel) are compared on their tensor's scale.
  const auto atol = [&](const at::Tensor& t) {
    return dtype == at::kFloat ? rtol * 1e-2 : rtol * t.abs().max().item<double>();
  };
  RequireClose(f.param, a.param, rtol, rtol * 1e-2, "params after 5 steps");
  RequireClose(f.m, a.m, rtol, atol(a.m), "m after 5 steps");
  RequireClose(f.v, a.v, rtol, atol(a.v), "v after 5 steps");
}

}  // namespace
}  // namespace meshplan
