// Expert-parallel dispatch and combine by all-to-all (see expert_parallel.h).
#include "executor/parallel/expert_parallel.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace meshplan {

ExpertParallel::ExpertParallel(Communicator* ep, int64_t experts) : comm_(ep), experts_(experts) {
  if (comm_ != nullptr) {
    size_ = comm_->size();
    rank_ = comm_->rank();
  }
  if (experts_ < 1 || experts_ % size_ != 0)
    throw std::invalid_argument("expert parallelism: ep=" + std::to_string(size_) +
                                " must divide model.moe.experts=" + std::to_string(experts_));
  if (size_ == 1) comm_ = nullptr;
}

RowExchange ExpertParallel::Plan(const std::vector<int64_t>& rows_per_expert,
                                 at::Device device) const {
  const int64_t ep = size_, Xl = local_experts();
  RowExchange x;
  if (comm_ == nullptr) {
    x.local_counts = rows_per_expert;
    int64_t total = 0;
    for (int64_t n : rows_per_expert) total += n;
    x.send_rows = x.recv_rows = {total};
    return x;
  }
  // counts (ep, Xl): row j = what this rank sends to rank j's experts.
  at::Tensor send = at::empty({ep, Xl}, at::kLong);
  std::copy(rows_per_expert.begin(), rows_per_expert.end(), send.data_ptr<int64_t>());
  send = send.to(device);
  at::Tensor recv = at::empty({ep, Xl}, send.options());  // row s = what rank s sends here
  const std::vector<int64_t> one_row(static_cast<size_t>(ep), 1);
  comm_->AllToAll(send, one_row, recv, one_row);
  recv = recv.cpu();
  const int64_t* r = recv.data_ptr<int64_t>();
  x.send_rows.assign(static_cast<size_t>(ep), 0);
  x.recv_rows.assign(static_cast<size_t>(ep), 0);
  x.local_counts.assign(static_cast<size_t>(Xl), 0);
  for (int64_t j = 0; j < ep; ++j)
    for (int64_t e = 0; e < Xl; ++e) {
      x.send_rows[static_cast<size_t>(j)] += rows_per_expert[static_cast<size_t>(j * Xl + e)];
      x.recv_rows[static_cast<size_t>(j)] += r[j * Xl + e];
      x.local_counts[static_cast<size_t>(e)] += r[j * Xl + e];
    }
  // Received rows are (source s, expert e) blocks in that order; expert-major takes, for
  // each e, the blocks of every s in turn.
  std::vector<int64_t> block_start(static_cast<size_t>(ep * Xl));
  int64_t offset = 0;
  for (int64_t i = 0; i < ep * Xl; ++i) {
    block_start[static_cast<size_t>(i)] = offset;
    offset += r[i];
  }
  x.source_row = at::empty({offset}, at::kLong);
  int64_t* out = x.source_row.data_ptr<int64_t>();
  for (int64_t e = 0; e < Xl; ++e)
    for (int64_t s = 0; s < ep; ++s)
      for (int64_t i = 0; i < r[s * Xl + e]; ++i) *out++ = block_start[static_cast<size_t>(s * Xl + e)] + i;
  return x;
}

at::Tensor ExpertParallel::Dispatch(const RowExchange& x, const at::Tensor& rows) const {
  if (comm_ == nullptr) return rows;
  std::vector<int64_t> shape = rows.sizes().vec();
  shape[0] = x.source_row.size(0);
  at::Tensor received = at::empty(shape, rows.options());  // source-major
  comm_->AllToAll(rows.contiguous(), x.send_rows, received, x.recv_rows);
  return received.index_select(0, x.source_row.to(rows.device()));  // expert-major
}

at::Tensor ExpertParallel::Combine(const RowExchange& x, const at::Tensor& rows) const {
  if (comm_ == nullptr) return rows;
  at::Tensor source_major = at::empty_like(rows);
  source_major.index_copy_(0, x.source_row.to(rows.device()), rows);
  std::vector<int64_t> shape = rows.sizes().vec();
  int64_t back = 0;
  for (int64_t n : x.send_rows) back += n;
  shape[0] = back;
  at::Tensor out = at::empty(shape, rows.options());
  comm_->AllToAll(source_major, x.recv_rows, out, x.send_rows);
  return out;
}

}  // namespace meshplan
