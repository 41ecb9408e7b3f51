#include "planner/cost/model_state_memory.h"

namespace meshplan {

BytesPerParam BytesPerParamFor(const TrainingSpec& training) {
  const FrameworkSpec& f = training.framework;
  const double grad16 = f.main_grads == GradDtype::kFp32 ? 4 : 2;  // with an fp32 master
  const double master = f.master_weights == MasterWeights::kRemainder ? 2 : 4;
  switch (training.precision) {
    case Precision::kFp8:  // the FP8 copies: memory_detailed.cc
      if (f.fp8_states == Fp8StateDtype::kFp32) return {2, grad16, master + 4 + 4, 4};
      return {2, 2, 2 + 2, 2};
    case Precision::kBf16: return {2, 2, 2 + 2, 2};
    case Precision::kMixed: return {2, grad16, master + 4 + 4, 4};
    case Precision::kFp32: return {4, 4, 4 + 4, 4};
  }
  return {};
}

BytesPerParam BytesPerParamFor(Precision precision) {
  TrainingSpec training;
  training.precision = precision;
  return BytesPerParamFor(training);
}

double ActivationBytesPerElement(Precision precision) {
  return precision == Precision::kFp32 ? 4.0 : 2.0;
}

ModelStateBytes ShardedModelStates(double params, const BytesPerParam& bytes, int zero_stage,
                                   int64_t n) {
  const double shard = 1.0 / static_cast<double>(n);
  ModelStateBytes out;
  out.params_bytes = bytes.param * params * (zero_stage >= 3 ? shard : 1.0);
  out.grads_bytes = bytes.grad * params * (zero_stage >= 2 ? shard : 1.0);
  out.optimizer_bytes = bytes.optimizer * params * (zero_stage >= 1 ? shard : 1.0);
  return out;
}

ModelStateBytes ExecutorModelStates(double padded_params, const BytesPerParam& bytes,
                                    int zero_stage, int64_t n) {
  ModelStateBytes out = ShardedModelStates(padded_params, bytes, zero_stage, n);
  if (zero_stage == 1) out.grads_bytes += bytes.grad * padded_params / static_cast<double>(n);
  return out;
}

}  // namespace meshplan
