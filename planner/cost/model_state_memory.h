// Model states per GPU: parameters, gradients and optimizer states for one
// precision regime, sharded by ZeRO stage over the data-parallel group.
//
// Shared by the seed model (docs/cost_model.md 2(b) is the mixed-precision row of this) and
// the detailed model, so the two cannot disagree on model states. Pure functions.
#pragma once

#include <cstdint>

#include "planner/training_spec.h"

namespace meshplan {

// Bytes each parameter costs in each model-state tensor, for the precision as the framework
// (TrainingSpec::framework) keeps it:
//   bf16:  2 (bf16 weight) + 2 (bf16 grad) + 4 (bf16 Adam m, v)     =  8 (docs/cost_model.md 2(a))
//   mixed: 2 (bf16 weight) + 2 (bf16 grad) + 12 (fp32 master, m, v) = 16 (docs/cost_model.md 2(b));
//          fp32 main gradients (FrameworkSpec::main_grads): 2 + 4 + 12 = 18; the master as
//          a 16-bit remainder (FrameworkSpec::master_weights): 2 less
//   fp32:  4 (fp32 weight) + 4 (fp32 grad) + 8 (fp32 Adam m, v)     = 16
//   fp8:   as bf16, or as mixed when the framework keeps fp32 states (FrameworkSpec::fp8_states);
//          its FP8 weight copies are not model states (planner/cost/fp8_convention.h, counted
//          by the detailed memory model)
struct BytesPerParam {
  double param = 0;      // the weights the model computes with
  double grad = 0;       // gradient storage
  double optimizer = 0;  // fp32 master (mixed only) + Adam m + v
  double state = 0;      // one optimizer-state element (the dtype of m, v and Adam's temporaries)
};
BytesPerParam BytesPerParamFor(const TrainingSpec& training);
// The same with the default framework's dtypes (16-bit gradients, bf16 fp8 states): the
// documents' counts.
BytesPerParam BytesPerParamFor(Precision precision);

// Bytes of the activations (and logits) the model computes in: 2 for bf16, mixed and fp8
// (FP8 saved linear inputs: activation_memory.h), 4 for fp32.
double ActivationBytesPerElement(Precision precision);

struct ModelStateBytes {
  double params_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double total() const { return params_bytes + grads_bytes + optimizer_bytes; }
};

// `params` parameters on this rank before sharding, ZeRO stage 0-3 over n ranks:
//   0: nothing sharded; 1: optimizer states / n; 2: + gradients / n; 3: + parameters / n.
ModelStateBytes ShardedModelStates(double params, const BytesPerParam& bytes, int zero_stage,
                                   int64_t n);

// What the executor holds (executor/parallel/zero_engine.h), `padded_params` = the parameter
// groups' numel each padded to a multiple of n: ShardedModelStates, except that ZeRO-1
// keeps the reduce-scattered gradient shard (P/n) besides the full gradients (P).
ModelStateBytes ExecutorModelStates(double padded_params, const BytesPerParam& bytes,
                                    int zero_stage, int64_t n);

}  // namespace meshplan
