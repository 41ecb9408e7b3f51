// AdamW in place on flat buffers (see adamw.h).
#include "executor/model/adamw.h"

#include <torch/version.h>

#include <cmath>

#define MESHPLAN_HAS_FUSED_ADAMW_CUDA (TORCH_VERSION_MAJOR >= 2)
#define MESHPLAN_HAS_FUSED_ADAMW_CPU \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))

namespace meshplan {

bool FusedAdamWBuiltIn(const at::Device& device) {
  if (device.is_cuda()) return MESHPLAN_HAS_FUSED_ADAMW_CUDA;
  if (device.is_cpu()) return MESHPLAN_HAS_FUSED_ADAMW_CPU;
  return false;
}

void AdamWUpdate(at::Tensor& param, const at::Tensor& grad, at::Tensor& m, at::Tensor& v,
                 int64_t step, const AdamWOptions& o) {
  TORCH_CHECK(step >= 1, "AdamWUpdate: step is 1-based");
  TORCH_CHECK(param.numel() == grad.numel() && m.numel() == grad.numel() &&
                  v.numel() == grad.numel(),
              "AdamWUpdate: param, grad, m and v must have the same size");
#if MESHPLAN_HAS_FUSED_ADAMW_CUDA
  if (o.fused && FusedAdamWBuiltIn(param.device()) && grad.scalar_type() == param.scalar_type() &&
      m.scalar_type() == param.scalar_type() && v.scalar_type() == param.scalar_type()) {
    // The fused kernel reads the (already incremented) step from an fp32 tensor on the device.
    const at::Tensor steps = at::full({}, static_cast<double>(step), param.options().dtype(at::kFloat));
    at::_fused_adamw_({param}, {grad}, {m}, {v}, /*max_exp_avg_sqs=*/{}, {steps}, o.lr, o.beta1,
                      o.beta2, o.weight_decay, o.eps, /*amsgrad=*/false, /*maximize=*/false);
    return;
  }
#endif
  const double t = static_cast<double>(step);
  const double bias1 = 1.0 - std::pow(o.beta1, t), bias2 = 1.0 - std::pow(o.beta2, t);
  m.mul_(o.beta1).add_(grad, 1.0 - o.beta1);
  v.mul_(o.beta2).addcmul_(grad, grad, 1.0 - o.beta2);
  at::Tensor denom = v.sqrt();  // the one temporary
  denom.div_(std::sqrt(bias2)).add_(o.eps);
  param.mul_(1.0 - o.lr * o.weight_decay);
  param.addcdiv_(m, denom, -o.lr / bias1);
}

}  // namespace meshplan
