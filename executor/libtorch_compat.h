// LibTorch's version differences, in one place. The executor compiles against LibTorch 1.13
// (Debian, CPU: build/) and 2.x (PyPI's torch wheel with CUDA: scripts/build_torch2.sh,
// build-torch2/). Every API that one of them lacks or declares differently is reached through
// this header, so no other file tests TORCH_VERSION. The first release with each feature
// (PyTorch release notes, https://github.com/pytorch/pytorch/releases):
//   at::scaled_dot_product_attention with enable_gqa        2.5  kHasSdpaGqa, CausalSdpaGqa
//   at::_fused_adamw_ on CUDA                                2.0  HasFusedAdamW, FusedAdamW
//   at::_fused_adamw_ on CPU                                 2.4
//   c10::Allocator: allocate() non-const, copy_data() pure   2.3  CpuAllocatorBase
// A call to a feature this LibTorch lacks throws std::logic_error naming the feature, the
// release that has it and this version; callers ask kHas* / Has* first.
// tests/executor/libtorch_compat_test.cc checks the switches against the version CMake found.
// Stateless; every function is safe from any thread.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <cstddef>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#define MESHPLAN_LIBTORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace meshplan::libtorch {

inline constexpr const char* kVersion = TORCH_VERSION;  // "1.13.0", "2.11.0", ...

inline constexpr bool kHasSdpaGqa = MESHPLAN_LIBTORCH_AT_LEAST(2, 5);
inline constexpr bool kHasFusedAdamWCuda = MESHPLAN_LIBTORCH_AT_LEAST(2, 0);
inline constexpr bool kHasFusedAdamWCpu = MESHPLAN_LIBTORCH_AT_LEAST(2, 4);

inline std::logic_error Missing(const std::string& feature, const std::string& since) {
  return std::logic_error(feature + " needs LibTorch " + since + " or later (this one is " +
                          kVersion + ")");
}

// True when at::_fused_adamw_ has a kernel for `device` in this LibTorch.
inline bool HasFusedAdamW(const at::Device& device) {
  if (device.is_cuda()) return kHasFusedAdamWCuda;
  if (device.is_cpu()) return kHasFusedAdamWCpu;
  return false;
}

// Causal attention of q (B,H,S,D) over k, v (B,K,S,D), K dividing H (each K/V head shared by
// H/K query heads), no mask tensor, no dropout, scale 1/sqrt(D). Differentiable (autograd).
inline at::Tensor CausalSdpaGqa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if MESHPLAN_LIBTORCH_AT_LEAST(2, 5)
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true, /*scale=*/std::nullopt,
                                          /*enable_gqa=*/true);
#else
  (void)q, (void)k, (void)v;
  throw Missing("at::scaled_dot_product_attention with enable_gqa", "2.5");
#endif
}

// One AdamW step in place on one tensor each (LibTorch's fused kernel, amsgrad and maximize
// off): `step` is the 1-based step count as an fp32 scalar tensor on param's device.
inline void FusedAdamW(at::Tensor& param, const at::Tensor& grad, at::Tensor& m, at::Tensor& v,
                       const at::Tensor& step, double lr, double beta1, double beta2,
                       double weight_decay, double eps) {
#if MESHPLAN_LIBTORCH_AT_LEAST(2, 0)
  at::_fused_adamw_({param}, {grad}, {m}, {v}, /*max_exp_avg_sqs=*/{}, {step}, lr, beta1, beta2,
                    weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)param, (void)grad, (void)m, (void)v, (void)step;
  (void)lr, (void)beta1, (void)beta2, (void)weight_decay, (void)eps;
  throw Missing("at::_fused_adamw_", "2.0");
#endif
}

// A CPU allocator for either c10::Allocator: derive from it and implement AllocateBytes; it
// overrides whichever allocate() this LibTorch declares, and copy_data() (a plain memcpy of
// host memory) where that is pure.
class CpuAllocatorBase : public c10::Allocator {
 public:
#if MESHPLAN_LIBTORCH_AT_LEAST(2, 3)
  c10::DataPtr allocate(size_t bytes) override { return AllocateBytes(bytes); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t bytes) const override { return AllocateBytes(bytes); }
#endif

 protected:
  virtual c10::DataPtr AllocateBytes(size_t bytes) const = 0;
};

}  // namespace meshplan::libtorch
