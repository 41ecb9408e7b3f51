// Trainer: what one rank does per optimizer step, top-down (llm.c's train loop):
//   for each micro-batch: next batch -> forward -> backward (gradient sync launched per
//   group as its backward finishes) ; then optimizer update -> log (loss, time, memory).
//
// Holds the model (executor/llama_model.h), this rank's parameters, gradients and AdamW
// states (executor/zero_engine.h: DP / ZeRO-1/2/3 over the dp Communicator) and reads its
// shard of every global batch (executor/data.h). The micro-batch count is
// global_batch / (dp * micro_batch); each micro-batch's loss gradient is scaled by 1/count
// and the engine averages over dp, so the update equals a single-process step on the
// whole global batch. Pipeline/tensor/context parallelism (issue 6) will hand the trainer
// a stage (StageRange) and more communicators; today it trains the whole model.
// Not thread-safe. All ranks of the dp group must call Step() together.
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
};

class Trainer {
 public:
  // mesh and data must outlive the trainer (mesh.plan() is the plan trained). probe may be
  // null (no memory figures).
  Trainer(const ModelSpec& model, const TrainingSpec& training, const DeviceMesh& mesh,
          const TokenSource& data, uint64_t seed, MemoryProbe* probe);

  StepLog Step();

  int64_t step() const { return step_; }  // optimizer steps done
  // After restoring a snapshot: the step count (the data position follows from it).
  void set_step(int64_t step);
  int64_t microbatches() const { return shard_.microbatches(); }
  ZeroEngine& engine() { return engine_; }
  const LlamaModel& model() const { return model_; }
  const ParallelPlan& plan() const { return plan_; }
  const DeviceMesh& mesh() const { return mesh_; }
  const StepTimer& timer() const { return timer_; }  // every Step() of this trainer

 private:
  // Everything one micro-batch keeps from its forward for its backward.
  struct MicroBatch {
    at::Tensor ids;      // (B,S) int64
    at::Tensor targets;  // (B,S) int64
    std::vector<BlockStash> blocks;
    HeadStash head;
  };
  double Forward(MicroBatch& mb);               // returns the micro-batch's mean loss
  void Backward(MicroBatch& mb, double dloss);  // dloss: d(step loss)/d(micro-batch loss)
  void BeginPhase();
  void EndPhase(const char* phase, StepLog& log);

  ModelSpec spec_;
  TrainingSpec training_;
  ParallelPlan plan_;
  const DeviceMesh& mesh_;
  Communicator& dp_;
  const TokenSource& data_;
  MemoryProbe* probe_;
  BatchShard shard_;
  LlamaModel model_;
  ZeroEngine engine_;
  StepTimer timer_;
  int64_t step_ = 0;
};

}  // namespace meshplan
