// Memory per GPU: the documents' seed formulas (docs/cost_model.md 2(a)-(c)) and the
// detailed per-tensor model (docs/memory_model.md), which counts every tensor the
// executor allocates.
//
// Both return a MemoryBreakdown for one rank of one pipeline stage; the worst
// stage is what must fit. Pure functions of the specs: no cluster needed.
//
// The breakdown is a snapshot at the peak: its fields are what is alive in the
// phase named by peak_phase, and total_bytes is their sum. Phases (short ids):
//   "layer_backward"  backward of the stage's last block in the last micro-batch in
//                     flight: all in-flight activations but the current micro-batch's
//                     final-norm / lm_head tensors and logits (freed by then), plus the
//                     block's recompute and backward temporaries at the larger of its
//                     FFN step and its attention step (the FFN half's tensors freed)
//                     (planner/cost/activation_memory.h);
//   "head_backward"   last stage: the lm_head backward: the fp32 logits buffer, which the
//                     cross-entropy softmaxes and then turns into its gradient in place,
//                     and the gradient of the lm_head input (B,Sn,E);
//   "embed_backward"  stage 0: the embedding backward (scatters into the gradient buffer);
//   "optimizer"       the AdamW step: no activations, Adam's temporary;
//   "seed"            the seed model (no phases).
//
// Detailed model (the default), one rank of one stage; it counts what the executor
// (executor/parallel/zero_engine.h, executor/model/ops.h) allocates, executor contract in brackets:
//   * model states: planner/cost/model_state_memory.h ExecutorModelStates per precision, ZeRO
//     over dp x cp (the ranks holding the same weights, as step_work.h); P = the stage's
//     parameter groups (the embedding, each block, the final norm + lm_head) each padded
//     to a multiple of dp x cp [one flat buffer per group, equal shards]; ZeRO-1 keeps a
//     gradient shard (P/n) besides the full gradients [the reduce-scatter's output];
//     gradients persist between steps [zero_grad zeroes them, it does not free them];
//   * model buffers (counted in params_bytes): the causal mask (S,S) bool and, for llama,
//     the RoPE cos/sin tables (S,D/2) in the activation dtype;
//   * activations: planner/cost/activation_memory.h's op list per block, times the stage's
//     layers and its micro-batches in flight, plus token ids (stage 0) and the final
//     norm / lm_head inputs (last stage); logits: the fp32 logits buffer per micro-batch;
//   * comm buffers: ZeRO 0-1 none [each group's gradient is all-reduced / reduce-scattered
//     in place in the flat gradient buffer, after its backward in the last micro-batch];
//     ZeRO 2-3: the full gradient of the group being computed, plus the previous group's
//     while its async reduce-scatter is in flight (the head's during the last block's
//     backward) and, from the second micro-batch on, that reduce-scatter's temporary
//     shard (group / n); cp > 1: the K/V chunks sent and received by ring attention.
//     Pipeline send/recv buffers are the activations themselves (not counted twice);
//   * gathered params (ZeRO-3): the group being computed and the plan's `prefetch` groups
//     its pass computes next, prefetched as planner/cost/step_time.h times it (the head and
//     the chunk's last `prefetch` blocks at the head's backward, a block and the `prefetch`
//     blocks before it in a block's backward; nothing at the embedding backward, which reads
//     no parameters), param dtype;
//   * transients: the block's recompute and backward temporaries, the gradient of the
//     lm_head input, and AdamW's one temporary per group (the denominator, state dtype,
//     none with options.fused_adamw; + the fp32 copy of the gradient for mixed). Weight gradients are accumulated
//     straight into the flat gradient buffer: no weight-gradient temporaries.
//   * runtime memory on a GPU (options.runtime; planner/cost/runtime_memory.h): the CUDA
//     context, NCCL's buffers per communicator, the cuBLAS / attention workspaces and the
//     caching allocator's overhead, added to every phase's total (so the peak phase is the
//     same); all zero by default and on the CPU profile.
//
// Seed model on a plan (--memory-model seed): docs/cost_model.md 2(a)-(b) applied to one rank.
//   * model states: 2(b)'s ZeRO table over N = dp with P = this rank's parameters
//     (CountStageParams: tp shard, pp stage) and the regime's bytes per parameter:
//     bf16 2+2+4 (2a's four bf16 tensors), mixed 2+2+12 (2b verbatim), fp32 4+4+8;
//   * activations: 2(a)'s term for this rank's share, 2 (forward+backward) * A *
//     B*(C/cp)*(L/pp)*(6E + H*C)/tp, with B = micro-batch (a rank's C/cp queries
//     still meet all C keys), times the micro-batches in flight on the stage
//     (planner/cost/pipeline_in_flight.h); A = 2 bytes (4 for fp32);
//   * logits: 2(a)'s 2V term, 2 * A * B*(C/cp)*2V/tp, on the last stage (times its
//     micro-batches in flight);
//   * no buffers, no transients, no recompute (the documents' estimate has none).
//   With bf16 and no parallelism this is 2(a) exactly (SeedTrainingBytes).
#pragma once

#include <cstdint>

#include "planner/cost/activation_memory.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/runtime_memory_spec.h"
#include "planner/training_spec.h"

namespace meshplan {

// Knobs of the detailed model that are not part of the plan.
struct MemoryOptions {
  AttentionImpl attention = AttentionImpl::kAuto;  // auto: naive for fp32/gpt, else fused
  // AdamW as LibTorch's fused kernel (executor/model/adamw.h: LibTorch 2.0+ on CUDA, 2.4+ on
  // CPU): no denominator temporary, only mixed precision's fp32 gradient copy.
  bool fused_adamw = false;
  // The GPU's runtime memory (GpuSpec::runtime_memory): callers with a cluster pass its GPU's;
  // the default (zero) counts tensors only, as on the CPU profile.
  RuntimeMemorySpec runtime = {};
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

// The detailed model's per-block terms, the same on every stage of a plan (they follow from
// its shape, attention and recompute alone): computed once, shared by the stages that
// EstimateMemory evaluates.
struct DetailedBlockTerms {
  AttentionImpl impl = AttentionImpl::kAuto;  // resolved: naive or fused
  ActivationShape shape;
  BlockTensorBytes tensors;        // one block's saved and recomputed bytes, one micro-batch
  double dense_saved = 0;          // MoE models: the saved bytes of a dense-FFN block
  double mlp_workspace = 0;        // BlockBackwardStepWorkspace(kMlp).TotalBytes()
  double attention_workspace = 0;  // ... (kAttention)
};
DetailedBlockTerms DetailedBlockTermsOf(const ModelSpec& model, const TrainingSpec& training,
                                        const ParallelPlan& plan, const MemoryOptions& options);
// DetailedStageMemory with the plan's block terms given.
MemoryBreakdown DetailedStageMemory(const ModelSpec& model, const TrainingSpec& training,
                                    const ParallelPlan& plan, int64_t stage,
                                    const MemoryOptions& options, const DetailedBlockTerms& block);

// docs/cost_model.md 2(a): the blog's pure-bf16 estimate, (4*P + 2*activations) * 2 bytes,
// activations = B*C*(2*V + L*(6*E + H*C)).
double SeedTrainingBytes(const ModelSpec& model, int64_t params, int64_t batch, int64_t context);
// docs/cost_model.md 2(b): model-state bytes per GPU for ZeRO stage 0-3 over n data-parallel GPUs
// (2P bf16 params + 2P bf16 grads + 12P fp32 master/m/v).
double SeedZeroStateBytes(double params, int zero_stage, int64_t n);
// docs/cost_model.md 2(c): communication volume per GPU per step in elements: 2P for
// DP/ZeRO-1/2, 3P for ZeRO-3.
double SeedDpCommElements(double params, int zero_stage);

// docs/cost_model.md 2(d): Megatron's activation bytes per GPT layer in 16-bit
// (s sequence, b micro-batch, h hidden, a heads, t tensor parallel).
double MegatronActivationBytesPerLayer(int64_t s, int64_t b, int64_t h, int64_t a, int64_t t,
                                       bool sequence_parallel, Recompute recompute);

}  // namespace meshplan
