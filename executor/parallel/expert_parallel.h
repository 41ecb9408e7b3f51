// ExpertParallel: the token dispatch and combine of expert parallelism (Megatron-Core /
// GShard style) over one ep group. Each of the ep ranks holds Xl = X/ep consecutive routed
// experts (rank j: experts [j*Xl, (j+1)*Xl)). A MoE layer's rows (kept token-expert
// assignments, sorted by global expert: executor/model/moe_routing.h) go by all-to-all to
// the rank owning their expert, are computed there in expert-major order, and come back by
// the inverse all-to-all. The backward moves the row gradients the same two ways
// (Dispatch then Combine with the same RowExchange), so no autograd is involved.
// With no group (or ep size 1) every call is free: no communication, no copy.
// Shapes (planner/model_spec.h): X experts, Xl = X/ep, E hidden, R rows this rank routes,
// Rl rows its experts compute (from every rank of the group).
// Not thread-safe; every rank of the ep group makes the same calls in the same order.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "executor/comm/communicator.h"

namespace meshplan {

// Who sends how many rows to whom for one MoE layer's micro-batch.
struct RowExchange {
  std::vector<int64_t> send_rows;     // (ep): rows this rank sends to each ep rank
  std::vector<int64_t> recv_rows;     // (ep): rows it receives from each
  std::vector<int64_t> local_counts;  // (Xl): rows of each local expert, after the dispatch
  // Expert-major row q is received row source_row[q] (received rows are source-major,
  // then by expert). Undefined when nothing moves (no group).
  at::Tensor source_row;              // (Rl) int64
};

class ExpertParallel {
 public:
  // ep: the expert-parallel group (null: none, all X experts local); it must outlive this
  // object. Throws std::invalid_argument unless ep's size divides experts.
  ExpertParallel(Communicator* ep, int64_t experts);

  int64_t size() const { return size_; }
  int64_t local_experts() const { return experts_ / size_; }        // Xl
  int64_t first_expert() const { return rank_ * local_experts(); }  // of this rank

  // From this rank's rows per global expert (X): the exchange (an all-to-all of the
  // (ep, Xl) counts on `device`, where the rows live (NCCL moves device tensors only),
  // read back to the host; collective).
  RowExchange Plan(const std::vector<int64_t>& rows_per_expert, at::Device device) const;
  // rows (R, ...) sorted by global expert -> (Rl, ...) this rank's experts' rows,
  // expert-major. Allocates the received rows and their expert-major copy.
  at::Tensor Dispatch(const RowExchange& exchange, const at::Tensor& rows) const;
  // The inverse: (Rl, ...) expert-major -> (R, ...) in this rank's routing order.
  at::Tensor Combine(const RowExchange& exchange, const at::Tensor& rows) const;

 private:
  Communicator* comm_ = nullptr;
  int64_t experts_ = 0;
  int64_t size_ = 1, rank_ = 0;
};

}  // namespace meshplan
