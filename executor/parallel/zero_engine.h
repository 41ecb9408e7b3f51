// ZeroEngine: one rank's parameters, gradients and AdamW states for data parallelism with
// ZeRO stage 0 (plain DDP) to 3 (FSDP full shard), over the weight-replica Communicator:
// the dp x cp ranks that hold the same weights (executor/parallel/device_mesh.h weight_replicas()).
// The unit is a parameter group (executor/model/param_layout.h): one flat buffer padded to a
// multiple of n = weight_replicas.size(), and one communication bucket. Each group gets one backward
// contribution (GradReady) per micro-batch; backwards of different micro-batches may
// interleave as long as each group's contributions come one at a time. Gradients are summed
// over the replicas and divided by n (with each of the m micro-batch losses scaled by 1/m:
// the gradient of the global-batch mean).
// Expert groups (GroupKind::kExperts, expert parallelism) live on the expert weight replicas
// instead: the ranks holding the same experts (dp x cp / ep); they are sharded, reduced
// and gathered over that group, and divided by the same n as every group (each expert rank
// summed the row gradients sent by its ep peers, so the sum over the expert replicas covers
// all n replicas' tokens).
// Optimizer offload (ZeRO-Offload, the plan's offload_opt; planner/cost/offload.h): the
// optimizer shard lives in host memory, pinned when the device is CUDA, plain CPU tensors
// on a CPU rank (host == device: the same code runs). Per group: the parameters AdamW updates
// (the fp32 master under mixed precision, else a copy of the owned params in their dtype),
// Adam's m and v, and a buffer for the gradient shard; once, the update's workspace for the
// largest group (AdamW's denominator unless fused, mixed's fp32 gradient copy), the
// transient the on-device update would allocate. Step() copies the reduced gradient
// shard into that buffer, runs AdamW on the host, and copies the updated parameters back
// into the device's owned params (then stages 1-2 all-gather as without offload). The
// result is the on-device optimizer's, bit for bit on a CPU rank.
// Not thread-safe; every rank of the replica group must make the same calls in the same order.
// Who holds what per stage, when each collective runs, what is alive at once:
// docs/executor_internals.md#zero-engine.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "executor/model/adamw.h"
#include "executor/model/param_layout.h"
#include "planner/training_spec.h"

namespace meshplan {

class ZeroEngine;

// ParamsLease: one hold on a group's full parameters (ZeroEngine::LeaseParams). Movable,
// not copyable; the hold ends when the lease is destroyed or reset, so an acquire can never
// go without its release. Views taken from params() must not outlive the lease (stage 3
// frees the buffer when the last lease ends).
class ParamsLease {
 public:
  ParamsLease() = default;
  ParamsLease(ParamsLease&& other) noexcept { *this = std::move(other); }
  ParamsLease& operator=(ParamsLease&& other) noexcept;
  ParamsLease(const ParamsLease&) = delete;
  ParamsLease& operator=(const ParamsLease&) = delete;
  ~ParamsLease() { reset(); }

  const at::Tensor& params() const { return params_; }
  bool held() const { return engine_ != nullptr; }
  void reset();  // ends the hold (a no-op when none is held)

 private:
  friend class ZeroEngine;
  ParamsLease(ZeroEngine* engine, int group, at::Tensor params)
      : engine_(engine), group_(group), params_(std::move(params)) {}
  ZeroEngine* engine_ = nullptr;
  int group_ = -1;
  at::Tensor params_;
};

class ZeroEngine {
 public:
  // Initialises every group from `seed` (InitGroup: the same values for any replica count) and
  // keeps this rank's part. layout.shards must equal weight_replicas.size(). With
  // weight_replicas.size() == 1 every stage runs as stage 0 (zero_stage() says 0).
  // All buffers live on `device` in the dtypes of `precision`, but with `offload_optimizer`
  // the optimizer shard, which lives in host memory (see above).
  // expert_weight_replicas: the group of the expert groups (null: `weight_replicas`);
  // layout.ep.shards must equal its size.
  ZeroEngine(const ParamLayout& layout, int zero_stage, Communicator& weight_replicas,
             const AdamWOptions& adamw, uint64_t seed, Precision precision = Precision::kFp32,
             at::Device device = at::kCPU, Communicator* expert_weight_replicas = nullptr,
             bool offload_optimizer = false);
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  const ParamLayout& layout() const { return layout_; }
  int zero_stage() const { return zero_stage_; }
  int64_t optimizer_steps() const { return optimizer_steps_; }
  bool offloads_optimizer() const { return offload_optimizer_; }
  // Bytes of the offloaded optimizer shard in host memory: every group's parameter copy, m,
  // v and gradient buffer, and the update's workspace, allocated once at construction (0
  // without offload): what the step keeps and uses on the host. The figure the detailed
  // memory model's host_optimizer_bytes predicts (planner/cost/offload.h).
  int64_t host_optimizer_bytes() const;

  // --- forward and backward -------------------------------------------------------------
  // The full flat params of group g (padded numel), held while the lease lives. Stage 3:
  // the first lease of a group waits for its prefetch, or all-gathers blocking when none was
  // launched; the buffer is freed when the last lease of the group ends (reference count).
  ParamsLease LeaseParams(int g);
  // Stage 3: allocates group g's full buffer and launches its all-gather async; a no-op
  // for other stages, at prefetch depth 0, or when g is already gathered or in flight.
  // Collective: every rank must prefetch the same groups in the same order. The group
  // holds its buffer until its next Acquire / Release cycle ends.
  void PrefetchParams(int g);
  // True while group g's prefetched all-gather is launched and not yet waited for.
  bool ParamsInFlight(int g) const { return groups_[g].gather != nullptr; }
  // How many first acquires found their group prefetched (stage 3; since construction).
  int64_t prefetched_acquires() const { return prefetched_acquires_; }
  // Stage 3, as a pass starts computing the group at position `at` of `order` (the groups
  // the pass acquires, in its order): prefetches the prefetch_depth() groups after it
  // (PrefetchParams each; the nearer ones are mostly in flight already). Depth 0: nothing,
  // each group gathers when acquired. Collective as PrefetchParams.
  void PrefetchAhead(std::span<const int> order, size_t at);
  // The plan's `prefetch` (0 .. kMaxZero3Prefetch): groups gathered ahead of the compute; 1
  // by default, the trainer sets the plan's.
  int64_t prefetch_depth() const { return prefetch_depth_; }
  void set_prefetch_depth(int64_t depth);

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
  // Averages the gradients over the replicas, AdamW on this rank's part (lr from `adamw`; mixed: on
  // the fp32 master, rounded into the params), stages 1-2 all-gather the updated params,
  // and clears the gradients.
  void Step();

  // --- state (snapshots and tests) ------------------------------------------------------
  // This rank's owned part of group g: the shard (stages 1-3) or everything (stage 0).
  struct OwnedState {
    at::Tensor params, m, v;  // views into the engine's buffers (write to restore); params
                              // is what AdamW updates: the fp32 master under mixed
                              // precision, the host copy with offload
  };
  OwnedState Owned(int g);
  // After a restore: the master or host copy is copied (rounded) into the params; stages 1-2
  // all-gather the owned param shards into the full params. Collective: every rank calls it.
  void SyncParamsFromShards();
  void set_optimizer_steps(int64_t steps) { optimizer_steps_ = steps; }
  // A copy of group g's full (unpadded) params. Stage 3: collective (all-gathers).
  at::Tensor FullParamsCopy(int g);

 private:
  friend class ParamsLease;
  at::Tensor AcquireParams(int g);
  void ReleaseParams(int g);

  struct Group {
    at::Tensor params;      // stages 0-2: full padded; stage 3: shard
    at::Tensor gathered;    // stage 3: full params while acquired or prefetched
    std::unique_ptr<CommHandle> gather;  // stage 3: the prefetch's all-gather in flight
    int acquired = 0;
    at::Tensor grad;        // full padded: stages 0-1 always; 2-3 during backward
    at::Tensor grad_shard;  // stages 1-3
    at::Tensor m, v;        // owned part (offload: on the host)
    at::Tensor master;      // what AdamW updates when not the params: mixed precision's fp32
                            // copy of the owned params; offload: the host copy (fp32 master
                            // or the params' dtype)
    at::Tensor host_grad;   // offload: the gradient shard, copied to the host for AdamW
  };
  struct Pending {
    int group = -1;
    std::unique_ptr<CommHandle> handle;
    at::Tensor full_grad;   // stages 2-3: kept alive until the reduce-scatter is done
    at::Tensor partial;     // stages 2-3, micro-batch > 0: to add into grad_shard
  };
  Communicator& CommOf(size_t g) const;  // weight_replicas_, or expert_weight_replicas_ (experts)
  at::Tensor ParamShardView(Group& group, const ParamGroup& spec);
  at::Tensor OwnedParams(Group& group, const ParamGroup& spec);  // what AdamW updates
  void Update(Group& group, at::Tensor params, const at::Tensor& grad);
  void FinishPending();

  ParamLayout layout_;
  int zero_stage_;
  Communicator& weight_replicas_;
  Communicator& expert_weight_replicas_;
  AdamWOptions adamw_;
  at::TensorOptions compute_, state_;  // dtype and device of params / grads, of m / v
  bool fp32_master_ = false;
  bool offload_optimizer_ = false;
  at::Tensor host_grad32_;  // offload, mixed: the fp32 copy of a gradient shard AdamW reads
  at::Tensor host_denom_;   // offload, unfused AdamW: its denominator (adamw.h workspace)
  std::vector<Group> groups_;
  std::vector<Pending> pending_;
  int64_t microbatches_ = 1;
  std::vector<int64_t> contributions_;  // per group, this step
  size_t groups_complete_ = 0;          // groups with all m contributions this step
  int64_t optimizer_steps_ = 0;
  int64_t prefetch_depth_ = 1;
  int64_t prefetched_acquires_ = 0;
};

}  // namespace meshplan
