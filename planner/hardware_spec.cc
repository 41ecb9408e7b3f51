#include "planner/hardware_spec.h"

#include "planner/training_spec.h"

namespace meshplan {

double GpuSpec::PeakFlops(Precision precision) const {
  switch (precision) {
    case Precision::kBf16:
    case Precision::kMixed:
      return peak_flops_bf16;
    case Precision::kFp32:
      return peak_flops_fp32;
  }
  return peak_flops_fp32;
}

}  // namespace meshplan
