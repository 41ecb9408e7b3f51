// The tensor dtypes of a precision regime (planner/training_spec.h) in the executor, the
// executor side of planner/cost/model_state_memory.h BytesPerParamFor:
//   fp32:  params, gradients, activations and Adam m, v in fp32.
//   bf16:  params, gradients, activations and Adam m, v in bf16 (no fp32 copy anywhere).
//   mixed: params, gradients and activations in bf16; an fp32 master copy of the params
//          this rank updates, and Adam m, v in fp32 (AdamW runs on the master, whose
//          result is rounded into the bf16 params).
// In every regime the row statistics (RMSNorm rstd, attention logsumexp), the logits
// buffer of the loss and the loss itself are fp32.
#pragma once

#include <c10/core/ScalarType.h>

#include "planner/training_spec.h"

namespace meshplan {

struct PrecisionDtypes {
  at::ScalarType compute = at::kFloat;  // params, gradients, activations
  at::ScalarType state = at::kFloat;    // Adam m and v
  bool fp32_master = false;             // mixed: an fp32 copy of the owned params
};

inline PrecisionDtypes DtypesFor(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return {at::kBFloat16, at::kBFloat16, false};
    case Precision::kMixed: return {at::kBFloat16, at::kFloat, true};
    case Precision::kFp32: return {at::kFloat, at::kFloat, false};
    case Precision::kFp8: break;  // refused before a model is built (ExecutorLimitations, planner/executor_support.h)
  }
  return {};
}

}  // namespace meshplan
