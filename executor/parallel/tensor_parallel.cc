// Tensor / sequence-parallel region communication (see tensor_parallel.h).
#include "executor/parallel/tensor_parallel.h"

#include <utility>
#include <vector>

#include "executor/model/ops.h"

namespace meshplan {

TensorParallel::TensorParallel(TpConfig config) : comm_(config.comm) {
  if (comm_ != nullptr) {
    size_ = comm_->size();
    rank_ = comm_->rank();
  }
  sp_ = config.sequence_parallel && size_ > 1;
}

at::Tensor TensorParallel::EnterRegion(const at::Tensor& h) const {
  if (!sp_) return h;
  TORCH_CHECK(h.is_contiguous(), "EnterRegion: contiguous input");
  std::vector<int64_t> shape{size_};
  for (int64_t d : h.sizes()) shape.push_back(d);
  at::Tensor gathered = at::empty(shape, h.options());  // (t,B,S/t,E)
  comm_->AllGather(h, gathered);
  return gathered;
}

at::Tensor TensorParallel::LeaveRegion(at::Tensor y) const {
  if (size_ == 1) return y;
  TORCH_CHECK(y.is_contiguous(), "LeaveRegion: contiguous input");
  if (!sp_) {
    comm_->AllReduceSum(y);
    return y;
  }
  TORCH_CHECK(y.size(0) == size_, "LeaveRegion: expected a chunk-major (t,...) tensor");
  at::Tensor mine = at::empty(y.sizes().slice(1), y.options());  // (B,S/t,E)
  comm_->ReduceScatterSum(y, mine);
  return mine;
}

at::Tensor TensorParallel::RegionTokenOrder(const at::Tensor& tokens) const {
  if (!sp_) return tokens;
  const int64_t B = tokens.size(0), S = tokens.size(1);
  TORCH_CHECK(S % size_ == 0, "sequence parallelism: tp must divide the sequence");
  return tokens.view({B, size_, S / size_}).transpose(0, 1).contiguous();  // (t,B,S/t)
}

at::Tensor TensorParallel::RegionToSequence(const at::Tensor& region) const {
  if (!sp_) return region;
  TORCH_CHECK(region.size(0) == size_, "RegionToSequence: expected a chunk-major (t,...) tensor");
  return region.transpose(0, 1).contiguous();
}

at::Tensor TensorParallel::SequenceToRegion(const at::Tensor& sequence) const {
  if (!sp_) return sequence;
  TORCH_CHECK(sequence.size(1) == size_, "SequenceToRegion: expected a (B,t,...) tensor");
  return sequence.transpose(0, 1).contiguous();
}

at::Tensor TensorParallel::RMSNormBackward(const at::Tensor& dy, const at::Tensor& x,
                                           const at::Tensor& rstd, const at::Tensor& w,
                                           at::Tensor& dw) const {
  at::Tensor dx;
  AccumulateReplicatedGrad(
      dw, [&](at::Tensor& target) { dx = meshplan::RMSNormBackward(dy, x, rstd, w, target); });
  return dx;
}

}  // namespace meshplan
