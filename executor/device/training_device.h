// The device a rank trains on: choosing it (`meshplan run --device`), making it the calling
// thread's current device, waiting for its queued work, naming it in measured.json.
//
// cuda needs a LibTorch built with CUDA (torch::cuda::is_available(); the Debian libtorch
// is CPU-only, the one inside a CUDA PyTorch is not: docs/executor.md). Each local rank
// takes device local_rank % device count. auto picks cuda when it is available, else cpu.
// Nothing here needs the CUDA headers: LibTorch's device-generic interfaces do the work.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace meshplan {

enum class DeviceChoice { kAuto, kCpu, kCuda };
inline constexpr const char* kAllowedDevices = "auto, cpu, cuda";
// "auto" | "cpu" | "cuda" (any case); false for anything else.
bool ParseDeviceChoice(const std::string& text, DeviceChoice* choice);

// True when this LibTorch has CUDA and sees a device; *why (optional) says why not.
bool TorchCudaAvailable(std::string* why = nullptr);

// The device of the rank with this local rank. std::runtime_error for cuda when
// TorchCudaAvailable() is false, with the reason.
at::Device ChooseTrainingDevice(DeviceChoice choice, int local_rank);

// CUDA: makes `device` the calling thread's current device (every rank thread or process
// calls it before building anything). CPU: nothing.
void MakeCurrentDevice(const at::Device& device);
// CUDA: blocks until every kernel queued on the device has finished. CPU: nothing (CPU
// ops are synchronous).
void SynchronizeDevice(const at::Device& device);
// "cpu", or the CUDA device's name ("NVIDIA H100 80GB HBM3"): measured.json's device.
std::string TrainingDeviceName(const at::Device& device);
// The memory a rank on `device` can hold: the GPU's total memory, or the host's physical
// memory for the CPU; 0 when unknown.
int64_t DeviceMemoryBytes(const at::Device& device);

}  // namespace meshplan
