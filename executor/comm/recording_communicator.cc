// Logging every communicator call of a rank (see recording_communicator.h).
#include "executor/comm/recording_communicator.h"

#include <utility>

namespace meshplan {

std::string DescribeTensor(const torch::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string out = std::string(c10::toString(t.scalar_type())) + "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? "," : "") + std::to_string(t.size(d));
  return out + "]";
}

RecordingCommunicator::RecordingCommunicator(std::unique_ptr<Communicator> inner, std::string name,
                                             CommLog& log)
    : inner_(std::move(inner)), name_(std::move(name)), log_(log) {}

void RecordingCommunicator::Record(const std::string& op, const std::string& detail) {
  log_.lines.push_back(name_ + " " + op + (detail.empty() ? "" : " " + detail));
}

std::unique_ptr<CommHandle> RecordingCommunicator::AllReduceSumAsync(torch::Tensor& buffer) {
  Record("all_reduce", DescribeTensor(buffer));
  return inner_->AllReduceSumAsync(buffer);
}

std::unique_ptr<CommHandle> RecordingCommunicator::ReduceScatterSumAsync(const torch::Tensor& input,
                                                                         torch::Tensor& output) {
  Record("reduce_scatter", DescribeTensor(input) + " -> " + DescribeTensor(output));
  return inner_->ReduceScatterSumAsync(input, output);
}

std::unique_ptr<CommHandle> RecordingCommunicator::AllGatherAsync(const torch::Tensor& input,
                                                                  torch::Tensor& output) {
  Record("all_gather", DescribeTensor(input) + " -> " + DescribeTensor(output));
  return inner_->AllGatherAsync(input, output);
}

std::unique_ptr<CommHandle> RecordingCommunicator::BroadcastAsync(torch::Tensor& buffer, int root) {
  Record("broadcast", "root=" + std::to_string(root) + " " + DescribeTensor(buffer));
  return inner_->BroadcastAsync(buffer, root);
}

std::unique_ptr<CommHandle> RecordingCommunicator::SendAsync(const torch::Tensor& buffer, int dst) {
  Record("send", "dst=" + std::to_string(dst) + " " + DescribeTensor(buffer));
  return inner_->SendAsync(buffer, dst);
}

std::unique_ptr<CommHandle> RecordingCommunicator::RecvAsync(torch::Tensor& buffer, int src) {
  Record("recv", "src=" + std::to_string(src) + " " + DescribeTensor(buffer));
  return inner_->RecvAsync(buffer, src);
}

std::unique_ptr<CommHandle> RecordingCommunicator::AllToAllAsync(
    const torch::Tensor& input, const std::vector<int64_t>& send_rows, torch::Tensor& output,
    const std::vector<int64_t>& recv_rows) {
  auto rows = [](const std::vector<int64_t>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
    return out;
  };
  Record("all_to_all", DescribeTensor(input) + " send_rows=" + rows(send_rows) + " -> " +
                           DescribeTensor(output) + " recv_rows=" + rows(recv_rows));
  return inner_->AllToAllAsync(input, send_rows, output, recv_rows);
}

void RecordingCommunicator::Barrier() {
  Record("barrier", "");
  inner_->Barrier();
}

GroupFactory RecordingGroupFactory(GroupFactory inner, CommLog& log) {
  return [inner = std::move(inner), &log](const std::string& name,
                                         const std::vector<int>& members) -> std::unique_ptr<Communicator> {
    return std::make_unique<RecordingCommunicator>(inner(name, members), name, log);
  };
}

}  // namespace meshplan
