#include "executor/comm/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "executor/comm/comm_checks.h"
#include "executor/comm/comm_error.h"

namespace meshplan {
namespace {

std::string Join(const std::vector<int>& ranks, const char* sep) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? sep : "") + std::to_string(ranks[i]);
  return out;
}

// The message of an in-flight exception, without LibTorch's C++ backtrace.
std::string Cause(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

std::shared_ptr<::gloo::transport::Device> MakeDevice(const GlooOptions& options) {
  if (!options.interface.empty())
    return c10d::ProcessGroupGloo::createDeviceForInterface(options.interface);
  if (!options.hostname.empty())
    return c10d::ProcessGroupGloo::createDeviceForHostname(options.hostname);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// Posts one operation on a ProcessGroupGloo. Every GlooCommunicator of the process posts
// through here, one at a time: LibTorch 2.x's ProcessGroupGloo records each operation it
// posts in a process-wide c10d::FlightRecorder, whose first record for a process group
// inserts into a std::map before taking the recorder's lock; two groups posting their first
// operation at once (ranks as threads, or the dp and tp comm threads of one rank) corrupt the
// map (SIGSEGV in std::_Rb_tree_insert_and_rebalance under FlightRecorder::record, seen in
// the vocab-parallel cross-entropy test, and the constructor's barrier in the snapshot damage
// test). Only the posting is serialised, not the wait.
template <typename Post>
auto Posted(Post&& post) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  return post();
}

// A host copy of `t` to run Gloo on (t itself when it already lives on the CPU).
torch::Tensor OnHost(const torch::Tensor& t) { return t.is_cpu() ? t : t.cpu(); }
void CopyBackIfStaged(torch::Tensor& t, const torch::Tensor& host) {
  if (!t.is_cpu()) t.copy_(host);
}

// The ring reduce-scatter's second receive buffer (its first is the output), in host memory.
torch::Tensor RingReduceScatterTemporary(const torch::Tensor& output, int n) {
  return n > 2 ? torch::empty(output.sizes(), output.options().device(torch::kCPU))
               : torch::Tensor();
}

// The c10 temporaries of one call (GlooScratch) on the staged host copy of its buffer, and
// their release. A call allocates them when it is posted and its handle drops them when it
// is waited on; the comm thread only borrows them (Release() before the call completes), so
// a rank's peak does not depend on when that thread runs the call.
struct CallScratch {
  std::vector<torch::Tensor> tensors;
  torch::Tensor at(size_t i) const { return i < tensors.size() ? tensors[i] : torch::Tensor(); }
  void Release() { tensors.clear(); }
};

}  // namespace

std::vector<torch::Tensor> GlooScratch(GlooScratchOp op, const torch::Tensor& buffer, int size) {
  std::vector<torch::Tensor> out;
  if (op == GlooScratchOp::kReduceScatter) {
    if (torch::Tensor t = RingReduceScatterTemporary(buffer.view(-1), size); t.defined())
      out.push_back(std::move(t));
    return out;
  }
  if (buffer.scalar_type() != at::kBFloat16 || size <= 1) return out;
  const torch::TensorOptions host = buffer.options().device(torch::kCPU);
  if (buffer.numel() % size != 0) {
    out.push_back(torch::empty(buffer.sizes(), host.dtype(at::kFloat)));
    return out;
  }
  out.push_back(torch::empty({buffer.numel() / size}, host));
  if (torch::Tensor t = RingReduceScatterTemporary(out.back(), size); t.defined())
    out.push_back(std::move(t));
  return out;
}

struct GlooCommunicator::Impl {
  std::string name;
  std::vector<int> members;
  int rank = 0;
  GlooOptions options;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  int next_tag = 1;  // p2p tags of ring steps (user send/recv use 0); comm thread only

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;  // guarded by mu
  bool stopping = false;                    // guarded by mu
  std::string broken;                       // first failure; guarded by mu
  std::thread thread;

  int size() const { return static_cast<int>(members.size()); }

  std::string Where() const {
    return "group '" + name + "' (rank " + std::to_string(rank) + " of " +
           std::to_string(size()) + ", world rank " + std::to_string(members[rank]) + ")";
  }
  std::string Peer(int peer) const {
    return "peer rank " + std::to_string(peer) + " (world rank " + std::to_string(members[peer]) +
           ")";
  }

  // Records the first failure and throws it as CommError.
  [[noreturn]] void Fail(const std::string& op, const std::string& peers,
                         std::exception_ptr error) {
    std::string message = "gloo " + op + " on " + Where();
    if (!peers.empty()) message += " with " + peers;
    message += " failed: " + Cause(error);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (broken.empty()) broken = message;
    }
    throw CommError(message);
  }

  void ThrowIfBroken(const char* op) {
    std::lock_guard<std::mutex> lock(mu);
    if (!broken.empty())
      throw CommError(std::string("gloo ") + op + " on group '" + name +
                               "': the group is broken by an earlier failure: " + broken);
  }

  // Runs `body` on the comm thread after everything queued before it. The body (and the
  // tensors it captured) is destroyed before the future is ready, so a waiter never sees
  // memory that the comm thread has yet to free.
  template <typename R>
  std::future<R> Enqueue(const char* op, std::function<R()> body) {
    ThrowIfBroken(op);
    auto promise = std::make_shared<std::promise<R>>();
    std::future<R> result = promise->get_future();
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.emplace_back([promise, body = std::move(body)]() mutable {
        try {
          if constexpr (std::is_void_v<R>) {
            body();
            body = nullptr;
            promise->set_value();
          } else {
            R value = body();
            body = nullptr;
            promise->set_value(std::move(value));
          }
        } catch (...) {
          body = nullptr;
          promise->set_exception(std::current_exception());
        }
      });
    }
    cv.notify_one();
    return result;
  }

  void Loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [this] { return stopping || !queue.empty(); });
        if (stopping) return;
        task = std::move(queue.front());
        queue.pop_front();
      }
      task();  // exceptions land in its future (Enqueue)
    }
  }

  void WaitWork(const c10::intrusive_ptr<c10d::Work>& work) { work->wait(options.timeout); }

  // One exchange step: send `out` to `dst` and receive `in` from `src`, both posted
  // before either is waited on.
  void Exchange(const char* op, const torch::Tensor& out, int dst, torch::Tensor& in, int src) {
    const int tag = next_tag;
    next_tag = next_tag == 1'000'000'000 ? 1 : next_tag + 1;
    try {
      std::vector<at::Tensor> send_list{out}, recv_list{in};
      auto send = Posted([&] { return pg->send(send_list, dst, tag); });
      auto recv = Posted([&] { return pg->recv(recv_list, src, tag); });
      WaitWork(recv);
      WaitWork(send);
    } catch (...) {
      Fail(op, Peer(src) + " (recv) / " + Peer(dst) + " (send)", std::current_exception());
    }
  }

  // Ring reduce-scatter: after n-1 steps this rank holds the sum of chunk `rank`.
  // Step s sends the partial sum of chunk (r-s-1) mod n and receives that of chunk
  // (r-s-2) mod n, adding its own input chunk to it. Receive buffers alternate
  // between `output` and `tmp` (GlooScratch's temporary; undefined when n <= 2) so that
  // the last step lands in `output`.
  void RingReduceScatter(const torch::Tensor& input, torch::Tensor& output,
                         const torch::Tensor& tmp) {
    const int n = size(), r = rank;
    const int64_t k = output.numel();
    torch::Tensor in = input.view(-1), out = output.view(-1);
    auto chunk = [&](int c) { return in.narrow(0, static_cast<int64_t>(c) * k, k); };
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    torch::Tensor send = chunk((r + n - 1) % n);
    for (int s = 0; s < n - 1; ++s) {
      torch::Tensor recv = ((n - 2 - s) % 2 == 0) ? out : tmp;
      Exchange("reduce_scatter", send, next, recv, prev);
      recv.add_(chunk(((r - s - 2) % n + n) % n));
      send = recv;
    }
  }

  // Sum of a bf16 buffer, in place (Gloo's own all-reduce has no bf16 sum in every
  // LibTorch): the ring reduce-scatter into a shard-sized temporary, then the ring
  // all-gather of the shards back into the buffer; a buffer that does not split into
  // size() equal chunks is summed in an fp32 copy instead. `scratch` is GlooScratch's.
  void BF16AllReduce(torch::Tensor& buffer, const CallScratch& scratch) {
    if (buffer.numel() % size() != 0) {
      std::vector<at::Tensor> list{scratch.at(0).copy_(buffer)};
      WaitWork(Posted([&] { return pg->allreduce(list); }));
      buffer.copy_(list[0]);
      return;
    }
    torch::Tensor shard = scratch.at(0);
    RingReduceScatter(buffer, shard, scratch.at(1));
    RingAllGather(shard, buffer);
  }

  // Ring all-gather into output's slices: step s forwards chunk (r-s) mod n and
  // receives chunk (r-s-1) mod n.
  void RingAllGather(const torch::Tensor& input, torch::Tensor& output) {
    const int n = size(), r = rank;
    const int64_t k = input.numel();
    torch::Tensor out = output.view(-1);
    auto slot = [&](int c) { return out.narrow(0, static_cast<int64_t>(c) * k, k); };
    slot(r).copy_(input.view(-1));
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (int s = 0; s < n - 1; ++s) {
      torch::Tensor recv = slot(((r - s - 1) % n + n) % n);
      Exchange("all_gather", slot(((r - s) % n + n) % n), next, recv, prev);
    }
  }
};

namespace {

// Returns once `done` is ready; spin: yield the core meanwhile instead of sleeping
// (GlooOptions::spin_while_waiting).
void WaitReady(const std::future<void>& done, bool spin) {
  if (spin)
    while (done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) std::this_thread::yield();
  done.wait();
}

// Completes when the queued operation has run on the comm thread; holds the call's
// temporaries (CallScratch) until then.
class QueuedHandle final : public CommHandle {
 public:
  // complete: wait here for the operation to finish (GlooOptions::complete_collectives_at_post);
  // its failure and the scratch's release still wait for Wait().
  QueuedHandle(std::future<void> done, const GlooOptions& options, CallScratch scratch = {})
      : done_(std::move(done)), spin_(options.spin_while_waiting), scratch_(std::move(scratch)) {
    if (options.complete_collectives_at_post) WaitReady(done_, spin_);
  }
  void Wait() override {
    if (!done_.valid()) return;
    WaitReady(done_, spin_);
    try {
      done_.get();  // rethrows the operation's failure
    } catch (...) {
      scratch_.Release();
      throw;
    }
    scratch_.Release();
  }

 private:
  std::future<void> done_;
  bool spin_;
  CallScratch scratch_;
};

// Send/recv: posted in order on the comm thread, completed by the waiter. Gloo's Work
// cannot be polled (isCompleted turns true only inside wait()), so the first Test() hands
// the wait to a helper thread and later Tests read its future.
class P2PHandle final : public CommHandle {
 public:
  P2PHandle(std::shared_ptr<GlooCommunicator::Impl> impl, std::string op, int peer,
            std::future<c10::intrusive_ptr<c10d::Work>> posted, std::function<void()> finish)
      : impl_(std::move(impl)),
        op_(std::move(op)),
        peer_(peer),
        posted_(std::move(posted)),
        finish_(std::move(finish)) {}
  void Wait() override {
    if (done_) return;
    if (waiter_.valid()) {
      waiter_.get();  // rethrows the waiter's failure
    } else {
      if (!posted_.valid()) return;
      WaitPosted(impl_, op_, peer_, posted_.get());  // get() rethrows a failure to post
    }
    done_ = true;
    if (finish_) finish_();
  }
  bool Test() override {
    if (done_) return true;
    if (!waiter_.valid()) {
      if (!posted_.valid()) return false;
      waiter_ = std::async(std::launch::async,
                           [impl = impl_, op = op_, peer = peer_, posted = std::move(posted_)]() mutable {
                             WaitPosted(impl, op, peer, posted.get());
                           });
    }
    if (waiter_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    Wait();  // rethrows a failure; runs finish_
    return true;
  }

 private:
  static void WaitPosted(const std::shared_ptr<GlooCommunicator::Impl>& impl,
                         const std::string& op, int peer,
                         const c10::intrusive_ptr<c10d::Work>& work) {
    try {
      impl->WaitWork(work);
    } catch (...) {
      impl->Fail(op, impl->Peer(peer), std::current_exception());
    }
  }

  std::shared_ptr<GlooCommunicator::Impl> impl_;
  std::string op_;
  int peer_;
  std::future<c10::intrusive_ptr<c10d::Work>> posted_;
  std::future<void> waiter_;  // after the first Test()
  bool done_ = false;
  std::function<void()> finish_;
};

}  // namespace

GlooCommunicator::GlooCommunicator(c10::intrusive_ptr<c10d::Store> store, int world_rank,
                                   std::vector<int> members, std::string name,
                                   GlooOptions options)
    : impl_(std::make_shared<Impl>()) {
  if (members.empty()) throw std::invalid_argument("gloo group '" + name + "' has no members");
  if (std::set<int>(members.begin(), members.end()).size() != members.size())
    throw std::invalid_argument("gloo group '" + name + "' lists a rank twice: " +
                                Join(members, ","));
  const auto self = std::find(members.begin(), members.end(), world_rank);
  if (self == members.end())
    throw std::invalid_argument("gloo group '" + name + "': world rank " +
                                std::to_string(world_rank) + " is not a member of [" +
                                Join(members, ",") + "]");
  Impl& impl = *impl_;
  impl.name = std::move(name);
  impl.members = std::move(members);
  impl.rank = static_cast<int>(self - impl.members.begin());
  impl.options = std::move(options);

  const std::string prefix = "meshplan/" + impl.name + "/" + Join(impl.members, "-");
  const auto start = std::chrono::steady_clock::now();
  try {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(impl.options.timeout);
    gloo_options->devices.push_back(MakeDevice(impl.options));
    gloo_options->threads = 1;  // operations are serialised by our comm thread anyway
    impl.pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(prefix, std::move(store)), impl.rank, impl.size(),
        gloo_options);
    // Gloo's full-mesh connect can return on one rank while a peer is still finishing its
    // side; a rank that then drops the group at once (an argument error before any call)
    // closes that peer's half-made connection. A barrier makes the constructor return only
    // once every member has connected, as the header promises. Posted like every other
    // operation: it is the group's first record in the FlightRecorder (a SIGSEGV in 1 of
    // about 250 runs of the snapshot damage test when posted bare).
    if (impl.size() > 1) Posted([&] { return impl.pg->barrier(); })->wait();
  } catch (...) {
    throw CommError("gloo " + impl.Where() + " [world ranks " + Join(impl.members, ",") +
                    "]: could not connect (failed after " +
                    fmt::format("{:.1f}", std::chrono::duration<double>(
                                              std::chrono::steady_clock::now() - start).count()) +
                    " s of the " + fmt::format("{:g}", impl.options.timeout.count() / 1000.0) +
                    " s allowed): " + Cause(std::current_exception()));
  }
  impl.thread = std::thread([&impl] { impl.Loop(); });
}

GlooOptions ForRanksOnComputeCores(GlooOptions options) {
  options.complete_collectives_at_post = true;
  options.spin_while_waiting = true;
  return options;
}

GlooCommunicator::~GlooCommunicator() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    impl_->queue.clear();  // operations never started: their handles report a broken promise
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int GlooCommunicator::rank() const { return impl_->rank; }
int GlooCommunicator::size() const { return impl_->size(); }
const std::string& GlooCommunicator::name() const { return impl_->name; }
const std::vector<int>& GlooCommunicator::members() const { return impl_->members; }

std::unique_ptr<CommHandle> GlooCommunicator::AllReduceSumAsync(torch::Tensor& buffer) {
  comm_checks::CheckBuffer("all_reduce", impl_->name, buffer, "buffer");
  Impl* impl = impl_.get();
  CallScratch scratch{GlooScratch(GlooScratchOp::kAllReduce, buffer, size())};
  return std::make_unique<QueuedHandle>(
      impl->Enqueue<void>("all_reduce", [impl, buffer, borrowed = scratch]() mutable {
        try {
          torch::Tensor host = OnHost(buffer);
          if (host.scalar_type() == at::kBFloat16 && impl->size() > 1) {
            impl->BF16AllReduce(host, borrowed);
          } else {
            std::vector<at::Tensor> list{host};
            impl->WaitWork(Posted([&] { return impl->pg->allreduce(list); }));
            host = list[0];
          }
          borrowed.Release();
          CopyBackIfStaged(buffer, host);
        } catch (...) {
          borrowed.Release();
          impl->Fail("all_reduce", "", std::current_exception());
        }
      }),
      impl->options, std::move(scratch));
}

std::unique_ptr<CommHandle> GlooCommunicator::ReduceScatterSumAsync(const torch::Tensor& input,
                                                                    torch::Tensor& output) {
  comm_checks::CheckReduceScatter(impl_->name, size(), input, output);
  Impl* impl = impl_.get();
  CallScratch scratch{GlooScratch(GlooScratchOp::kReduceScatter, output, size())};
  return std::make_unique<QueuedHandle>(
      impl->Enqueue<void>("reduce_scatter", [impl, input, output, borrowed = scratch]() mutable {
        if (impl->size() == 1) {
          output.view(-1).copy_(input.view(-1));
          return;
        }
        torch::Tensor host_out = OnHost(output);
        const torch::Tensor tmp = borrowed.at(0);
        borrowed.Release();  // the handle keeps the storage until Wait()
        impl->RingReduceScatter(OnHost(input), host_out, tmp);
        CopyBackIfStaged(output, host_out);
      }),
      impl->options, std::move(scratch));
}

std::unique_ptr<CommHandle> GlooCommunicator::AllGatherAsync(const torch::Tensor& input,
                                                             torch::Tensor& output) {
  comm_checks::CheckAllGather(impl_->name, size(), input, output);
  Impl* impl = impl_.get();
  return std::make_unique<QueuedHandle>(
      impl->Enqueue<void>("all_gather", [impl, input, output]() mutable {
        torch::Tensor host_out = OnHost(output);
        impl->RingAllGather(OnHost(input), host_out);
        CopyBackIfStaged(output, host_out);
      }),
      impl->options);
}

std::unique_ptr<CommHandle> GlooCommunicator::BroadcastAsync(torch::Tensor& buffer, int root) {
  comm_checks::CheckBuffer("broadcast", impl_->name, buffer, "buffer");
  comm_checks::CheckPeer("broadcast", impl_->name, size(), rank(), root, "root", true);
  Impl* impl = impl_.get();
  return std::make_unique<QueuedHandle>(
      impl->Enqueue<void>("broadcast", [impl, buffer, root]() mutable {
        try {
          std::vector<at::Tensor> list{OnHost(buffer)};
          c10d::BroadcastOptions options;
          options.rootRank = root;
          impl->WaitWork(Posted([&] { return impl->pg->broadcast(list, options); }));
          CopyBackIfStaged(buffer, list[0]);
        } catch (...) {
          impl->Fail("broadcast", root == impl->rank ? "" : "root " + impl->Peer(root),
                     std::current_exception());
        }
      }),
      impl->options);
}

std::unique_ptr<CommHandle> GlooCommunicator::SendAsync(const torch::Tensor& buffer, int dst) {
  comm_checks::CheckBuffer("send", impl_->name, buffer, "buffer");
  comm_checks::CheckPeer("send", impl_->name, size(), rank(), dst, "dst", false);
  Impl* impl = impl_.get();
  auto posted = impl->Enqueue<c10::intrusive_ptr<c10d::Work>>(
      "send", [impl, buffer, dst]() -> c10::intrusive_ptr<c10d::Work> {
        try {
          std::vector<at::Tensor> list{OnHost(buffer)};
          return Posted([&] { return impl->pg->send(list, dst, /*tag=*/0); });
        } catch (...) {
          impl->Fail("send", impl->Peer(dst), std::current_exception());
        }
      });
  return std::make_unique<P2PHandle>(impl_, "send", dst, std::move(posted), nullptr);
}

std::unique_ptr<CommHandle> GlooCommunicator::RecvAsync(torch::Tensor& buffer, int src) {
  comm_checks::CheckBuffer("recv", impl_->name, buffer, "buffer");
  comm_checks::CheckPeer("recv", impl_->name, size(), rank(), src, "src", false);
  Impl* impl = impl_.get();
  torch::Tensor host = OnHost(buffer);
  auto posted = impl->Enqueue<c10::intrusive_ptr<c10d::Work>>(
      "recv", [impl, host, src]() -> c10::intrusive_ptr<c10d::Work> {
        try {
          std::vector<at::Tensor> list{host};
          return Posted([&] { return impl->pg->recv(list, src, /*tag=*/0); });
        } catch (...) {
          impl->Fail("recv", impl->Peer(src), std::current_exception());
        }
      });
  std::function<void()> finish;
  if (!buffer.is_cpu()) finish = [buffer, host]() mutable { buffer.copy_(host); };
  return std::make_unique<P2PHandle>(impl_, "recv", src, std::move(posted), std::move(finish));
}

std::unique_ptr<CommHandle> GlooCommunicator::AllToAllAsync(const torch::Tensor& input,
                                                             const std::vector<int64_t>& send_rows,
                                                             torch::Tensor& output,
                                                             const std::vector<int64_t>& recv_rows) {
  comm_checks::CheckAllToAll(impl_->name, size(), input, send_rows, output, recv_rows);
  Impl* impl = impl_.get();
  return std::make_unique<QueuedHandle>(impl->Enqueue<void>(
      "all_to_all", [impl, input, output, send_rows, recv_rows]() mutable {
        if (impl->size() == 1) {
          output.copy_(input);
          return;
        }
        try {
          torch::Tensor host_in = OnHost(input), host_out = OnHost(output);
          std::vector<int64_t> out_splits = recv_rows, in_splits = send_rows;
          impl->WaitWork(Posted(
              [&] { return impl->pg->alltoall_base(host_out, host_in, out_splits, in_splits); }));
          CopyBackIfStaged(output, host_out);
        } catch (...) {
          impl->Fail("all_to_all", "", std::current_exception());
        }
      }),
      impl->options);
}

void GlooCommunicator::Barrier() {
  Impl* impl = impl_.get();
  impl->Enqueue<void>("barrier",
                      [impl] {
                        try {
                          impl->WaitWork(Posted([&] { return impl->pg->barrier(); }));
                        } catch (...) {
                          impl->Fail("barrier", "", std::current_exception());
                        }
                      })
      .get();
}

}  // namespace meshplan
