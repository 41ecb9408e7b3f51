// AdamW on flat buffers: the ATen path against the closed form of the first step, and
// LibTorch's fused kernel (CPU from LibTorch 2.4) against the ATen path over several steps,
// fp32 and bf16. The update against torch.optim.AdamW itself: tests/reference/.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

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
  if (!FusedAdamWBuiltIn(at::kCPU)) {
    WARN("this LibTorch has no fused AdamW on CPU (2.4 and later): nothing to compare");
    return;
  }
  const at::ScalarType dtype = GENERATE(at::kFloat, at::kBFloat16);
  AdamWOptions aten, fused;
  aten.fused = false;
  aten.lr = fused.lr = 1e-2;
  AdamWState a = Fresh(dtype), f = Fresh(dtype);
  const at::Tensor p0 = f.param.clone();
  for (int64_t step = 1; step <= 5; ++step) {
    const at::Tensor g = at::randn({1000}).to(dtype);
    AdamWUpdate(a.param, g, a.m, a.v, step, aten);
    AdamWUpdate(f.param, g, f.m, f.v, step, fused);
  }
  CHECK_FALSE(at::equal(f.param, p0));  // it moved
  const double rtol = dtype == at::kFloat ? 1e-5 : 2e-2;
  RequireClose(f.param, a.param, rtol, rtol * 1e-2, "params after 5 steps");
  RequireClose(f.m, a.m, rtol, rtol * 1e-2, "m after 5 steps");
  RequireClose(f.v, a.v, rtol, rtol * 1e-2, "v after 5 steps");
}

}  // namespace
}  // namespace meshplan
