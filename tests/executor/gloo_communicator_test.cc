// GlooCommunicator: every collective on 2, 3 and 4 ranks run as threads of one
// process over a shared c10d::HashStore, sub-groups, async overlap, argument
// checks and failure reporting.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <atomic>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "executor/comm/gloo_communicator.h"

namespace meshplan {
namespace {

using namespace std::chrono_literals;
using test::Expect;
using test::OnThreads;

GlooOptions FastOptions(std::chrono::milliseconds timeout = 20s) {
  GlooOptions options;
  options.timeout = timeout;
  options.hostname = "127.0.0.1";
  return options;
}

c10::intrusive_ptr<c10d::Store> NewStore() {
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(20s);
  return store;
}

std::vector<int> Iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Runs body(comm) on each rank of a world group of n threads.
void OnWorld(int n, const std::function<void(GlooCommunicator&)>& body,
             GlooOptions options = FastOptions()) {
  auto store = NewStore();
  OnThreads(n, [&](int r) {
    GlooCommunicator comm(store, r, Iota(n), "world", options);
    body(comm);
  });
}

void ExpectEqual(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  Expect(torch::equal(got, want), what + ": got " + std::to_string(got.sum().item<double>()) +
                                      " (sum), want " + std::to_string(want.sum().item<double>()));
}

// Rank r's input: values r*1000 + i, exact in fp32.
torch::Tensor RankData(int r, int64_t numel) {
  return torch::arange(numel, torch::kFloat32) + 1000.0f * static_cast<float>(r);
}

TEST_CASE("gloo all-reduce sums in place over the group", "[executor][gloo]") {
  const int n = GENERATE(2, 4);
  OnWorld(n, [n](GlooCommunicator& comm) {
    torch::Tensor buffer = RankData(comm.rank(), 1001);
    comm.AllReduceSum(buffer);
    torch::Tensor want = torch::zeros({1001});
    for (int r = 0; r < n; ++r) want += RankData(r, 1001);
    ExpectEqual(buffer, want, "all_reduce on rank " + std::to_string(comm.rank()));
  });
}

TEST_CASE("gloo ranks on compute cores: a collective is done when its call returns (its "
          "waiter spinning), send/recv stay asynchronous",
          "[executor][gloo]") {
  const GlooOptions options = ForRanksOnComputeCores(FastOptions());
  Expect(options.complete_collectives_at_post && options.spin_while_waiting,
         "ForRanksOnComputeCores sets both");
  OnWorld(3, [](GlooCommunicator& comm) {
    torch::Tensor buffer = torch::full({5}, static_cast<float>(comm.rank() + 1));
    auto reduced = comm.AllReduceSumAsync(buffer);
    // Read before Wait(): the sum 1 + 2 + 3 is already there.
    ExpectEqual(buffer, torch::full({5}, 6.0f), "all-reduce before Wait");
    torch::Tensor gathered = torch::empty({3, 2});
    auto all_gather = comm.AllGatherAsync(torch::full({2}, static_cast<float>(comm.rank())), gathered);
    ExpectEqual(gathered.select(1, 0), torch::arange(3, torch::kFloat32), "all-gather before Wait");
    reduced->Wait();
    all_gather->Wait();
    // A ring of sends and receives posted before either is waited on: no deadlock.
    const int n = comm.size(), next = (comm.rank() + 1) % n, prev = (comm.rank() + n - 1) % n;
    torch::Tensor in = torch::empty({4});
    auto send = comm.SendAsync(torch::full({4}, static_cast<float>(comm.rank())), next);
    auto recv = comm.RecvAsync(in, prev);
    recv->Wait();
    send->Wait();
    ExpectEqual(in, torch::full({4}, static_cast<float>(prev)), "ring recv");
  }, options);
}

TEST_CASE("gloo all-reduce sums bf16 buffers (rings), any size", "[executor][gloo][precision]") {
  const int n = GENERATE(2, 3);
  // Small integers: exact in bf16 and in any summation order. 12 elements split into 2 or
  // 3 chunks (the ring path, with its temporary when n > 2); 13 do not (the fp32 copy).
  for (const int64_t numel : {12, 13}) {
    OnWorld(n, [n, numel](GlooCommunicator& comm) {
      torch::Tensor buffer =
          (torch::arange(numel, torch::kFloat32).remainder(7) + comm.rank()).to(torch::kBFloat16);
      comm.AllReduceSum(buffer);
      torch::Tensor want = torch::zeros({numel});
      for (int r = 0; r < n; ++r) want += torch::arange(numel, torch::kFloat32).remainder(7) + r;
      Expect(buffer.scalar_type() == torch::kBFloat16, "the buffer stays bf16");
      ExpectEqual(buffer.to(torch::kFloat32), want,
                  "bf16 all_reduce of " + std::to_string(numel) + " on rank " + std::to_string(comm.rank()));
    });
  }
}

TEST_CASE("gloo reduce-scatter gives rank r the sum of chunk r", "[executor][gloo]") {
  const int n = GENERATE(2, 3, 4);
  const int64_t k = 257;  // odd chunk size
  OnWorld(n, [n, k](GlooCommunicator& comm) {
    torch::Tensor input = RankData(comm.rank(), n * k).view({n, k});
    torch::Tensor output = torch::full({k}, -1.0f);
    comm.ReduceScatterSum(input, output);
    torch::Tensor want = torch::zeros({k});
    for (int r = 0; r < n; ++r) want += RankData(r, n * k).narrow(0, comm.rank() * k, k);
    ExpectEqual(output, want, "reduce_scatter on rank " + std::to_string(comm.rank()));
    ExpectEqual(input.view(-1), RankData(comm.rank(), n * k), "reduce_scatter input untouched");
  });
}

TEST_CASE("gloo all-gather concatenates every rank's input in rank order", "[executor][gloo]") {
  const int n = GENERATE(2, 3, 4);
  OnWorld(n, [n](GlooCommunicator& comm) {
    torch::Tensor input = RankData(comm.rank(), 33);
    torch::Tensor output = torch::full({n, 33}, -1.0f);
    comm.AllGather(input, output);
    for (int r = 0; r < n; ++r)
      ExpectEqual(output[r], RankData(r, 33), "all_gather slot " + std::to_string(r));
  });
}

TEST_CASE("gloo broadcast copies the root's buffer everywhere", "[executor][gloo]") {
  const int n = GENERATE(2, 4);
  OnWorld(n, [](GlooCommunicator& comm) {
    torch::Tensor buffer = RankData(comm.rank(), 64);
    comm.Broadcast(buffer, 1);
    ExpectEqual(buffer, RankData(1, 64), "broadcast on rank " + std::to_string(comm.rank()));
  });
}

TEST_CASE("gloo send/recv: a ring posts both before waiting, without deadlock",
          "[executor][gloo]") {
  const int n = GENERATE(2, 4);
  OnWorld(n, [n](GlooCommunicator& comm) {
    const int next = (comm.rank() + 1) % n, prev = (comm.rank() + n - 1) % n;
    torch::Tensor out = RankData(comm.rank(), 500), in = torch::zeros({500});
    auto send = comm.SendAsync(out, next);
    auto recv = comm.RecvAsync(in, prev);
    send->Wait();
    recv->Wait();
    ExpectEqual(in, RankData(prev, 500), "recv from the previous rank");
    // Two messages to the same peer arrive in order.
    torch::Tensor a = torch::zeros({8}), b = torch::zeros({8});
    if (comm.rank() == 0) {
      comm.Send(torch::full({8}, 1.0f), 1);
      comm.Send(torch::full({8}, 2.0f), 1);
    } else if (comm.rank() == 1) {
      comm.Recv(a, 0);
      comm.Recv(b, 0);
      ExpectEqual(a, torch::full({8}, 1.0f), "first message");
      ExpectEqual(b, torch::full({8}, 2.0f), "second message");
    }
  });
}

TEST_CASE("gloo barrier waits for every rank", "[executor][gloo]") {
  const int n = GENERATE(2, 4);
  std::atomic<int> arrived{0};
  OnWorld(n, [&arrived, n](GlooCommunicator& comm) {
    if (comm.rank() == n - 1) std::this_thread::sleep_for(100ms);
    arrived.fetch_add(1);
    comm.Barrier();
    Expect(arrived.load() == n, "a rank left the barrier before everyone arrived");
  });
}

TEST_CASE("gloo async calls return before the collective completes", "[executor][gloo]") {
  // Rank 1 joins only after rank 0 has issued three operations *and* returned from
  // the calls: a blocking *Async call would deadlock here (and fail by timeout).
  auto store = NewStore();
  OnThreads(2, [&](int r) {
    GlooCommunicator comm(store, r, {0, 1}, "world", FastOptions(10s));
    torch::Tensor a = RankData(r, 4096), b = RankData(r, 4096) * 2;
    torch::Tensor c_in = RankData(r, 7), c_out = torch::zeros({2, 7});
    if (r == 0) {
      auto ha = comm.AllReduceSumAsync(a);
      auto hb = comm.AllReduceSumAsync(b);
      auto hc = comm.AllGatherAsync(c_in, c_out);
      store->set("issued", std::vector<uint8_t>{1});  // vector, not {1}: LibTorch 2 adds set(key, string)
      torch::Tensor x = torch::rand({128, 128}) / 128;  // compute while they are in flight
      for (int i = 0; i < 8; ++i) x = torch::tanh(x.matmul(x));
      hc->Wait();  // waiting out of issue order is allowed
      ha->Wait();
      hb->Wait();
    } else {
      store->wait({"issued"});
      comm.AllReduceSum(a);
      comm.AllReduceSum(b);
      comm.AllGather(c_in, c_out);
    }
    ExpectEqual(a, RankData(0, 4096) + RankData(1, 4096), "first all_reduce");
    ExpectEqual(b, (RankData(0, 4096) + RankData(1, 4096)) * 2, "second all_reduce");
    ExpectEqual(c_out[1], RankData(1, 7), "all_gather");
  });
}

template <typename E>
void ExpectThrows(const std::function<void()>& call, const std::string& needle) {
  try {
    call();
  } catch (const E& e) {
    Expect(std::string(e.what()).find(needle) != std::string::npos,
           "message '" + std::string(e.what()) + "' lacks '" + needle + "'");
    return;
  }
  throw std::runtime_error("expected an exception mentioning '" + needle + "'");
}

TEST_CASE("gloo rejects mismatched sizes, dtypes and peers with invalid_argument",
          "[executor][gloo]") {
  OnWorld(2, [](GlooCommunicator& comm) {
    torch::Tensor in = torch::zeros({10});
    torch::Tensor odd = torch::zeros({15});
    using IA = std::invalid_argument;
    ExpectThrows<IA>([&] { comm.AllGatherAsync(in, odd); }, "all_gather");
    ExpectThrows<IA>([&] { comm.ReduceScatterSumAsync(in, odd); }, "reduce_scatter");
    torch::Tensor doubles = torch::zeros({20}, torch::kFloat64);
    ExpectThrows<IA>([&] { comm.AllGatherAsync(in, doubles); }, "dtype");
    torch::Tensor strided = torch::zeros({4, 6}).t();
    ExpectThrows<IA>([&] { comm.AllReduceSumAsync(strided); }, "contiguous");
    ExpectThrows<IA>([&] { comm.SendAsync(in, comm.rank()); }, "itself");
    ExpectThrows<IA>([&] { comm.RecvAsync(in, -1); }, "outside");
    ExpectThrows<IA>([&] { comm.BroadcastAsync(in, 2); }, "root=2");
    // Nothing was started: the group still works.
    torch::Tensor ones = torch::ones({3});
    comm.AllReduceSum(ones);
    ExpectEqual(ones, torch::full({3}, 2.0f), "all_reduce after rejected calls");
  });
}

TEST_CASE("gloo sub-groups: group rank is the index in the members list", "[executor][gloo]") {
  auto store = NewStore();
  OnThreads(4, [&](int r) {
    // {3, 1} lists world rank 3 first: it is group rank 0.
    const std::vector<int> members = r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{3, 1};
    GlooCommunicator comm(store, r, members, "pairs", FastOptions());
    Expect(comm.size() == 2, "group size");
    Expect(comm.members()[comm.rank()] == r, "group rank maps back to the world rank");
    torch::Tensor in = torch::full({1}, static_cast<float>(r)), out = torch::zeros({2});
    comm.AllGather(in, out);
    Expect(out[0].item<float>() == members[0] && out[1].item<float>() == members[1],
           "all_gather in member order on world rank " + std::to_string(r));
  });
}

TEST_CASE("gloo failures name the group and the peer, then the group stays broken",
          "[executor][gloo]") {
  auto store = NewStore();
  OnThreads(2, [&](int r) {
    GlooCommunicator comm(store, r, {0, 1}, "pair", FastOptions(1500ms));
    if (r == 1) {  // never sends; stays alive until rank 0 has seen its timeout
      store->wait({"done"});
      return;
    }
    torch::Tensor in = torch::zeros({4});
    ExpectThrows<std::runtime_error>([&] { comm.Recv(in, 1); },
                                     "group 'pair' (rank 0 of 2, world rank 0) with peer rank 1 "
                                     "(world rank 1)");
    ExpectThrows<std::runtime_error>([&] { comm.AllReduceSumAsync(in); }, "broken");
    store->set("done", std::vector<uint8_t>{1});
  });
}

TEST_CASE("gloo: a peer that leaves makes the next collective fail, not hang (also while "
          "its waiter spins)",
          "[executor][gloo]") {
  const bool spin = GENERATE(false, true);
  const GlooOptions options = spin ? ForRanksOnComputeCores(FastOptions(5s)) : FastOptions(5s);
  auto store = NewStore();
  OnThreads(2, [&](int r) {
    auto comm = std::make_unique<GlooCommunicator>(store, r, std::vector<int>{0, 1}, "pair",
                                                   options);
    if (r == 1) {
      comm.reset();  // leaves: closes its connections
      store->set("left", std::vector<uint8_t>{1});
      return;
    }
    store->wait({"left"});
    torch::Tensor buffer = torch::ones({16});
    ExpectThrows<std::runtime_error>([&] { comm->AllReduceSum(buffer); }, "group 'pair'");
  });
}

}  // namespace
}  // namespace meshplan
