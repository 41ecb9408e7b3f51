// ZeroEngine: one rank's parameters, gradients and AdamW states for data parallelism with
// ZeRO stage 0 (plain DDP) to 3 (FSDP full shard), over the dp Communicator.
//
// The unit of everything is a parameter group (executor/param_layout.h: the embedding, each
// block, the head): one flat buffer, padded to a multiple of n = dp.size(), whose rank-r
// shard is elements [r * shard, (r+1) * shard). What each rank holds (P = the padded numel
// summed over groups, P_g one group's), params and gradients in the compute dtype, Adam m
// and v in the state dtype of the precision regime (executor/precision_dtypes.h); mixed
// precision adds an fp32 master copy of the owned params (the part AdamW updates: P for
// stage 0, the shard P/n for stages 1-3):
//
//   stage  params            gradients (persistent)    per group while in backward     Adam m, v
//   0      full P            full P                    -                              full 2P
//   1      full P            full P + shard P/n        -                              shard 2P/n
//   2      full P            shard P/n                 full grad P_g                  shard 2P/n
//   3      shard P/n         shard P/n                 gathered params P_g, grad P_g  shard 2P/n
//          (+ the next group's gathered params while prefetched, see stage 3 below)
//
// Communication (SPEC.md 2c), one bucket = one group. A step runs m micro-batches; each
// group gets one backward contribution (GradReady) per micro-batch, counted per group, so
// the backward passes of different micro-batches may interleave with forwards and with
// each other (pipeline schedules) as long as each group's contributions come one at a time:
//   0: after a group's m-th contribution, async all-reduce of its gradient in place; all
//      are waited for before the optimizer (overlapped with the rest of backward).
//   1: the same timing, async reduce-scatter of the full gradient into the shard buffer;
//      after AdamW on the shard, all-gather of the updated shard into the full params (in
//      place: the input is this rank's slice of the output).
//   2: after EVERY contribution of a group, async reduce-scatter of its full gradient; the
//      full gradient is freed when that reduce-scatter completes, which the engine waits
//      for when the next group's gradient is ready (so at most two full group gradients
//      exist at once: the one being computed and the one in flight). A group's first
//      contribution of the step reduce-scatters straight into the shard; later ones into a
//      temporary shard that is added and freed. Update and all-gather as in stage 1.
//   3: as 2 for gradients; params are all-gathered into a temporary full buffer (before a
//      group's forward, again before its backward) and freed on the matching ReleaseParams
//      (ref-counted: the head stays gathered from its forward through its backward, across
//      every micro-batch in flight on it; a tied embedding is held by the head too).
//      PrefetchParams(g) allocates that buffer and launches its all-gather async (on the
//      same dp communicator, queued behind whatever is in flight there: every rank issues
//      it at the same point of its call sequence); AcquireParams(g) then only waits for it,
//      else it gathers blocking. A prefetched group stays allocated until its own
//      Acquire / Release cycle frees it, so with the trainer prefetching one group ahead
//      (executor/trainer.cc) at most two groups are gathered at once: the one computing
//      and the next one (the head and the last block at the head's backward).
// With pp = 1 (one micro-batch's backward at a time) this is exactly "micro-batch i of m".
// Gradients are summed over the dp ranks and then divided by n, so with the loss of each
// of the m micro-batches scaled by 1/m the result is the gradient of the global-batch mean.
// Communicator temporaries (GlooCommunicator: one shard-sized buffer per reduce-scatter
// when n > 2) come on top.
// Not thread-safe; every rank of the dp group must make the same calls in the same order.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/adamw.h"
#include "executor/communicator.h"
#include "executor/param_layout.h"
#include "planner/training_spec.h"

namespace meshplan {

class ZeroEngine {
 public:
  // Initialises every group from `seed` (InitGroup: the same values for any dp size) and
  // keeps this rank's part. layout.shards must equal dp.size(). With dp.size() == 1 every
  // stage runs as stage 0 (zero_stage() says 0).
  // All buffers live on `device` in the dtypes of `precision`.
  ZeroEngine(const ParamLayout& layout, int zero_stage, Communicator& dp,
             const AdamWOptions& adamw, uint64_t seed, Precision precision = Precision::kFp32,
             at::Device device = at::kCPU);
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  const ParamLayout& layout() const { return layout_; }
  int zero_stage() const { return zero_stage_; }
  int64_t optimizer_steps() const { return optimizer_steps_; }

  // --- forward and backward -------------------------------------------------------------
  // The full flat params of group g (padded numel). Stage 3: on the first acquire waits
  // for the group's prefetch, or all-gathers blocking when none was launched; keeps them
  // until the matching release.
  at::Tensor AcquireParams(int g);
  void ReleaseParams(int g);
  // Stage 3: allocates group g's full buffer and launches its all-gather async; a no-op
  // for other stages, when prefetching is off, or when g is already gathered or in flight.
  // Collective: every rank must prefetch the same groups in the same order. The group
  // holds its buffer until its next Acquire / Release cycle ends.
  void PrefetchParams(int g);
  // True while group g's prefetched all-gather is launched and not yet waited for.
  bool ParamsInFlight(int g) const { return groups_[g].gather != nullptr; }
  // How many first acquires found their group prefetched (stage 3; since construction).
  int64_t prefetched_acquires() const { return prefetched_acquires_; }
  // On by default; off makes PrefetchParams a no-op (tests compare both).
  void set_prefetch(bool enabled) { prefetch_ = enabled; }

  // Call at the start of each step: every group will get `microbatches` contributions.
  void BeginStep(int64_t microbatches);
  // The full flat gradient of group g to accumulate into (stages 2-3: allocated zeroed on
  // the first call of each contribution).
  at::Tensor GradBuffer(int g);
  // Group g's gradient contribution (one micro-batch's backward) is complete: launch its
  // communication as the stage's rule says.
  void GradReady(int g);
  // After a backward pass (one micro-batch through one stage or chunk): stages 2-3 wait for
  // the reduce-scatter in flight (freeing its full gradient); stages 0-1 wait for every
  // launched communication once every group has had its m contributions.
  void EndBackward();

  // --- update ---------------------------------------------------------------------------
  // Averages the gradients over dp, AdamW on this rank's part (lr from `adamw`; mixed: on
  // the fp32 master, rounded into the params), stages 1-2 all-gather the updated params,
  // and clears the gradients.
  void Step();

  // --- state (snapshots and tests) ------------------------------------------------------
  // This rank's owned part of group g: the shard (stages 1-3) or everything (stage 0).
  struct OwnedState {
    at::Tensor params, m, v;  // views into the engine's buffers (write to restore); params
                              // is the fp32 master under mixed precision
  };
  OwnedState Owned(int g);
  // After a restore: mixed precision rounds the master into the params; stages 1-2
  // all-gather the owned param shards into the full params. Collective: every rank calls it.
  void SyncParamsFromShards();
  void set_optimizer_steps(int64_t steps) { optimizer_steps_ = steps; }
  // A copy of group g's full (unpadded) params. Stage 3: collective (all-gathers).
  at::Tensor FullParamsCopy(int g);

 private:
  struct Group {
    at::Tensor params;      // stages 0-2: full padded; stage 3: shard
    at::Tensor gathered;    // stage 3: full params while acquired or prefetched
    std::unique_ptr<CommHandle> gather;  // stage 3: the prefetch's all-gather in flight
    int acquired = 0;
    at::Tensor grad;        // full padded: stages 0-1 always; 2-3 during backward
    at::Tensor grad_shard;  // stages 1-3
    at::Tensor m, v;        // owned part
    at::Tensor master;      // mixed precision: fp32 copy of the owned params
  };
  struct Pending {
    int group = -1;
    std::unique_ptr<CommHandle> handle;
    at::Tensor full_grad;   // stages 2-3: kept alive until the reduce-scatter is done
    at::Tensor partial;     // stages 2-3, micro-batch > 0: to add into grad_shard
  };
  at::Tensor ParamShardView(Group& group, const ParamGroup& spec);
  at::Tensor OwnedParams(Group& group, const ParamGroup& spec);  // what AdamW updates
  void Update(Group& group, at::Tensor params, const at::Tensor& grad);
  void FinishPending();

  ParamLayout layout_;
  int zero_stage_;
  Communicator& dp_;
  AdamWOptions adamw_;
  at::TensorOptions compute_, state_;  // dtype and device of params / grads, of m / v
  bool fp32_master_ = false;
  std::vector<Group> groups_;
  std::vector<Pending> pending_;
  int64_t microbatches_ = 1;
  std::vector<int64_t> contributions_;  // per group, this step
  size_t groups_complete_ = 0;          // groups with all m contributions this step
  int64_t optimizer_steps_ = 0;
  bool prefetch_ = true;
  int64_t prefetched_acquires_ = 0;
};

}  // namespace meshplan
