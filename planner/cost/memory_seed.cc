// The seed memory model: docs/cost_model.md 2(a)-(c) verbatim, and their use on a plan
// (documented in planner/cost/memory_model.h).
#include "planner/cost/memory_model.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/param_count.h"
#include "planner/cost/pipeline_in_flight.h"
#include "planner/stage_layers.h"

namespace meshplan {
namespace {

// 2(a)'s activation count per sequence and token, split into its two terms:
// logits 2V, and per layer 6E (3 QKV + 2 FFN + 1 output projection) + H*S (scores).
double SeedLogitElementsPerToken(const ModelSpec& m) { return 2.0 * m.vocab_size; }
double SeedLayerElementsPerToken(const ModelSpec& m, int64_t context) {
  return 6.0 * m.hidden + double(m.heads) * context;
}

// 2(a) counts each activation twice (forward + backward).
constexpr double kSeedForwardBackward = 2;

}  // namespace

double SeedTrainingBytes(const ModelSpec& model, int64_t params, int64_t batch, int64_t context) {
  constexpr double kBf16Bytes = 2;
  const double activations =
      double(batch) * context *
      (SeedLogitElementsPerToken(model) + model.layers * SeedLayerElementsPerToken(model, context));
  return (4.0 * params + kSeedForwardBackward * activations) * kBf16Bytes;
}

double SeedZeroStateBytes(double params, int zero_stage, int64_t n) {
  return ShardedModelStates(params, BytesPerParamFor(Precision::kMixed), zero_stage, n).total();
}

double SeedDpCommElements(double params, int zero_stage) {
  // Reduce-scatter + all-gather of P each (all-reduce, or ZeRO-1/2's gradient
  // reduce-scatter and parameter all-gather); ZeRO-3 gathers the parameters twice.
  return (zero_stage >= 3 ? 3.0 : 2.0) * params;
}

MemoryBreakdown SeedStageMemory(const ModelSpec& model, const TrainingSpec& training,
                                const ParallelPlan& plan, int64_t stage) {
  const StageParams params = CountStageParams(model, plan, stage);
  // N of docs/cost_model.md 2(b): the ranks holding the same weights, dp x cp
  // (planner/cost/step_work.h); the routed experts with ep > 1: dp/ep x cp.
  const bool split = plan.ep > 1 && params.routed_experts > 0;
  const double routed = split ? double(params.routed_experts) : 0.0;
  const BytesPerParam bytes = BytesPerParamFor(training);
  ModelStateBytes states = ShardedModelStates(double(params.total()) - routed, bytes,
                                              plan.zero_stage, plan.weight_replicas());
  if (split) {
    const ModelStateBytes experts =
        ShardedModelStates(routed, bytes, plan.zero_stage, plan.expert_weight_replicas());
    states.params_bytes += experts.params_bytes;
    states.grads_bytes += experts.grads_bytes;
    states.optimizer_bytes += experts.optimizer_bytes;
  }
  const MicrobatchesInFlight in_flight =
      CountMicrobatchesInFlight(plan, model.layers, plan.num_microbatches(training.global_batch),
                                stage);
  const double A = ActivationBytesPerElement(training.precision);
  // This rank's tokens of one micro-batch, each with 1/tp of the per-token terms.
  const double rank_tokens = double(plan.micro_batch) * training.seq_len / plan.cp / plan.tp;
  const double layers = double(LayersOfStage(model, plan, stage));

  MemoryBreakdown out;
  out.params_bytes = states.params_bytes;
  out.grads_bytes = states.grads_bytes;
  out.optimizer_bytes = states.optimizer_bytes;
  out.activations_bytes = in_flight.blocks * kSeedForwardBackward * A * rank_tokens * layers *
                          SeedLayerElementsPerToken(model, training.seq_len);
  if (stage == plan.pp - 1)
    out.logits_bytes = double(in_flight.last_stage) * kSeedForwardBackward * A * rank_tokens *
                       SeedLogitElementsPerToken(model);
  out.total_bytes = out.params_bytes + out.grads_bytes + out.optimizer_bytes +
                    out.activations_bytes + out.logits_bytes;
  out.peak_phase = "seed";
  out.worst_stage = stage;
  return out;
}

}  // namespace meshplan
