// AdamW on flat buffers, in place (decoupled weight decay, Loshchilov & Hutter):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p = p (1 - lr wd) - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// with t the 1-based optimizer step. Weight decay applies to EVERY element of the buffer,
// norm weights included (one flat buffer per group: no per-weight masks); the padding of
// a group stays 0 because its gradient is 0.
// Precision: param, grad, m and v are one dtype (fp32, or bf16 in the bf16 regime); the
// mixed regime calls it on the fp32 master with an fp32 copy of the gradient
// (executor/parallel/zero_engine.cc).
// On CUDA with LibTorch 2: LibTorch's fused AdamW kernel (the same
// update, one kernel, no temporary). Otherwise: ATen ops, with one temporary the size of
// param (the denominator), freed on return.
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
};

// All four tensors: same numel, contiguous. step >= 1.
void AdamWUpdate(at::Tensor& param, const at::Tensor& grad, at::Tensor& m, at::Tensor& v,
                 int64_t step, const AdamWOptions& options);

}  // namespace meshplan
