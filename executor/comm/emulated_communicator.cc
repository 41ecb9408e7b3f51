// One real rank, emulated peers (see emulated_communicator.h).
#include "executor/comm/emulated_communicator.h"

#include <ATen/CPUGeneratorImpl.h>
#if MESHPLAN_TORCH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <utility>

#include "executor/comm/comm_checks.h"
#include "executor/comm/gloo_communicator.h"
#include "executor/device/training_device.h"
#include "planner/names.h"

namespace meshplan {
namespace {

struct EmulatedHandle final : CommHandle {
  std::chrono::steady_clock::time_point done_at{};  // the epoch: done at once
  std::vector<torch::Tensor> scratch;               // the backend's temporaries, held until done
  void Wait() override {
    std::this_thread::sleep_until(done_at);
    scratch.clear();
  }
  bool Test() override { return std::chrono::steady_clock::now() >= done_at; }
};

double Bytes(const torch::Tensor& t) { return static_cast<double>(t.numel() * t.element_size()); }

// A seed per group, so the groups of one rank draw different values.
uint64_t GroupSeed(uint64_t seed, const std::string& name) {
  return seed ^ (std::hash<std::string>{}(name) * 0x9E3779B97F4A7C15ULL);
}

}  // namespace

const char* ToString(EmulatedCommTime time) {
  return time == EmulatedCommTime::kModel ? "model" : "zero";
}

bool ParseEmulatedCommTime(const std::string& text, EmulatedCommTime* time) {
  const std::string lower = Lower(text);
  if (lower == "zero") *time = EmulatedCommTime::kZero;
  else if (lower == "model") *time = EmulatedCommTime::kModel;
  else return false;
  return true;
}

EmulatedCommunicator::EmulatedCommunicator(std::string name, int size, int rank,
                                           EmulatedCommOptions options)
    : name_(std::move(name)),
      size_(size),
      rank_(rank),
      options_(std::move(options)),
      cpu_generator_(at::detail::createCPUGenerator(GroupSeed(options_.seed, name_))) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("EmulatedCommunicator '" + name_ + "': rank " +
                                std::to_string(rank) + " is outside a group of " +
                                std::to_string(size));
}

EmulatedCommunicator::Clock::time_point EmulatedCommunicator::Schedule(
    CollectiveKind kind, double bytes, const torch::Tensor& on, Clock::time_point& clock) {
  if (options_.time == EmulatedCommTime::kZero) return {};
  // Where the device reaches this call: its queued work first (CUDA; CPU ops are done).
  if (on.defined()) SynchronizeDevice(on.device());
  const double seconds = CollectiveTime(kind, bytes, options_.group, options_.cluster);
  const auto start = std::max(Clock::now(), clock);
  clock = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  return clock;
}

std::unique_ptr<CommHandle> EmulatedCommunicator::Handle(CollectiveKind kind,
                                                         const torch::Tensor& on, double bytes,
                                                         Clock::time_point& clock,
                                                         std::vector<torch::Tensor> scratch) {
  auto handle = std::make_unique<EmulatedHandle>();
  handle->done_at = Schedule(kind, bytes, on, clock);
  handle->scratch = std::move(scratch);
  return handle;
}

void EmulatedCommunicator::FillReceived(torch::Tensor& buffer) {
  if (!at::isFloatingType(buffer.scalar_type())) {
    buffer.zero_();
    return;
  }
  if (buffer.is_cpu()) {
    buffer.normal_(0.0, 1.0, cpu_generator_);
    return;
  }
#if MESHPLAN_TORCH_CUDA
  if (!device_generator_.defined()) {
    device_generator_ = at::cuda::detail::createCUDAGenerator(buffer.device().index());
    device_generator_.set_current_seed(GroupSeed(options_.seed, name_));
  }
  buffer.normal_(0.0, 1.0, device_generator_);
#else
  buffer.fill_(1.0);  // no device generator in this LibTorch: a constant, still finite
#endif
}

std::unique_ptr<CommHandle> EmulatedCommunicator::AllReduceSumAsync(torch::Tensor& buffer) {
  comm_checks::CheckBuffer("all_reduce", name_, buffer, "buffer");
  std::vector<torch::Tensor> scratch;
  if (options_.workspace == EmulatedWorkspace::kGloo)
    scratch = GlooScratch(GlooScratchOp::kAllReduce, buffer, size_);
  return Handle(CollectiveKind::kAllReduce, buffer, Bytes(buffer), busy_until_, std::move(scratch));
}

std::unique_ptr<CommHandle> EmulatedCommunicator::ReduceScatterSumAsync(const torch::Tensor& input,
                                                                        torch::Tensor& output) {
  comm_checks::CheckReduceScatter(name_, size_, input, output);
  std::vector<torch::Tensor> scratch;
  if (options_.workspace == EmulatedWorkspace::kGloo)
    scratch = GlooScratch(GlooScratchOp::kReduceScatter, output, size_);
  const int64_t k = output.numel();
  const torch::Tensor mine = input.view(-1).narrow(0, rank_ * k, k);
  // In place (the output is this rank's chunk, as ZeRO shards gradients): nothing to copy.
  if (mine.data_ptr() != output.data_ptr()) output.view(-1).copy_(mine);
  return Handle(CollectiveKind::kReduceScatter, input, Bytes(input), busy_until_,
                std::move(scratch));
}

std::unique_ptr<CommHandle> EmulatedCommunicator::AllGatherAsync(const torch::Tensor& input,
                                                                 torch::Tensor& output) {
  comm_checks::CheckAllGather(name_, size_, input, output);
  // Into every slot but the input's own (in place: ZeRO gathers from its slot of the output).
  const int64_t k = input.numel();
  const torch::Tensor in = input.view(-1), out = output.view(-1);
  for (int i = 0; i < size_; ++i) {
    torch::Tensor slot = out.narrow(0, i * k, k);
    if (slot.data_ptr() != in.data_ptr()) slot.copy_(in);
  }
  return Handle(CollectiveKind::kAllGather, output, Bytes(output), busy_until_);
}

std::unique_ptr<CommHandle> EmulatedCommunicator::BroadcastAsync(torch::Tensor& buffer, int root) {
  comm_checks::CheckBuffer("broadcast", name_, buffer, "buffer");
  comm_checks::CheckPeer("broadcast", name_, size_, rank_, root, "root", /*allow_self=*/true);
  if (root != rank_) FillReceived(buffer);
  // A pipelined broadcast: about one hop of the buffer (the cost model has no broadcast).
  return Handle(CollectiveKind::kSendRecv, buffer, Bytes(buffer), busy_until_);
}

std::unique_ptr<CommHandle> EmulatedCommunicator::SendAsync(const torch::Tensor& buffer, int dst) {
  comm_checks::CheckBuffer("send", name_, buffer, "buffer");
  comm_checks::CheckPeer("send", name_, size_, rank_, dst, "dst", /*allow_self=*/false);
  return Handle(CollectiveKind::kSendRecv, buffer, Bytes(buffer), send_busy_until_);
}

std::unique_ptr<CommHandle> EmulatedCommunicator::RecvAsync(torch::Tensor& buffer, int src) {
  comm_checks::CheckBuffer("recv", name_, buffer, "buffer");
  comm_checks::CheckPeer("recv", name_, size_, rank_, src, "src", /*allow_self=*/false);
  FillReceived(buffer);
  return Handle(CollectiveKind::kSendRecv, buffer, Bytes(buffer), busy_until_);
}

std::unique_ptr<CommHandle> EmulatedCommunicator::AllToAllAsync(
    const torch::Tensor& input, const std::vector<int64_t>& send_rows, torch::Tensor& output,
    const std::vector<int64_t>& recv_rows) {
  comm_checks::CheckAllToAll(name_, size_, input, send_rows, output, recv_rows);
  int64_t self_in = 0, out_offset = 0;
  for (int j = 0; j < rank_; ++j) self_in += send_rows[static_cast<size_t>(j)];
  const torch::Tensor mine = input.narrow(0, self_in, send_rows[static_cast<size_t>(rank_)]);
  const bool integer = !at::isFloatingType(output.scalar_type());
  for (int j = 0; j < size_; ++j) {
    torch::Tensor slot = output.narrow(0, out_offset, recv_rows[static_cast<size_t>(j)]);
    out_offset += recv_rows[static_cast<size_t>(j)];
    if (slot.size(0) == 0) continue;
    if (j == rank_ || (integer && slot.sizes() == mine.sizes())) slot.copy_(mine);
    else FillReceived(slot);
  }
  // The cost model has no all-to-all: a ring reduce-scatter of the same input moves the
  // same (n-1)/n of it over each rank's links, which is what an all-to-all sends.
  return Handle(CollectiveKind::kReduceScatter, input, Bytes(input), busy_until_);
}

void EmulatedCommunicator::Barrier() {
  // Latency only: an all-reduce of nothing.
  Handle(CollectiveKind::kAllReduce, torch::Tensor(), 0.0, busy_until_)->Wait();
}

GroupFactory EmulatedGroupFactory(const ParallelPlan& plan, int world_rank,
                                  EmulatedCommOptions options) {
  return [plan, world_rank, options = std::move(options)](
             const std::string& name,
             const std::vector<int>& members) -> std::unique_ptr<Communicator> {
    EmulatedCommOptions group_options = options;
    if (name == "dp_cp" || name == "edp_cp") {
      group_options.group = DataParallelGroup(plan);
    } else if (name == "ep") {  // carved out of dp: timed as the dp group (an approximation)
      group_options.group = MeshGroup(plan, MeshDim::kDp);
    } else {
      const auto dim = std::find_if(kAllMeshDims.begin(), kAllMeshDims.end(),
                                    [&](MeshDim d) { return name == ToString(d); });
      if (dim == kAllMeshDims.end())
        throw std::invalid_argument("EmulatedGroupFactory: no mesh group is named '" + name + "'");
      group_options.group = MeshGroup(plan, *dim);
    }
    const auto me = std::find(members.begin(), members.end(), world_rank);
    if (me == members.end())
      throw std::invalid_argument("EmulatedGroupFactory: world rank " + std::to_string(world_rank) +
                                  " is not a member of group '" + name + "'");
    return std::make_unique<EmulatedCommunicator>(name, static_cast<int>(members.size()),
                                                  static_cast<int>(me - members.begin()),
                                                  std::move(group_options));
  };
}

}  // namespace meshplan
