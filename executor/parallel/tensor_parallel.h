// TensorParallel: the communication of Megatron tensor parallelism (and sequence
// parallelism) inside one tp group, as the four conjugate operations around a
// column-parallel -> row-parallel region, plus the sequence-parallel token order and the
// gradients of replicated weights (norms, the MoE router). The model
// (executor/model/llama_model.h, executor/model/moe_block.h) calls these; with tp size 1
// every call is free (no communication, no copy).
//                         no sp (residual (B,S,E) replicated)   sp (residual (B,S/t,E) sharded)
//   EnterRegion(h)         h itself                              all-gather -> (t,B,S/t,E) new
//   LeaveRegion(y)         all-reduce of y in place, returns y   reduce-scatter -> (B,S/t,E) new
//   LeaveRegionBackward    = EnterRegion on the output gradient
//   EnterRegionBackward    = LeaveRegion on the (partial) input gradient
// (t,B,S/t,E) is "chunk-major" token order (exec2 contract): chunk j is tp rank j's tokens.
// The regions, communicator temporaries: docs/executor_internals.md#tensor-parallel.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "executor/comm/communicator.h"

namespace meshplan {

// What the model needs to know about its tp group. comm null means tp size 1.
struct TpConfig {
  Communicator* comm = nullptr;
  bool sequence_parallel = false;
};

class TensorParallel {
 public:
  explicit TensorParallel(TpConfig config);

  int64_t size() const { return size_; }
  int64_t rank() const { return rank_; }
  // Sequence parallelism is on (the sp flag with tp > 1).
  bool sp() const { return sp_; }
  // How many token chunks a region's tensors hold: t under sp, else 1 (ops.h "chunks").
  int64_t chunks() const { return sp_ ? size_ : 1; }
  Communicator& comm() const { return *comm_; }

  at::Tensor EnterRegion(const at::Tensor& h) const;
  at::Tensor LeaveRegion(at::Tensor y) const;
  at::Tensor LeaveRegionBackward(const at::Tensor& dy) const { return EnterRegion(dy); }
  at::Tensor EnterRegionBackward(at::Tensor dh) const { return LeaveRegion(std::move(dh)); }

  // Token ids / targets (B,S) into the region's token order: sp: (t,B,S/t) chunk-major
  // copy (int64, small), else the tensor itself.
  at::Tensor RegionTokenOrder(const at::Tensor& tokens) const;

  // A region tensor (t,B,S/t,...) under sp in sequence order (B,t,S/t,...) (a copy when
  // B > 1), and back (SequenceToRegion); without sp the tensor itself.
  at::Tensor RegionToSequence(const at::Tensor& region) const;
  at::Tensor SequenceToRegion(const at::Tensor& sequence) const;

  // Accumulates into dw the gradient of a weight replicated over tp that each rank computes
  // from the tokens it holds outside the region (add(target) adds that contribution into
  // target): under sp into a zeroed temporary that is all-reduced over tp and then added
  // into dw (never the accumulated dw itself, which holds earlier micro-batches); without
  // sp every rank holds every token, so straight into dw.
  template <typename AddGrad>
  void AccumulateReplicatedGrad(at::Tensor& dw, AddGrad add) const {
    if (!sp_) return add(dw);
    at::Tensor part = at::zeros_like(dw);
    add(part);
    comm_->AllReduceSum(part);
    dw.add_(part);
  }

  // RMSNorm backward whose weight gradient is complete on every tp rank
  // (AccumulateReplicatedGrad; an (E) all-reduce under sp).
  at::Tensor RMSNormBackward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& rstd,
                             const at::Tensor& w, at::Tensor& dw) const;

 private:
  Communicator* comm_;
  int64_t size_ = 1, rank_ = 0;
  bool sp_ = false;
};

}  // namespace meshplan
