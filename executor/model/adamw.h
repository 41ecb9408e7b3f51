// AdamW on flat buffers, in place (decoupled weight decay, Loshchilov & Hutter):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p = p (1 - lr wd) - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// with t the 1-based optimizer step. Weight decay applies to EVERY element of the buffer,
// norm weights included (one flat buffer per group: no per-weight masks); the padding of
// a group stays 0 because its gradient is 0.
// Precision: param, grad, m and v are one dtype (fp32, or bf16 in the bf16 regime); the
// mixed regime calls it on the fp32 master with an fp32 copy of the gradient
// (executor/parallel/zero_engine.cc).
// Kernel: LibTorch's fused AdamW (the same update, one kernel, no temporary) where LibTorch
// has it for the device (CPU and CUDA: FusedAdamWBuiltIn) and the four dtypes agree; otherwise ATen ops, with one temporary the size of param (the
// denominator), freed on return, or held in a caller's `workspace` (optimizer offload keeps
// one on the host: the same values, nothing allocated per step). AdamWOptions::fused = false
// forces the ATen ops (tests compare the two).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace meshplan {

struct AdamWOptions {
  double lr = 3e-4;  // TrainingSpec::learning_rate
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  bool fused = true;  // the fused kernel when built in (see above)
};

// True when this LibTorch has a fused AdamW kernel for `device`.
bool FusedAdamWBuiltIn(const at::Device& device);

// True when AdamWUpdate runs the fused kernel on these dtypes on `device` (no temporary).
bool AdamWRunsFused(const at::Device& device, at::ScalarType param, at::ScalarType grad,
                    at::ScalarType state, const AdamWOptions& options);

// All four tensors: same numel, contiguous. step >= 1. workspace: undefined (allocate the
// denominator), or contiguous, at least param's numel, in v's dtype, on v's device.
void AdamWUpdate(at::Tensor& param, const at::Tensor& grad, at::Tensor& m, at::Tensor& v,
                 int64_t step, const AdamWOptions& options, const at::Tensor& workspace = {});

}  // namespace meshplan
