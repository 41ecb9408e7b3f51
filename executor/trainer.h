// Trainer: what one rank does per optimizer step, top-down (llm.c's train loop):
//   pp = 1: for each micro-batch: next batch -> forward -> backward (gradient sync launched
//           per group as its backward finishes) ; then optimizer update -> log.
//   pp > 1: this rank's items of planner/pipeline_schedule.h StageOrder(plan.schedule, pp,
//           v, m, pp rank), in order: a forward or backward of one micro-batch through one
//           model chunk (virtual stage), with the chunk-boundary activations and gradients
//           exchanged over the pp communicator (executor/pipeline_p2p.h); then the update.
//           zb_h1 runs each weight-gradient pass (W) inside its backward (B): the W items
//           are skipped, so the losses and parameters are 1F1B's (only the bubble differs;
//           `meshplan run` refuses zb_h1 for that reason, see ExecutorLimitations).
//
// Holds the model (executor/llama_model.h), this rank's parameters, gradients and AdamW
// states (executor/zero_engine.h: DP / ZeRO-1/2/3 over the dp x cp group) for its chunks
// (executor/param_layout.h PipelineRankChunks) and reads its shard of every global batch
// (executor/data.h); a cp rank keeps its zigzag share of each sequence
// (executor/context_split.h), a tp rank its weight shards (the model runs the tensor- and
// sequence-parallel regions, executor/tensor_parallel.h). The composition, outermost
// first, follows planner/mesh_layout.h: dp (data), pp (stages of whole blocks), cp (the
// sequence), tp (heads, FFN columns, vocabulary); the ZeRO group is dp x cp (the ranks
// with the same weights). The micro-batch count is global_batch / (dp * micro_batch); each
// micro-batch's loss gradient is scaled by 1/count and the engine averages over dp x cp,
// so the update equals a single-process step on the whole global batch. The logged loss
// is the global-batch mean on every rank: the last pipeline stage computes it, broadcasts
// it over pp (root: the last pp rank), then the dp x cp ranks average it.
// Memory per phase: the probe's peak of every forward item is reported as "forward", of
// every backward item as "backward" (max over items), the update as "optimizer".
// With pp > 1 a stage holds several micro-batches' stashes at once (gpipe: all m; 1f1b and
// zb_h1: min(m, pp - r); interleaved: see planner/pipeline_in_flight.h).
// Not thread-safe. All ranks of the mesh must call Step() together.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/communicator.h"
#include "executor/data.h"
#include "executor/device_mesh.h"
#include "executor/llama_model.h"
#include "executor/memory_probe.h"
#include "executor/pipeline_p2p.h"
#include "executor/step_timer.h"
#include "executor/zero_engine.h"
#include "planner/measurement.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

struct StepLog {
  int64_t step = 0;         // 1-based number of the step just done
  double loss = 0;          // global-batch mean cross-entropy (same on every rank)
  double time_s = 0;        // wall time of the whole step (batch to update)
  std::vector<PhasePeak> phase_peaks;  // forward / backward / optimizer (with a probe)
  int64_t peak_bytes = 0;   // max over the phases
  int64_t peak_reserved_bytes = 0;  // CUDA: the allocator's reserved bytes, max over the phases
};

class Trainer {
 public:
  // mesh and data must outlive the trainer (mesh.plan() is the plan trained). probe may be
  // null (no memory figures). Everything lives on `device` in the dtypes of
  // training.precision (executor/precision_dtypes.h).
  Trainer(const ModelSpec& model, const TrainingSpec& training, const DeviceMesh& mesh,
          const TokenSource& data, uint64_t seed, MemoryProbe* probe,
          at::Device device = at::kCPU);

  StepLog Step();

  int64_t step() const { return step_; }  // optimizer steps done
  // After restoring a snapshot: the step count (the data position follows from it).
  void set_step(int64_t step);
  int64_t microbatches() const { return shard_.microbatches(); }
  ZeroEngine& engine() { return engine_; }
  const LlamaModel& model() const { return model_; }
  const ParallelPlan& plan() const { return plan_; }
  const TrainingSpec& training() const { return training_; }
  const DeviceMesh& mesh() const { return mesh_; }
  const StepTimer& timer() const { return timer_; }  // every Step() of this trainer

 private:
  // Everything one micro-batch keeps from its forward for its backward, through one chunk
  // (pp = 1: the whole model).
  struct MicroBatch {
    at::Tensor ids;      // (B,S) int64: the first stage only
    at::Tensor targets;  // (B,S) int64: the last stage only
    std::vector<BlockStash> blocks;
    HeadStash head;
  };
  StepLog SingleStageStep();
  StepLog PipelineStep();
  void LoadTokens(int64_t microbatch, bool ids, bool targets, MicroBatch& mb) const;
  // Forward of one chunk: x is the chunk's input (undefined on the first stage: the
  // embedding of mb.ids). Returns the chunk's output, or undefined on the last stage with
  // *loss = the micro-batch's mean loss (an fp32 scalar on the device: not read here).
  at::Tensor ForwardChunk(const ChunkGroups& chunk, MicroBatch& mb, at::Tensor x, at::Tensor* loss);
  // Backward of one chunk: dy is d(loss)/d(output) (undefined on the last stage: the head's
  // dloss = d(step loss)/d(micro-batch loss) starts it). Returns d/d(input), undefined on
  // the first stage.
  at::Tensor BackwardChunk(const ChunkGroups& chunk, MicroBatch& mb, at::Tensor dy, double dloss);
  std::vector<int64_t> BoundaryShape() const;  // what crosses a stage boundary: (B,S,E)
  void BeginPhase();
  void EndPhase(const char* phase, StepLog& log);

  ModelSpec spec_;
  TrainingSpec training_;
  ParallelPlan plan_;
  const DeviceMesh& mesh_;
  Communicator& dp_;
  Communicator& pp_;
  int64_t chunks_per_rank_ = 1;  // v: the interleaved schedule's virtual_stages, else 1
  const TokenSource& data_;
  MemoryProbe* probe_;
  at::TensorOptions activations_;  // dtype and device of the activations
  BatchShard shard_;
  LlamaModel model_;
  ZeroEngine engine_;
  StepTimer timer_;
  int64_t step_ = 0;
};

}  // namespace meshplan
