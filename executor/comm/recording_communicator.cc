// Logging every communicator call of a rank (see recording_communicator.h).
#include "executor/comm/recording_communicator.h"

#include <fmt/format.h>

#include <utility>

#include "executor/steady_clock.h"

namespace meshplan {
namespace {


double SinceStart(CommLog& log) {
  const double now = SteadySeconds();
  if (log.start_s < 0) log.start_s = now;
  return now - log.start_s;
}

// Stamps the call's completion the first time it is known.
class TimedHandle final : public CommHandle {
 public:
  TimedHandle(std::unique_ptr<CommHandle> inner, CommLog& log, size_t call)
      : inner_(std::move(inner)), log_(log), call_(call) {}
  void Wait() override {
    inner_->Wait();
    Stamp();
  }
  bool Test() override {
    const bool done = inner_->Test();
    if (done) Stamp();
    return done;
  }

 private:
  void Stamp() {
    CommTiming& t = log_.times[call_];
    if (t.done_s < 0) t.done_s = SinceStart(log_);
  }
  std::unique_ptr<CommHandle> inner_;
  CommLog& log_;
  size_t call_;
};

}  // namespace

std::string CommLogText(const CommLog& log) {
  std::string text;
  for (size_t i = 0; i < log.lines.size(); ++i) {
    text += log.lines[i];
    if (log.timed && i < log.times.size())
      text += fmt::format(" issued_ms={:.3f} returned_ms={:.3f} done_ms={:.3f}",
                          log.times[i].issued_s * 1e3, log.times[i].returned_s * 1e3,
                          log.times[i].done_s < 0 ? -1.0 : log.times[i].done_s * 1e3);
    text += "\n";
  }
  return text;
}

std::string DescribeTensor(const torch::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string out = std::string(c10::toString(t.scalar_type())) + "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d) out += ',';
    out += std::to_string(t.size(d));
  }
  return out + "]";
}

RecordingCommunicator::RecordingCommunicator(std::unique_ptr<Communicator> inner, std::string name,
                                             CommLog& log)
    : inner_(std::move(inner)), name_(std::move(name)), log_(log) {}

size_t RecordingCommunicator::Record(const std::string& op, const std::string& detail) {
  log_.lines.push_back(name_ + " " + op + (detail.empty() ? "" : " " + detail));
  if (log_.timed) {
    const double now = SinceStart(log_);
    log_.times.push_back({now, now, -1});
  }
  return log_.lines.size() - 1;
}

std::unique_ptr<CommHandle> RecordingCommunicator::Timed(std::unique_ptr<CommHandle> handle,
                                                         size_t call) {
  if (!log_.timed) return handle;
  log_.times[call].returned_s = SinceStart(log_);
  return std::make_unique<TimedHandle>(std::move(handle), log_, call);
}

std::unique_ptr<CommHandle> RecordingCommunicator::AllReduceSumAsync(torch::Tensor& buffer) {
  const size_t call = Record("all_reduce", DescribeTensor(buffer));
  return Timed(inner_->AllReduceSumAsync(buffer), call);
}

std::unique_ptr<CommHandle> RecordingCommunicator::ReduceScatterSumAsync(const torch::Tensor& input,
                                                                         torch::Tensor& output) {
  const size_t call =
      Record("reduce_scatter", DescribeTensor(input) + " -> " + DescribeTensor(output));
  return Timed(inner_->ReduceScatterSumAsync(input, output), call);
}

std::unique_ptr<CommHandle> RecordingCommunicator::AllGatherAsync(const torch::Tensor& input,
                                                                  torch::Tensor& output) {
  const size_t call =
      Record("all_gather", DescribeTensor(input) + " -> " + DescribeTensor(output));
  return Timed(inner_->AllGatherAsync(input, output), call);
}

std::unique_ptr<CommHandle> RecordingCommunicator::BroadcastAsync(torch::Tensor& buffer, int root) {
  const size_t call =
      Record("broadcast", "root=" + std::to_string(root) + " " + DescribeTensor(buffer));
  return Timed(inner_->BroadcastAsync(buffer, root), call);
}

std::unique_ptr<CommHandle> RecordingCommunicator::SendAsync(const torch::Tensor& buffer, int dst) {
  const size_t call =
      Record("send", "dst=" + std::to_string(dst) + " " + DescribeTensor(buffer));
  return Timed(inner_->SendAsync(buffer, dst), call);
}

std::unique_ptr<CommHandle> RecordingCommunicator::RecvAsync(torch::Tensor& buffer, int src) {
  const size_t call =
      Record("recv", "src=" + std::to_string(src) + " " + DescribeTensor(buffer));
  return Timed(inner_->RecvAsync(buffer, src), call);
}

std::unique_ptr<CommHandle> RecordingCommunicator::AllToAllAsync(
    const torch::Tensor& input, const std::vector<int64_t>& send_rows, torch::Tensor& output,
    const std::vector<int64_t>& recv_rows) {
  auto rows = [](const std::vector<int64_t>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(v[i]);
    }
    return out;
  };
  const size_t call = Record("all_to_all", DescribeTensor(input) + " send_rows=" + rows(send_rows) +
                                               " -> " + DescribeTensor(output) +
                                               " recv_rows=" + rows(recv_rows));
  return Timed(inner_->AllToAllAsync(input, send_rows, output, recv_rows), call);
}

void RecordingCommunicator::Barrier() {
  const size_t call = Record("barrier", "");
  inner_->Barrier();
  if (log_.timed) log_.times[call].returned_s = log_.times[call].done_s = SinceStart(log_);
}

GroupFactory RecordingGroupFactory(GroupFactory inner, CommLog& log) {
  return [inner = std::move(inner), &log](const std::string& name,
                                         const std::vector<int>& members) -> std::unique_ptr<Communicator> {
    return std::make_unique<RecordingCommunicator>(inner(name, members), name, log);
  };
}

}  // namespace meshplan
