// ZeRO 0-3 over flat parameter groups (see zero_engine.h for who holds what and when).
#include "executor/parallel/zero_engine.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "executor/model/precision_dtypes.h"
#include "planner/parallel_plan.h"

namespace meshplan {

ZeroEngine::ZeroEngine(const ParamLayout& layout, int zero_stage, Communicator& weight_replicas,
                       const AdamWOptions& adamw, uint64_t seed, Precision precision,
                       at::Device device, Communicator* expert_weight_replicas,
                       bool offload_optimizer)
    // Over a single replica there is nothing to shard, gather or send: stage 0 (no shard
    // buffers), as planner/cost/memory_detailed.cc assumes.
    : layout_(layout),
      zero_stage_(weight_replicas.size() > 1 ? zero_stage : 0),
      weight_replicas_(weight_replicas),
      expert_weight_replicas_(expert_weight_replicas != nullptr ? *expert_weight_replicas
                                                                 : weight_replicas),
      adamw_(adamw),
      offload_optimizer_(offload_optimizer) {
  const PrecisionDtypes dtypes = DtypesFor(precision);
  compute_ = at::TensorOptions().dtype(dtypes.compute).device(device);
  // Offload: host memory, pinned for the device's DMA when it is a GPU.
  const at::TensorOptions host =
      at::TensorOptions().device(at::kCPU).pinned_memory(device.is_cuda());
  state_ = (offload_optimizer ? host : compute_).dtype(dtypes.state);
  fp32_master_ = dtypes.fp32_master;
  const at::TensorOptions master = (offload_optimizer ? host : compute_)
                                       .dtype(fp32_master_ ? at::kFloat : dtypes.compute);
  if (zero_stage < 0 || zero_stage > 3)
    throw std::invalid_argument("ZeroEngine: zero_stage must be 0..3");
  if (layout.shards != weight_replicas.size())
    throw std::invalid_argument("ZeroEngine: the layout is sharded " +
                                std::to_string(layout.shards) + " ways, the dp group has " +
                                std::to_string(weight_replicas.size()) + " ranks");
  if (expert_weight_replicas_.size() != layout.ep.shards)
    throw std::invalid_argument("ZeroEngine: the experts are sharded " +
                                std::to_string(layout.ep.shards) + " ways, the expert replica "
                                "group has " + std::to_string(expert_weight_replicas_.size()) + " ranks");
  groups_.resize(layout_.groups.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& spec = layout_.groups[g];
    Group& group = groups_[g];
    const int64_t r = CommOf(g).rank();
    const int64_t shard = spec.shard_numel;
    // The whole group's fp32 values (rank-independent), of which this rank keeps its part.
    const at::Tensor init = InitGroup(spec, seed);
    const at::Tensor owned_init = zero_stage_ == 0 ? init : init.narrow(0, r * shard, shard);
    group.params = (zero_stage_ == 3 ? owned_init : init)
                       .to(compute_, /*non_blocking=*/false, /*copy=*/true);
    if (fp32_master_ || offload_optimizer_)
      group.master = at::empty({owned_init.numel()}, master).copy_(owned_init);
    if (zero_stage_ <= 1) group.grad = at::zeros({spec.padded_numel}, compute_);
    if (zero_stage_ >= 1) group.grad_shard = at::zeros({shard}, compute_);
    if (offload_optimizer_) group.host_grad = at::empty({owned_init.numel()}, host.dtype(dtypes.compute));
    group.m = at::zeros({owned_init.numel()}, state_);
    group.v = at::zeros({owned_init.numel()}, state_);
  }
  if (offload_optimizer_) {  // the update's workspace, sized for the largest group
    int64_t largest = 0;
    for (const Group& group : groups_) largest = std::max(largest, group.m.numel());
    if (master.dtype() != compute_.dtype()) host_grad32_ = at::empty({largest}, master);
    if (!AdamWRunsFused(at::kCPU, master.dtype().toScalarType(), master.dtype().toScalarType(),
                        dtypes.state, adamw_))
      host_denom_ = at::empty({largest}, state_);
  }
}

// ---------------------------------------------------------------------------------------
// Parameters

Communicator& ZeroEngine::CommOf(size_t g) const {
  return layout_.groups[g].kind == GroupKind::kExperts ? expert_weight_replicas_ : weight_replicas_;
}

at::Tensor ZeroEngine::ParamShardView(Group& group, const ParamGroup& spec) {
  if (zero_stage_ == 3) return group.params;
  const size_t g = static_cast<size_t>(&group - groups_.data());
  return group.params.narrow(0, CommOf(g).rank() * spec.shard_numel, spec.shard_numel);
}

at::Tensor ZeroEngine::OwnedParams(Group& group, const ParamGroup& spec) {
  return zero_stage_ == 0 ? group.params : ParamShardView(group, spec);
}

void ZeroEngine::Update(Group& group, at::Tensor params, const at::Tensor& grad) {
  if (!group.master.defined()) {
    AdamWUpdate(params, grad, group.m, group.v, optimizer_steps_, adamw_);
    return;
  }
  // Offload: the gradient shard to the host first (device -> host).
  const at::Tensor& g = group.host_grad.defined() ? group.host_grad.copy_(grad) : grad;
  // Mixed precision: the fp32 gradient copy and AdamW's temporary are the update's
  // transient (planner/cost/memory_detailed.cc, optimizer phase); offload keeps them in
  // the host workspace.
  at::Tensor g32 = g;
  if (g.scalar_type() != group.master.scalar_type())
    g32 = host_grad32_.defined() ? host_grad32_.narrow(0, 0, g.numel()).copy_(g)
                                 : g.to(group.master.scalar_type());
  AdamWUpdate(group.master, g32, group.m, group.v, optimizer_steps_, adamw_, host_denom_);
  params.copy_(group.master);  // offload: host -> device; mixed: rounded to the compute dtype
}

int64_t ZeroEngine::host_optimizer_bytes() const {
  if (!offload_optimizer_) return 0;
  int64_t bytes = 0;
  for (const Group& group : groups_)
    for (const at::Tensor* t : {&group.master, &group.m, &group.v, &group.host_grad})
      bytes += static_cast<int64_t>(t->nbytes());
  for (const at::Tensor* t : {&host_grad32_, &host_denom_})
    if (t->defined()) bytes += static_cast<int64_t>(t->nbytes());
  return bytes;
}

ParamsLease& ParamsLease::operator=(ParamsLease&& other) noexcept {
  if (this != &other) {
    reset();
    engine_ = std::exchange(other.engine_, nullptr);
    group_ = std::exchange(other.group_, -1);
    params_ = std::move(other.params_);
  }
  return *this;
}

void ParamsLease::reset() {
  if (engine_ == nullptr) return;
  params_.reset();  // the view first, so the release really frees the gathered buffer
  std::exchange(engine_, nullptr)->ReleaseParams(group_);
  group_ = -1;
}

ParamsLease ZeroEngine::LeaseParams(int g) { return ParamsLease(this, g, AcquireParams(g)); }

at::Tensor ZeroEngine::AcquireParams(int g) {
  Group& group = groups_[g];
  if (zero_stage_ != 3) return group.params;
  if (group.acquired++ == 0) {
    if (group.gather) {  // prefetched: its buffer exists, wait for the all-gather
      group.gather->Wait();
      group.gather.reset();
      ++prefetched_acquires_;
    } else {
      group.gathered = at::empty({layout_.groups[g].padded_numel}, compute_);
      CommOf(static_cast<size_t>(g)).AllGather(group.params, group.gathered);
    }
  }
  return group.gathered;
}

void ZeroEngine::PrefetchParams(int g) {
  Group& group = groups_[g];
  if (zero_stage_ != 3 || prefetch_depth_ == 0 || group.gathered.defined()) return;
  // The shard it reads is only written by Step(), which refuses to run while this is out.
  group.gathered = at::empty({layout_.groups[g].padded_numel}, compute_);
  group.gather = CommOf(static_cast<size_t>(g)).AllGatherAsync(group.params, group.gathered);
}

void ZeroEngine::PrefetchAhead(std::span<const int> order, size_t at) {
  for (size_t i = at + 1; i < order.size() && i <= at + static_cast<size_t>(prefetch_depth_); ++i)
    PrefetchParams(order[i]);
}

void ZeroEngine::set_prefetch_depth(int64_t depth) {
  if (depth < 0 || depth > kMaxZero3Prefetch)
    throw std::invalid_argument("ZeroEngine: the prefetch depth must be 0.." +
                                std::to_string(kMaxZero3Prefetch) + ", got " +
                                std::to_string(depth));
  prefetch_depth_ = depth;
}

void ZeroEngine::ReleaseParams(int g) {
  Group& group = groups_[g];
  if (zero_stage_ != 3) return;
  if (group.acquired <= 0) throw std::logic_error("ZeroEngine: release without acquire");
  if (--group.acquired == 0) group.gathered.reset();
}

// ---------------------------------------------------------------------------------------
// Gradients

void ZeroEngine::BeginStep(int64_t microbatches) {
  if (microbatches < 1) throw std::invalid_argument("ZeroEngine: a step needs micro-batches");
  microbatches_ = microbatches;
  contributions_.assign(groups_.size(), 0);
  groups_complete_ = 0;
}

at::Tensor ZeroEngine::GradBuffer(int g) {
  Group& group = groups_[g];
  if (!group.grad.defined()) group.grad = at::zeros({layout_.groups[g].padded_numel}, compute_);
  return group.grad;
}

void ZeroEngine::GradReady(int g) {
  Group& group = groups_[g];
  if (contributions_.size() != groups_.size()) contributions_.assign(groups_.size(), 0);
  const int64_t index = contributions_[g]++;  // this contribution's number, 0..m-1
  if (index >= microbatches_)
    throw std::logic_error("ZeroEngine: group " + layout_.groups[g].name + " got more than " +
                           std::to_string(microbatches_) + " gradient contributions in a step");
  const bool last = index == microbatches_ - 1;
  if (last) ++groups_complete_;
  Communicator& comm = CommOf(static_cast<size_t>(g));
  if (zero_stage_ == 0) {
    if (last) pending_.push_back({g, comm.AllReduceSumAsync(group.grad), {}, {}});
    return;
  }
  if (zero_stage_ == 1) {
    if (last) pending_.push_back({g, comm.ReduceScatterSumAsync(group.grad, group.grad_shard), {}, {}});
    return;
  }
  // Stages 2-3: reduce-scatter every contribution; at most one in flight.
  FinishPending();
  Pending p;
  p.group = g;
  p.full_grad = std::move(group.grad);  // group.grad is now undefined
  at::Tensor out = group.grad_shard;
  if (index > 0) out = p.partial = at::empty({layout_.groups[g].shard_numel}, compute_);
  p.handle = comm.ReduceScatterSumAsync(p.full_grad, out);
  pending_.push_back(std::move(p));
}

void ZeroEngine::FinishPending() {
  for (Pending& p : pending_) {
    p.handle->Wait();
    if (p.partial.defined()) groups_[p.group].grad_shard.add_(p.partial);
  }
  pending_.clear();  // frees the full gradients and partial shards
}

void ZeroEngine::EndBackward() {
  if (zero_stage_ >= 2 || groups_complete_ == groups_.size()) FinishPending();
}

// ---------------------------------------------------------------------------------------
// Update

void ZeroEngine::Step() {
  FinishPending();
  for (size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g].gathered.defined())  // an all-gather may still be reading the shard
      throw std::logic_error("ZeroEngine: group " + layout_.groups[g].name +
                             " is still gathered or prefetched at the optimizer step");
  if (!contributions_.empty())
    for (size_t g = 0; g < groups_.size(); ++g)
      if (contributions_[g] != microbatches_)
        throw std::logic_error("ZeroEngine: group " + layout_.groups[g].name + " got " +
                               std::to_string(contributions_[g]) + " of " +
                               std::to_string(microbatches_) + " gradient contributions");
  contributions_.assign(groups_.size(), 0);
  groups_complete_ = 0;
  ++optimizer_steps_;
  const double scale = 1.0 / static_cast<double>(weight_replicas_.size());
  std::vector<std::unique_ptr<CommHandle>> gathers;
  for (size_t g = 0; g < groups_.size(); ++g) {
    Group& group = groups_[g];
    const ParamGroup& spec = layout_.groups[g];
    if (zero_stage_ == 0) {
      group.grad.mul_(scale);
      Update(group, group.params, group.grad);
      group.grad.zero_();
      continue;
    }
    group.grad_shard.mul_(scale);
    at::Tensor shard = ParamShardView(group, spec);
    Update(group, shard, group.grad_shard);
    group.grad_shard.zero_();
    if (zero_stage_ == 1) group.grad.zero_();
    // Stages 1-2: every rank's updated shard back into everyone's full params.
    if (zero_stage_ <= 2) gathers.push_back(CommOf(g).AllGatherAsync(shard, group.params));
  }
  for (auto& handle : gathers) handle->Wait();
}

// ---------------------------------------------------------------------------------------
// State

ZeroEngine::OwnedState ZeroEngine::Owned(int g) {
  Group& group = groups_[g];
  const at::Tensor params =
      group.master.defined() ? group.master : OwnedParams(group, layout_.groups[g]);
  return {params, group.m, group.v};
}

void ZeroEngine::SyncParamsFromShards() {
  for (size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g].master.defined()) OwnedParams(groups_[g], layout_.groups[g]).copy_(groups_[g].master);
  if (zero_stage_ == 0 || zero_stage_ == 3) return;
  for (size_t g = 0; g < groups_.size(); ++g) {
    Group& group = groups_[g];
    CommOf(g).AllGather(ParamShardView(group, layout_.groups[g]), group.params);
  }
}

at::Tensor ZeroEngine::FullParamsCopy(int g) {
  const ParamGroup& spec = layout_.groups[g];
  at::Tensor full = AcquireParams(g).narrow(0, 0, spec.numel).clone();
  ReleaseParams(g);
  return full;
}

}  // namespace meshplan
