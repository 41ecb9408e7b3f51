// Choosing the training device and the attention core (executor/device/training_device.h,
// executor/model/fused_attention.h). On this CPU-only LibTorch: auto is the CPU, cuda is refused
// with the reason, the attention core is the naive one.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <torch/cuda.h>

#include <string>

#include "executor/device/training_device.h"
#include "executor/model/fused_attention.h"

namespace meshplan {
namespace {

TEST_CASE("device choice: parsing, and auto / cpu / cuda on this machine", "[executor][device]") {
  DeviceChoice choice = DeviceChoice::kCpu;
  CHECK(ParseDeviceChoice("CUDA", &choice));
  CHECK(choice == DeviceChoice::kCuda);
  CHECK(ParseDeviceChoice("auto", &choice));
  CHECK(choice == DeviceChoice::kAuto);
  CHECK_FALSE(ParseDeviceChoice("gpu0", &choice));

  CHECK(ChooseTrainingDevice(DeviceChoice::kCpu, 3) == at::Device(at::kCPU));
  CHECK(TrainingDeviceName(at::Device(at::kCPU)) == "cpu");
  std::string why;
  if (TorchCudaAvailable(&why)) {
    const at::Device d = ChooseTrainingDevice(DeviceChoice::kAuto, 1);
    CHECK(d.is_cuda());
    CHECK(d.index() == 1 % static_cast<int>(torch::cuda::device_count()));
  } else {
    INFO(why);
    CHECK_FALSE(why.empty());
    CHECK(ChooseTrainingDevice(DeviceChoice::kAuto, 0) == at::Device(at::kCPU));
    CHECK_THROWS_WITH(ChooseTrainingDevice(DeviceChoice::kCuda, 0),
                      Catch::Contains("--device cuda") && Catch::Contains(why));
  }
  SynchronizeDevice(at::Device(at::kCPU));  // nothing to wait for
}

TEST_CASE("attention core: fused only on CUDA in bf16 / mixed",
          "[executor][device]") {
  const at::Device cpu(at::kCPU), cuda(at::kCUDA, 0);
  for (const Precision p : {Precision::kFp32, Precision::kBf16, Precision::kMixed})
    CHECK(ExecutorAttention(cpu, p) == AttentionImpl::kNaive);
  CHECK(ExecutorAttention(cuda, Precision::kFp32) == AttentionImpl::kNaive);
  CHECK(ExecutorAttention(cuda, Precision::kMixed) == AttentionImpl::kFused);
  CHECK(ExecutorAttention(cuda, Precision::kBf16) == AttentionImpl::kFused);
}

}  // namespace
}  // namespace meshplan
