// Memory per GPU: the documents' seed formulas (SPEC.md 2a-2c) and the detailed
// per-tensor model (SPEC.md 2d), which counts every tensor the executor allocates.
//
// Both return a MemoryBreakdown for one rank of one pipeline stage; the worst
// stage is what must fit. Pure functions of the specs: no cluster needed.
//
// The breakdown is a snapshot at the peak: its fields are what is alive in the
// phase named by peak_phase, and total_bytes is their sum. Phases (short ids):
//   "layer_backward"  start of the backward of the last micro-batch in flight: all
//                     in-flight activations + the first block's recompute and
//                     backward temporaries (planner/activation_memory.h);
//   "cross_entropy"   last stage: the loss backward, fp32 log-probabilities and
//                     their two fp32 gradients (B,Sc,Vt);
//   "head_backward"   last stage: the lm_head backward, gradient of the logits and
//                     the lm_head weight-gradient temporary;
//   "embed_backward"  stage 0: the embedding backward's dense weight gradient;
//   "optimizer"       the AdamW step: no activations, Adam's temporaries;
//   "seed"            the seed model (no phases).
//
// Detailed model (the default), one rank of one stage; executor contract in brackets:
//   * model states: planner/model_state_memory.h per precision, ZeRO over dp x cp
//     (the ranks holding the same weights, as step_work.h), P =
//     CountStageParams(stage).total() [gradients persist between steps: zero_grad
//     zeroes them, it does not free them];
//   * activations: planner/activation_memory.h's op list per block, times the stage's
//     layers and its micro-batches in flight, plus token ids (stage 0) and the final
//     norm / lm_head inputs (last stage); logits: the fp32 log-probabilities;
//   * comm buffers: one DDP bucket (kDdpBucketBytes) for dp > 1 and ZeRO 0-2 [grads
//     are copied into a flat bucket, reduced, copied back]; ZeRO-3: the full gradient
//     of the largest unit before its reduce-scatter; cp > 1: the K/V chunks sent and
//     received by ring attention. Pipeline send/recv buffers are the activations
//     themselves (not counted twice);
//   * gathered params (ZeRO-3): the unit computing now + the prefetched next one
//     (units: each block, the embedding, the final norm + lm_head), param dtype;
//   * transients: a weight's new gradient before it is added into .grad (ZeRO 0-2),
//     the block's recompute and backward temporaries, the loss backward, and
//     AdamW's per-parameter temporaries [LibTorch's loop: sqrt(v) and its scaled copy
//     in the state dtype, plus the fp32 copy of the gradient for mixed].
//
// Seed model on a plan (--memory-model seed): SPEC.md 2(a)-(b) applied to one rank.
//   * model states: 2(b)'s ZeRO table over N = dp with P = this rank's parameters
//     (CountStageParams: tp shard, pp stage) and the regime's bytes per parameter:
//     bf16 2+2+4 (2a's four bf16 tensors), mixed 2+2+12 (2b verbatim), fp32 4+4+8;
//   * activations: 2(a)'s term for this rank's share, 2 (forward+backward) * A *
//     B*(C/cp)*(L/pp)*(6E + H*C)/tp, with B = micro-batch (a rank's C/cp queries
//     still meet all C keys), times the micro-batches in flight on the stage
//     (planner/pipeline_in_flight.h); A = 2 bytes (4 for fp32);
//   * logits: 2(a)'s 2V term, 2 * A * B*(C/cp)*2V/tp, on the last stage (times its
//     micro-batches in flight);
//   * no buffers, no transients, no recompute (the documents' estimate has none).
//   With bf16 and no parallelism this is 2(a) exactly (SeedTrainingBytes).
#pragma once

#include <cstdint>

#include "planner/activation_memory.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/training_spec.h"

namespace meshplan {

// PyTorch DDP's default gradient bucket (bucket_cap_mb = 25): the executor's data
// parallel and ZeRO-1/2 wrappers all-reduce / reduce-scatter gradients in flat
// buckets of this size, one bucket staged at a time.
inline constexpr double kDdpBucketBytes = 25e6;

// Knobs of the detailed model that are not part of the plan.
struct MemoryOptions {
  AttentionImpl attention = AttentionImpl::kAuto;  // auto: naive for fp32/gpt, else fused
  double ddp_bucket_bytes = kDdpBucketBytes;
};

// One rank of pipeline stage `stage` (0 <= stage < plan.pp). The plan must be valid.
MemoryBreakdown EstimateStageMemory(const ModelSpec& model, const TrainingSpec& training,
                                    const ParallelPlan& plan, MemoryModel memory_model,
                                    int64_t stage, const MemoryOptions& options = {});

// The most loaded stage (its index in worst_stage).
MemoryBreakdown EstimateMemory(const ModelSpec& model, const TrainingSpec& training,
                               const ParallelPlan& plan, MemoryModel memory_model,
                               const MemoryOptions& options = {});

// The two models behind EstimateStageMemory (the seed ignores `options`).
MemoryBreakdown SeedStageMemory(const ModelSpec& model, const TrainingSpec& training,
                                const ParallelPlan& plan, int64_t stage);
MemoryBreakdown DetailedStageMemory(const ModelSpec& model, const TrainingSpec& training,
                                    const ParallelPlan& plan, int64_t stage,
                                    const MemoryOptions& options = {});

// SPEC.md 2(a): the blog's pure-bf16 estimate, (4*P + 2*activations) * 2 bytes,
// activations = B*C*(2*V + L*(6*E + H*C)).
double SeedTrainingBytes(const ModelSpec& model, int64_t params, int64_t batch, int64_t context);
// SPEC.md 2(b): model-state bytes per GPU for ZeRO stage 0-3 over n data-parallel GPUs
// (2P bf16 params + 2P bf16 grads + 12P fp32 master/m/v).
double SeedZeroStateBytes(double params, int zero_stage, int64_t n);
// SPEC.md 2(c): communication volume per GPU per step in elements: 2P for DP/ZeRO-1/2, 3P for ZeRO-3.
double SeedDpCommElements(double params, int zero_stage);

// SPEC.md 2(d): Megatron's activation bytes per GPT layer in 16-bit
// (s sequence, b micro-batch, h hidden, a heads, t tensor parallel).
double MegatronActivationBytesPerLayer(int64_t s, int64_t b, int64_t h, int64_t a, int64_t t,
                                       bool sequence_parallel, Recompute recompute);

}  // namespace meshplan
