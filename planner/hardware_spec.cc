#include "planner/hardware_spec.h"

#include "planner/training_spec.h"

namespace meshplan {

double GpuSpec::PeakFlops(Precision precision) const {
  switch (precision) {
    case Precision::kBf16:
    case Precision::kMixed:
    case Precision::kFp8:
      return peak_flops_bf16;
    case Precision::kFp32:
      return peak_flops_fp32;
  }
  return peak_flops_fp32;
}

double GpuSpec::AttentionEfficiency(AttentionKernel kernel) const {
  const double own = kernel == AttentionKernel::kCudnn    ? attention_cudnn_efficiency
                     : kernel == AttentionKernel::kFlash3 ? attention_flash3_efficiency
                                                          : 0.0;
  return own > 0 ? own : attention_efficiency;
}

std::string WhyPrecisionUnsupported(const GpuSpec& gpu, Precision precision) {
  if (precision != Precision::kFp8 || gpu.peak_flops_fp8 > 0) return "";
  return "fp8 needs FP8 tensor cores, and " + gpu.name +
         " has none (its hardware file's peak_TFLOPs.fp8 is 0; FP8 GEMMs need Hopper (H100, "
         "H200), Ada or Blackwell); use bf16 or mixed";
}

}  // namespace meshplan
