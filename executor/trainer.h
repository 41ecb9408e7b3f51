// Trainer: what one rank does per optimizer step, top-down (llm.c's train loop):
//   pp = 1: for each micro-batch: next batch -> forward -> backward; then update -> log.
//   pp > 1: this rank's items of StageOrder (planner/pipeline_schedule.h), in order (each a
//           forward or backward of one micro-batch through one model chunk); then the update.
// Holds the model (executor/model/llama_model.h) and this rank's parameters, gradients and
// AdamW states (executor/parallel/zero_engine.h), and reads its shard of every global batch
// (executor/data.h). The update equals a single-process step on the whole global batch; the
// logged loss is the global-batch mean on every rank. zb_h1 runs each W inside its B (1F1B).
// Memory per phase: the probe's peak of every forward item is reported as "forward", of
// every backward item as "backward" (max over items), the update as "optimizer".
// Not thread-safe. All ranks of the mesh must call Step() together.
// Composition order, loss averaging, stashes in flight: docs/executor_internals.md#trainer.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "executor/data.h"
#include "executor/device/memory_probe.h"
#include "executor/device/step_timer.h"
#include "executor/model/llama_model.h"
#include "executor/parallel/device_mesh.h"
#include "executor/parallel/pipeline_p2p.h"
#include "executor/parallel/zero_engine.h"
#include "planner/measure/measurement.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

struct StepLog {
  int64_t step = 0;         // 1-based number of the step just done
  double loss = 0;          // global-batch mean cross-entropy (same on every rank)
  // When the loss is not finite: this rank's first micro-batch whose loss was not (-1 when
  // all of its were finite, or it computes none: not the last pipeline stage).
  int64_t first_nonfinite_microbatch = -1;
  double time_s = 0;        // wall time of the whole step (batch to update)
  std::vector<PhasePeak> phase_peaks;  // forward / backward / optimizer (with a probe)
  int64_t peak_bytes = 0;   // max over the phases
  int64_t peak_reserved_bytes = 0;  // CUDA: the allocator's reserved bytes, max over the phases
};

class Trainer {
 public:
  // mesh and data must outlive the trainer (mesh.plan() is the plan trained). probe may be
  // null (no memory figures). Everything lives on `device` in the dtypes of
  // training.precision (executor/model/precision_dtypes.h).
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
    ParamsLease head_params;            // the last stage: from the head's forward to its backward
    ParamsLease tied_embedding_params;  // and a tied embedding's wte, likewise
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
  // A MoE block's routed experts (its experts group), leased and viewed into w.moe; an
  // empty lease for a dense block.
  ParamsLease LeaseExperts(int block_group, BlockWeights& w);
  std::vector<int64_t> BoundaryShape() const;  // what crosses a stage boundary: (B,S,E)
  void BeginPhase();
  void EndPhase(const char* phase, StepLog& log);
  // The first of `losses` (micro-batch -> its loss scalar) that is not finite, or -1. Read
  // only when the step's loss is not finite: no host sync otherwise.
  static int64_t FirstNonFinite(const std::vector<std::pair<int64_t, at::Tensor>>& losses);

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
