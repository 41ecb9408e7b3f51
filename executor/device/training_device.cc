// Choosing and driving the training device (see training_device.h).
#include "executor/device/training_device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <unistd.h>

#include <stdexcept>

#include "executor/device/cuda_device.h"
#include "planner/names.h"

namespace meshplan {

bool ParseDeviceChoice(const std::string& text, DeviceChoice* choice) {
  const std::string lower = Lower(text);
  if (lower == "auto") *choice = DeviceChoice::kAuto;
  else if (lower == "cpu") *choice = DeviceChoice::kCpu;
  else if (lower == "cuda") *choice = DeviceChoice::kCuda;
  else return false;
  return true;
}

bool TorchCudaAvailable(std::string* why) {
  if (torch::cuda::is_available()) return true;
  if (why != nullptr) {
    std::string runtime;
    const int devices = CudaDeviceCount(&runtime);
    *why = devices > 0 ? "this LibTorch has no CUDA (a CPU build); build against the LibTorch "
                         "inside a CUDA PyTorch (see docs/executor.md)"
                       : "no CUDA device is visible (" + runtime + ")";
  }
  return false;
}

at::Device ChooseTrainingDevice(DeviceChoice choice, int local_rank) {
  if (choice == DeviceChoice::kCpu) return at::Device(at::kCPU);
  std::string why;
  if (!TorchCudaAvailable(&why)) {
    if (choice == DeviceChoice::kAuto) return at::Device(at::kCPU);
    throw std::runtime_error("--device cuda: " + why);
  }
  const auto count = static_cast<int>(torch::cuda::device_count());
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
}

void MakeCurrentDevice(const at::Device& device) {
  if (!device.is_cuda()) return;
  c10::impl::getDeviceGuardImpl(at::kCUDA)->setDevice(device);
}

void SynchronizeDevice(const at::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::string TrainingDeviceName(const at::Device& device) {
  return device.is_cuda() ? CudaDeviceName(device.index()) : "cpu";
}

int64_t DeviceMemoryBytes(const at::Device& device) {
  if (device.is_cuda()) return CudaTotalMemoryBytes(device.index());
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_bytes > 0 ? static_cast<int64_t>(pages) * page_bytes : 0;
}

}  // namespace meshplan
