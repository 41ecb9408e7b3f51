// NCCL groups on a communication stream ordered by events (see nccl_communicator.h).
// Only compiled when the CUDA toolkit and NCCL are found (executor/cuda.cmake).
#include "executor/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>
#include <thread>

#include "executor/comm/comm_checks.h"
#include "executor/comm/comm_error.h"
#include "executor/device/cuda_device.h"

namespace meshplan {
namespace {

std::string Join(const std::vector<int>& values, const char* sep) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? sep : "") + std::to_string(values[i]);
  return out;
}

// Makes `device` current for the scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (device != previous_) cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

struct DoneHandle final : CommHandle {
  void Wait() override {}
};

}  // namespace

// ---------------------------------------------------------------------------------------
// The group's state, shared with its handles

struct NcclCommunicator::Impl {
  // Point-to-point calls queued for the next ncclGroupStart/End.
  struct P2p {
    bool send = true;
    torch::Tensor buffer;
    int peer = 0;
  };
  struct P2pBatch {
    bool launched = false;
    cudaEvent_t done = nullptr;  // recorded on the comm stream after the group
    ~P2pBatch() {
      if (done != nullptr) cudaEventDestroy(done);
    }
  };

  std::string name;
  std::vector<int> members;
  int rank = 0;
  int device = 0;
  std::chrono::milliseconds timeout{0};
  ncclComm_t comm = nullptr;
  cudaStream_t comm_stream = nullptr;
  cudaStream_t compute_stream = nullptr;  // null: the legacy default stream
  void* scratch = nullptr;                // 4 bytes of device memory for Barrier
  std::string broken;                     // why the group is unusable ("" while it is fine)
  std::vector<P2p> pending;
  std::shared_ptr<P2pBatch> batch = std::make_shared<P2pBatch>();

  int size() const { return static_cast<int>(members.size()); }

  std::string Where(const char* op) const {
    return fmt::format("NCCL {} on group '{}' (rank {} of {}, world rank {}, device {})", op, name,
                       rank, size(), members[static_cast<size_t>(rank)], device);
  }

  void CheckUsable(const char* op) const {
    if (!broken.empty())
      throw CommError(Where(op) + ": the communicator is broken by an earlier failure: " + broken);
  }

  // Marks the group broken, aborts NCCL (so peers blocked on us fail too) and throws.
  [[noreturn]] void Fail(const char* op, const std::string& why) {
    broken = why;
    if (comm != nullptr) {
      ncclCommAbort(comm);
      comm = nullptr;
    }
    throw CommError(Where(op) + ": " + why);
  }

  void Cuda(cudaError_t err, const char* op, const char* what) {
    if (err == cudaSuccess) return;
    cudaGetLastError();
    Fail(op, fmt::format("{} failed: {} ({})", what, cudaGetErrorName(err), cudaGetErrorString(err)));
  }

  void Nccl(ncclResult_t result, const char* op, const char* what) {
    if (result == ncclSuccess) return;
    const char* last = comm != nullptr ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
    Fail(op, fmt::format("{} failed: {}{}{}", what, ncclGetErrorString(result),
                         last != nullptr && *last ? ": " : "", last != nullptr ? last : ""));
  }

  cudaEvent_t NewEvent(const char* op) {
    cudaEvent_t event = nullptr;
    Cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), op, "cudaEventCreate");
    return event;
  }

  // The communication stream waits for what the compute stream has queued so far.
  void OrderAfterCompute(const char* op) {
    cudaEvent_t ready = NewEvent(op);
    Cuda(cudaEventRecord(ready, compute_stream), op, "cudaEventRecord (compute stream)");
    Cuda(cudaStreamWaitEvent(comm_stream, ready, 0), op, "cudaStreamWaitEvent (comm stream)");
    cudaEventDestroy(ready);  // released once the wait is satisfied
  }

  cudaEvent_t RecordDone(const char* op) {
    cudaEvent_t done = NewEvent(op);
    Cuda(cudaEventRecord(done, comm_stream), op, "cudaEventRecord (comm stream)");
    return done;
  }

  // Blocks the host until `event` has completed, watching NCCL's asynchronous errors.
  void WaitHost(cudaEvent_t event, const char* op) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const cudaError_t state = cudaEventQuery(event);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) Cuda(state, op, "cudaEventQuery");
      ncclResult_t async = ncclSuccess;
      if (comm != nullptr && ncclCommGetAsyncError(comm, &async) == ncclSuccess &&
          async != ncclSuccess && async != ncclInProgress)
        Fail(op, std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(async));
      if (std::chrono::steady_clock::now() > deadline)
        Fail(op, fmt::format("not complete after {:.1f} s: a peer died, hangs, or did not issue "
                             "the same call",
                             std::chrono::duration<double>(timeout).count()));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Launches the queued point-to-point calls as one group.
  void FlushP2p() {
    if (pending.empty()) return;
    const char* op = "send/recv";
    OrderAfterCompute(op);
    Nccl(ncclGroupStart(), op, "ncclGroupStart");
    for (const P2p& p : pending) {
      const ncclDataType_t type = DataType(p.buffer, op);
      const ncclResult_t r =
          p.send ? ncclSend(p.buffer.data_ptr(), static_cast<size_t>(p.buffer.numel()), type,
                            p.peer, comm, comm_stream)
                 : ncclRecv(p.buffer.data_ptr(), static_cast<size_t>(p.buffer.numel()), type,
                            p.peer, comm, comm_stream);
      if (r != ncclSuccess) {
        ncclGroupEnd();
        Nccl(r, op, p.send ? "ncclSend" : "ncclRecv");
      }
    }
    Nccl(ncclGroupEnd(), op, "ncclGroupEnd");
    batch->done = RecordDone(op);
    batch->launched = true;
    pending.clear();
    batch = std::make_shared<P2pBatch>();
  }

  ncclDataType_t DataType(const torch::Tensor& t, const char* op) const {
    switch (t.scalar_type()) {
      case at::kFloat: return ncclFloat32;
      case at::kHalf: return ncclFloat16;
      case at::kBFloat16: return ncclBfloat16;
      case at::kDouble: return ncclFloat64;
      case at::kInt: return ncclInt32;
      case at::kLong: return ncclInt64;
      case at::kByte: return ncclUint8;
      case at::kChar: return ncclInt8;
      default:
        throw std::invalid_argument(Where(op) + ": dtype " + std::string(c10::toString(t.scalar_type())) +
                                    " is not supported; expected float32, float16, bfloat16, "
                                    "float64, int32, int64, uint8 or int8");
    }
  }

  // A CUDA tensor must live on this group's device; CPU tensors are staged.
  void CheckDevice(const torch::Tensor& t, const char* op, bool allow_cpu) const {
    if (t.is_cuda()) {
      if (t.device().index() != device)
        throw std::invalid_argument(fmt::format("{}: the tensor is on cuda:{}, the group on cuda:{}",
                                                Where(op), t.device().index(), device));
      return;
    }
    if (!allow_cpu || !t.device().is_cpu())
      throw std::invalid_argument(Where(op) + ": expected a CUDA tensor, got one on " +
                                  t.device().str());
  }

  ~Impl() {
    if (comm == nullptr && comm_stream == nullptr && scratch == nullptr) return;
    DeviceGuard guard(device);
    if (comm != nullptr) {
      if (broken.empty() && cudaStreamSynchronize(comm_stream) == cudaSuccess) ncclCommDestroy(comm);
      else ncclCommAbort(comm);
    }
    if (scratch != nullptr) cudaFree(scratch);
    if (comm_stream != nullptr) cudaStreamDestroy(comm_stream);
  }
};

namespace {

// A handle on a launched collective (owns its done event) or a point-to-point batch.
class NcclHandle final : public CommHandle {
 public:
  NcclHandle(std::shared_ptr<NcclCommunicator::Impl> impl, cudaEvent_t done,
             std::vector<torch::Tensor> keep)
      : impl_(std::move(impl)), done_(done), keep_(std::move(keep)) {}
  NcclHandle(std::shared_ptr<NcclCommunicator::Impl> impl,
             std::shared_ptr<NcclCommunicator::Impl::P2pBatch> batch, torch::Tensor keep)
      : impl_(std::move(impl)), batch_(std::move(batch)), keep_{std::move(keep)} {}

  ~NcclHandle() override {
    // Not waited on: still order the compute stream after the work (the buffers may be
    // freed and reused by the caching allocator right after), never throw.
    if (!waited_) {
      cudaEvent_t done = batch_ ? batch_->done : done_;
      if (done != nullptr && impl_->comm != nullptr) {
        DeviceGuard guard(impl_->device);
        cudaStreamWaitEvent(impl_->compute_stream, done, 0);
      }
    }
    if (done_ != nullptr) cudaEventDestroy(done_);
  }

  void Wait() override {
    if (waited_) return;
    impl_->CheckUsable("wait");
    DeviceGuard guard(impl_->device);
    if (batch_ && !batch_->launched) impl_->FlushP2p();
    cudaEvent_t done = batch_ ? batch_->done : done_;
    impl_->Cuda(cudaStreamWaitEvent(impl_->compute_stream, done, 0), "wait",
                "cudaStreamWaitEvent (compute stream)");
    waited_ = true;
    keep_.clear();
  }

  // Asks the done event without blocking. A point-to-point call still queued is not
  // launched here (false): it must go out grouped with the calls that follow it (a send
  // with the next recv), or 1F1B's crossing sends would deadlock on the comm stream.
  bool Test() override {
    if (waited_) return true;
    impl_->CheckUsable("test");
    if (batch_ && !batch_->launched) return false;
    DeviceGuard guard(impl_->device);
    const cudaError_t state = cudaEventQuery(batch_ ? batch_->done : done_);
    if (state == cudaErrorNotReady) return false;
    impl_->Cuda(state, "test", "cudaEventQuery");
    return true;
  }

 private:
  std::shared_ptr<NcclCommunicator::Impl> impl_;
  cudaEvent_t done_ = nullptr;
  std::shared_ptr<NcclCommunicator::Impl::P2pBatch> batch_;
  std::vector<torch::Tensor> keep_;  // the buffers, alive until Wait()
  bool waited_ = false;
};

using Enqueue = std::function<ncclResult_t(const void* in, void* out, cudaStream_t stream)>;

// Runs one collective: on CUDA tensors asynchronously (a handle), on CPU tensors staged
// through device memory and complete on return. `output` may be `input` (in place).
std::unique_ptr<CommHandle> Run(const std::shared_ptr<NcclCommunicator::Impl>& impl, const char* op,
                                const torch::Tensor& input, const torch::Tensor& output,
                                const Enqueue& enqueue) {
  NcclCommunicator::Impl& g = *impl;
  g.CheckUsable(op);
  g.CheckDevice(input, op, /*allow_cpu=*/true);
  g.CheckDevice(output, op, /*allow_cpu=*/true);
  DeviceGuard guard(g.device);
  g.FlushP2p();
  const bool in_place = input.data_ptr() == output.data_ptr();
  if (input.is_cuda()) {
    g.OrderAfterCompute(op);
    g.Nccl(enqueue(input.data_ptr(), output.data_ptr(), g.comm_stream), op, "enqueue");
    return std::make_unique<NcclHandle>(impl, g.RecordDone(op),
                                        std::vector<torch::Tensor>{input, output});
  }
  // Staged: host -> device, collective, device -> host, wait.
  void* in_dev = nullptr;
  void* out_dev = nullptr;
  const auto free_buffers = [&] {
    if (in_dev != nullptr) cudaFree(in_dev);
    if (out_dev != nullptr && out_dev != in_dev) cudaFree(out_dev);
  };
  try {
    g.Cuda(cudaMalloc(&in_dev, std::max<size_t>(input.nbytes(), 1)), op, "cudaMalloc (staging)");
    out_dev = in_dev;
    if (!in_place)
      g.Cuda(cudaMalloc(&out_dev, std::max<size_t>(output.nbytes(), 1)), op, "cudaMalloc (staging)");
    g.Cuda(cudaMemcpyAsync(in_dev, input.data_ptr(), input.nbytes(), cudaMemcpyHostToDevice,
                           g.comm_stream), op, "cudaMemcpy (to device)");
    g.Nccl(enqueue(in_dev, out_dev, g.comm_stream), op, "enqueue");
    g.Cuda(cudaMemcpyAsync(output.data_ptr(), out_dev, output.nbytes(), cudaMemcpyDeviceToHost,
                           g.comm_stream), op, "cudaMemcpy (to host)");
    cudaEvent_t done = g.RecordDone(op);
    try {
      g.WaitHost(done, op);
    } catch (...) {
      cudaEventDestroy(done);
      throw;
    }
    cudaEventDestroy(done);
  } catch (...) {
    free_buffers();
    throw;
  }
  free_buffers();
  return std::make_unique<DoneHandle>();
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Joining

NcclCommunicator::NcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int world_rank,
                                   std::vector<int> members, std::string name, NcclOptions options)
    : impl_(std::make_shared<Impl>()) {
  if (members.empty()) throw std::invalid_argument("nccl group '" + name + "' has no members");
  if (std::set<int>(members.begin(), members.end()).size() != members.size())
    throw std::invalid_argument("nccl group '" + name + "' lists a rank twice: " + Join(members, ","));
  const auto self = std::find(members.begin(), members.end(), world_rank);
  if (self == members.end())
    throw std::invalid_argument("nccl group '" + name + "': world rank " +
                                std::to_string(world_rank) + " is not a member of [" +
                                Join(members, ",") + "]");
  Impl& g = *impl_;
  g.name = std::move(name);
  g.rank = static_cast<int>(self - members.begin());
  g.members = std::move(members);
  g.timeout = options.timeout;
  g.compute_stream = static_cast<cudaStream_t>(options.compute_stream);

  std::string why;
  const int count = CudaDeviceCount(&why);
  if (count == 0)
    throw std::runtime_error("nccl group '" + g.name + "': no CUDA device is visible (" + why +
                             "); NCCL needs a GPU per rank: use the Gloo backend on CPU");
  g.device = options.device;
  if (g.device < 0 && cudaGetDevice(&g.device) != cudaSuccess) g.device = 0;
  if (g.device >= count)
    throw std::invalid_argument(fmt::format("nccl group '{}': device {} does not exist ({} visible)",
                                            g.name, g.device, count));
  DeviceGuard guard(g.device);

  // Rendezvous through the store: rank 0 publishes the unique id; everyone checks in.
  const std::string prefix = "meshplan/nccl/" + g.name + "/" + Join(g.members, "-");
  ncclUniqueId id{};
  if (g.rank == 0) g.Nccl(ncclGetUniqueId(&id), "init", "ncclGetUniqueId");
  try {
    if (g.rank == 0) {
      const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
      store->set(prefix + "/unique_id", std::vector<uint8_t>(bytes, bytes + sizeof(id)));
    }
    store->set(prefix + "/joined/" + std::to_string(g.rank), std::vector<uint8_t>{1});
    std::vector<std::string> keys = {prefix + "/unique_id"};
    for (int r = 0; r < g.size(); ++r) keys.push_back(prefix + "/joined/" + std::to_string(r));
    store->wait(keys, g.timeout);
    const std::vector<uint8_t> bytes = store->get(prefix + "/unique_id");
    if (bytes.size() != sizeof(id)) throw std::runtime_error("malformed unique id in the store");
    std::memcpy(&id, bytes.data(), sizeof(id));
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw CommError(fmt::format(
        "nccl group '{}' [{}]: world rank {} could not join within {:.1f} s: {}", g.name,
        Join(g.members, ","), world_rank, std::chrono::duration<double>(g.timeout).count(),
        c10_error != nullptr ? c10_error->what_without_backtrace() : e.what()));
  }

  int least = 0, greatest = 0;
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  g.Cuda(cudaStreamCreateWithPriority(&g.comm_stream, cudaStreamNonBlocking, greatest), "init",
         "cudaStreamCreate (comm stream)");
  g.Nccl(ncclCommInitRank(&g.comm, g.size(), id, g.rank), "init", "ncclCommInitRank");
  g.Cuda(cudaMalloc(&g.scratch, sizeof(int32_t)), "init", "cudaMalloc (barrier scratch)");
}

NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::size() const { return impl_->size(); }
const std::string& NcclCommunicator::name() const { return impl_->name; }
const std::vector<int>& NcclCommunicator::members() const { return impl_->members; }
int NcclCommunicator::device() const { return impl_->device; }

// ---------------------------------------------------------------------------------------
// Collectives

std::unique_ptr<CommHandle> NcclCommunicator::AllReduceSumAsync(torch::Tensor& buffer) {
  const char* op = "all_reduce";
  comm_checks::CheckBuffer(op, impl_->name, buffer, "buffer");
  const ncclDataType_t type = impl_->DataType(buffer, op);
  const auto count = static_cast<size_t>(buffer.numel());
  ncclComm_t* comm = &impl_->comm;
  return Run(impl_, op, buffer, buffer, [=](const void* in, void* out, cudaStream_t s) {
    return ncclAllReduce(in, out, count, type, ncclSum, *comm, s);
  });
}

std::unique_ptr<CommHandle> NcclCommunicator::ReduceScatterSumAsync(const torch::Tensor& input,
                                                                    torch::Tensor& output) {
  const char* op = "reduce_scatter";
  comm_checks::CheckReduceScatter(impl_->name, size(), input, output);
  const ncclDataType_t type = impl_->DataType(input, op);
  const auto count = static_cast<size_t>(output.numel());
  ncclComm_t* comm = &impl_->comm;
  return Run(impl_, op, input, output, [=](const void* in, void* out, cudaStream_t s) {
    return ncclReduceScatter(in, out, count, type, ncclSum, *comm, s);
  });
}

std::unique_ptr<CommHandle> NcclCommunicator::AllGatherAsync(const torch::Tensor& input,
                                                             torch::Tensor& output) {
  const char* op = "all_gather";
  comm_checks::CheckAllGather(impl_->name, size(), input, output);
  const ncclDataType_t type = impl_->DataType(input, op);
  const auto count = static_cast<size_t>(input.numel());
  ncclComm_t* comm = &impl_->comm;
  return Run(impl_, op, input, output, [=](const void* in, void* out, cudaStream_t s) {
    return ncclAllGather(in, out, count, type, *comm, s);
  });
}

std::unique_ptr<CommHandle> NcclCommunicator::BroadcastAsync(torch::Tensor& buffer, int root) {
  const char* op = "broadcast";
  comm_checks::CheckBuffer(op, impl_->name, buffer, "buffer");
  comm_checks::CheckPeer(op, impl_->name, size(), rank(), root, "root", /*allow_self=*/true);
  const ncclDataType_t type = impl_->DataType(buffer, op);
  const auto count = static_cast<size_t>(buffer.numel());
  ncclComm_t* comm = &impl_->comm;
  return Run(impl_, op, buffer, buffer, [=](const void* in, void* out, cudaStream_t s) {
    return ncclBroadcast(in, out, count, type, root, *comm, s);
  });
}

std::unique_ptr<CommHandle> NcclCommunicator::SendAsync(const torch::Tensor& buffer, int dst) {
  const char* op = "send";
  comm_checks::CheckBuffer(op, impl_->name, buffer, "buffer");
  comm_checks::CheckPeer(op, impl_->name, size(), rank(), dst, "dst", /*allow_self=*/false);
  impl_->CheckUsable(op);
  impl_->CheckDevice(buffer, op, /*allow_cpu=*/false);
  impl_->DataType(buffer, op);
  impl_->pending.push_back({true, buffer, dst});
  return std::make_unique<NcclHandle>(impl_, impl_->batch, buffer);
}

std::unique_ptr<CommHandle> NcclCommunicator::RecvAsync(torch::Tensor& buffer, int src) {
  const char* op = "recv";
  comm_checks::CheckBuffer(op, impl_->name, buffer, "buffer");
  comm_checks::CheckPeer(op, impl_->name, size(), rank(), src, "src", /*allow_self=*/false);
  impl_->CheckUsable(op);
  impl_->CheckDevice(buffer, op, /*allow_cpu=*/false);
  impl_->DataType(buffer, op);
  impl_->pending.push_back({false, buffer, src});
  return std::make_unique<NcclHandle>(impl_, impl_->batch, buffer);
}

std::unique_ptr<CommHandle> NcclCommunicator::AllToAllAsync(const torch::Tensor& input,
                                                             const std::vector<int64_t>& send_rows,
                                                             torch::Tensor& output,
                                                             const std::vector<int64_t>& recv_rows) {
  const char* op = "all_to_all";
  comm_checks::CheckAllToAll(impl_->name, size(), input, send_rows, output, recv_rows);
  Impl& g = *impl_;
  g.CheckUsable(op);
  g.CheckDevice(input, op, /*allow_cpu=*/false);
  g.CheckDevice(output, op, /*allow_cpu=*/false);
  g.DataType(input, op);
  DeviceGuard guard(g.device);
  g.FlushP2p();  // point-to-point calls queued earlier go out first, in their own group
  int64_t in_offset = 0, out_offset = 0;
  for (int j = 0; j < size(); ++j) {
    const size_t p = static_cast<size_t>(j);
    torch::Tensor in_rows = input.narrow(0, in_offset, send_rows[p]);
    torch::Tensor out_rows = output.narrow(0, out_offset, recv_rows[p]);
    in_offset += send_rows[p];
    out_offset += recv_rows[p];
    if (j == rank()) {
      out_rows.copy_(in_rows);  // on the compute stream, before the group is ordered after it
      continue;
    }
    // Zero-row pairs are skipped on both sides (recv_rows[j] is peer j's send_rows[rank]).
    if (send_rows[p] > 0) g.pending.push_back({true, in_rows, j});
    if (recv_rows[p] > 0) g.pending.push_back({false, out_rows, j});
  }
  if (g.pending.empty()) return std::make_unique<DoneHandle>();  // nothing crosses ranks
  auto handle = std::make_unique<NcclHandle>(impl_, g.batch, output);
  g.FlushP2p();
  return handle;
}

void NcclCommunicator::Barrier() {
  const char* op = "barrier";
  Impl& g = *impl_;
  g.CheckUsable(op);
  DeviceGuard guard(g.device);
  g.FlushP2p();
  g.Nccl(ncclAllReduce(g.scratch, g.scratch, 1, ncclInt32, ncclSum, g.comm, g.comm_stream), op,
         "ncclAllReduce");
  cudaEvent_t done = g.RecordDone(op);
  try {
    g.WaitHost(done, op);
  } catch (...) {
    cudaEventDestroy(done);
    throw;
  }
  cudaEventDestroy(done);
}

std::string NcclVersionString() {
  return fmt::format("{}.{}.{}", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
}

}  // namespace meshplan
