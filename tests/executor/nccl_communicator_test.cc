// The NCCL backend behind the communicator factory: backend names, the error paths that
// need no GPU (NCCL missing from the build, bad members, no CUDA device), and on a machine
// with a GPU and a CUDA LibTorch, collectives on one rank and the two-ranks-on-one-GPU
// question (scripts/gpu_sweep.sh records its answer in docs/). Tests that need a GPU
// say so with a WARN and return where there is none.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/cuda.h>

#include <string>
#include <vector>

#include "executor/comm/communicator_factory.h"
#include "executor/device/cuda_device.h"
#if MESHPLAN_WITH_NCCL
#include "executor/comm/nccl_communicator.h"
#endif

namespace meshplan {
namespace {

using namespace std::chrono_literals;

c10::intrusive_ptr<c10d::Store> NewStore() {
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(20s);
  return store;
}

CommOptions FastOptions() {
  CommOptions options;
  options.gloo.timeout = 20s;
  options.nccl_timeout = 20s;
  return options;
}

bool HasCudaTensors() { return torch::cuda::is_available() && CudaDeviceCount() > 0; }

TEST_CASE("communicator factory: backend names", "[executor][nccl]") {
  CommBackend b = CommBackend::kGloo;
  CHECK(ParseCommBackend("nccl", &b));
  CHECK(b == CommBackend::kNccl);
  CHECK(ParseCommBackend("GLOO", &b));
  CHECK(b == CommBackend::kGloo);
  CHECK_FALSE(ParseCommBackend("mpi", &b));
  CHECK(std::string(ToString(CommBackend::kNccl)) == "nccl");
}

TEST_CASE("communicator factory: gloo groups come out of the same call", "[executor][nccl]") {
  auto store = NewStore();
  test::OnThreads(2, [&](int r) {
    auto comm = MakeCommunicator(CommBackend::kGloo, store, r, {0, 1}, "dp", FastOptions());
    at::Tensor t = at::full({4}, static_cast<double>(r + 1));
    comm->AllReduceSum(t);
    test::Expect(t.sum().item<double>() == 12.0, "gloo all-reduce through the factory");
  });
}

TEST_CASE("NCCL backend without a GPU: clear errors", "[executor][nccl]") {
  auto store = NewStore();
  if (!NcclBuiltIn()) {
    // The factory says how to get NCCL instead of failing obscurely.
    try {
      MakeCommunicator(CommBackend::kNccl, store, 0, {0}, "dp", FastOptions());
      FAIL("expected std::runtime_error");
    } catch (const std::runtime_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("not in this build") && Catch::Contains("gloo"));
    }
    return;
  }
  // Member mistakes are caught before any device is touched.
  CHECK_THROWS_AS(MakeCommunicator(CommBackend::kNccl, store, 5, {0, 1}, "dp", FastOptions()),
                  std::invalid_argument);
  CHECK_THROWS_AS(MakeCommunicator(CommBackend::kNccl, store, 0, {0, 0}, "dp", FastOptions()),
                  std::invalid_argument);
  CHECK_THROWS_AS(MakeCommunicator(CommBackend::kNccl, store, 0, {}, "dp", FastOptions()),
                  std::invalid_argument);
  if (CudaDeviceCount() > 0) {
    WARN("a CUDA device is visible: the no-GPU error path is not exercised here");
    return;
  }
  try {
    MakeCommunicator(CommBackend::kNccl, store, 0, {0}, "dp", FastOptions());
    FAIL("expected std::runtime_error");
  } catch (const std::runtime_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("no CUDA device") && Catch::Contains("Gloo"));
  }
}

#if MESHPLAN_WITH_NCCL

TEST_CASE("NCCL on one rank: collectives on CUDA and staged CPU tensors", "[executor][nccl][gpu]") {
  if (!HasCudaTensors()) {
    WARN("skipped: needs a GPU and a LibTorch with CUDA (torch::cuda::is_available() is false)");
    return;
  }
  auto store = NewStore();
  NcclCommunicator comm(store, 0, {0}, "solo");
  CHECK(comm.rank() == 0);
  CHECK(comm.size() == 1);
  const auto cuda = at::TensorOptions().device(at::kCUDA, 0);
  at::Tensor t = at::arange(8, cuda.dtype(at::kFloat));
  comm.AllReduceSum(t);
  CHECK(t.sum().item<double>() == 28.0);  // .item() synchronises the compute stream
  at::Tensor out = at::empty({8}, cuda.dtype(at::kBFloat16));
  comm.AllGather(at::ones({8}, cuda.dtype(at::kBFloat16)), out);
  CHECK(out.to(at::kFloat).sum().item<double>() == 8.0);
  at::Tensor host = at::full({3}, 2.0, at::kDouble);  // staged through the device
  comm.AllReduceSum(host);
  CHECK(host.sum().item<double>() == 6.0);
  comm.Barrier();
  at::Tensor bad = at::ones({2}, cuda.dtype(at::kBool));
  CHECK_THROWS_AS(comm.AllReduceSum(bad), std::invalid_argument);
  CHECK_THROWS_AS(comm.Send(t, 0), std::invalid_argument);  // no peer in a group of one
}

// The question docs/executor.md asks: does NCCL accept two ranks on the same GPU? The answer
// (either way) is printed for scripts/gpu_sweep.sh to record; the test only fails on a
// wrong sum.
TEST_CASE("NCCL: two ranks on one GPU", "[executor][nccl][gpu][two_ranks_one_gpu]") {
  if (!HasCudaTensors()) {
    WARN("skipped: needs a GPU and a LibTorch with CUDA");
    return;
  }
  auto store = NewStore();
  std::vector<std::string> outcome(2);
  test::OnThreads(2, [&](int r) {
    try {
      NcclOptions options;
      options.device = 0;
      options.timeout = 30s;
      NcclCommunicator comm(store, r, {0, 1}, "same_gpu", options);
      at::Tensor t = at::full({1024}, static_cast<double>(r + 1),
                              at::TensorOptions().device(at::kCUDA, 0));
      comm.AllReduceSum(t);
      const double sum = t.sum().item<double>();
      test::Expect(sum == 3.0 * 1024, "two-rank all-reduce on one GPU: wrong sum");
      outcome[static_cast<size_t>(r)] = "accepted";
    } catch (const std::runtime_error& e) {
      outcome[static_cast<size_t>(r)] = std::string("refused: ") + e.what();
    }
  });
  WARN("NCCL " << NcclVersionString() << " with two ranks on " << CudaDeviceName(0)
               << ": rank 0 " << outcome[0] << "; rank 1 " << outcome[1]);
}

#endif  // MESHPLAN_WITH_NCCL

}  // namespace
}  // namespace meshplan
