// Memory per GPU: the documents' seed formulas (docs/cost_model.md 2(a)-(c)) and the
// detailed per-tensor model, which counts every tensor the executor allocates.
//
// Both return a MemoryBreakdown for one rank of one pipeline stage, a snapshot at the peak:
// its fields are what is alive in the phase named by peak_phase ("layer_backward",
// "head_backward", "embed_backward", "optimizer"; "seed" for the seed model), and
// total_bytes is their sum; the worst stage is what must fit. Pure functions of the specs.
// What each line and phase counts, with the executor's contract: docs/memory_model.md
// ("The breakdown", "Phases and the peak", "The seed model on a plan").
#pragma once

#include <cstdint>

#include "planner/cost/activation_memory.h"
#include "planner/cost/plan_shape.h"
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
// The same with the plan's shape given (planner/cost/plan_shape.h, made with
// options.attention): the search derives it once for the plans that share it.
MemoryBreakdown EstimateMemory(const ModelSpec& model, const TrainingSpec& training,
                               const ParallelPlan& plan, MemoryModel memory_model,
                               const MemoryOptions& options, const PlanShape& shape);

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
  RankShape shape;
  BlockTensorBytes tensors;        // one block's saved and recomputed bytes, one micro-batch
  double dense_saved = 0;          // MoE models: the saved bytes of a dense-FFN block
  // every:N: `tensors` and dense_saved are the blocks that keep everything; these the
  // checkpointed ones (full recompute), CheckpointedBlocks of each stage's.
  BlockTensorBytes checkpointed;
  double dense_checkpointed_saved = 0;
  double mlp_workspace = 0;        // BlockOps::backward_workspace(kMlp).TotalBytes()
  double attention_workspace = 0;  // ... (kAttention)
};
DetailedBlockTerms DetailedBlockTermsOf(const ParallelPlan& plan, const PlanShape& shape);
// DetailedStageMemory with the plan's shape (made with options.attention) and block terms given.
MemoryBreakdown DetailedStageMemory(const ModelSpec& model, const TrainingSpec& training,
                                    const ParallelPlan& plan, int64_t stage,
                                    const MemoryOptions& options, const PlanShape& shape,
                                    const DetailedBlockTerms& block);

// docs/cost_model.md 2(a): the blog's pure-bf16 estimate, (4*P + 2*activations) * 2 bytes,
// activations = B*S*(2*V + L*(6*E + H*S)), S = `context`.
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
