// AdamW in place on flat buffers (see adamw.h).
#include "executor/model/adamw.h"

#include <cmath>

namespace meshplan {

bool FusedAdamWBuiltIn(const at::Device& device) { return device.is_cpu() || device.is_cuda(); }

bool AdamWRunsFused(const at::Device& device, at::ScalarType param, at::ScalarType grad,
                    at::ScalarType state, const AdamWOptions& options) {
  return options.fused && FusedAdamWBuiltIn(device) && grad == param && state == param;
}

void AdamWUpdate(at::Tensor& param, const at::Tensor& grad, at::Tensor& m, at::Tensor& v,
                 int64_t step, const AdamWOptions& o, const at::Tensor& workspace) {
  TORCH_CHECK(step >= 1, "AdamWUpdate: step is 1-based");
  TORCH_CHECK(param.numel() == grad.numel() && m.numel() == grad.numel() &&
                  v.numel() == grad.numel(),
              "AdamWUpdate: param, grad, m and v must have the same size");
  if (m.scalar_type() == v.scalar_type() &&
      AdamWRunsFused(param.device(), param.scalar_type(), grad.scalar_type(), m.scalar_type(), o)) {
    // The fused kernel reads the (already incremented) step from an fp32 tensor on the device.
    const at::Tensor steps = at::full({}, static_cast<double>(step), param.options().dtype(at::kFloat));
    at::_fused_adamw_({param}, {grad}, {m}, {v}, /*max_exp_avg_sqs=*/{}, {steps}, o.lr, o.beta1,
                      o.beta2, o.weight_decay, o.eps, /*amsgrad=*/false, /*maximize=*/false);
    return;
  }
  const double t = static_cast<double>(step);
  const double bias1 = 1.0 - std::pow(o.beta1, t), bias2 = 1.0 - std::pow(o.beta2, t);
  m.mul_(o.beta1).add_(grad, 1.0 - o.beta1);
  v.mul_(o.beta2).addcmul_(grad, grad, 1.0 - o.beta2);
  at::Tensor denom;  // the one temporary
  if (workspace.defined()) {
    TORCH_CHECK(workspace.numel() >= v.numel() && workspace.scalar_type() == v.scalar_type(),
                "AdamWUpdate: the workspace must hold v's numel in v's dtype");
    denom = workspace.narrow(0, 0, v.numel());
    at::sqrt_out(denom, v);
  } else {
    denom = v.sqrt();
  }
  denom.div_(std::sqrt(bias2)).add_(o.eps);
  param.mul_(1.0 - o.lr * o.weight_decay);
  param.addcdiv_(m, denom, -o.lr / bias1);
}

}  // namespace meshplan
