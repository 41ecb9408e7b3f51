// CUDA device facts through the CUDA runtime, whether or not LibTorch was built with CUDA.
//
// Compiled with the CUDA runtime when the build found the toolkit
// (MESHPLAN_WITH_CUDA_RUNTIME, executor/cuda.cmake); without it every function answers
// "no device". Thread-safe (the runtime's calls are).
#pragma once

#include <cstdint>
#include <string>

namespace meshplan {

// True when this build links the CUDA runtime.
bool BuiltWithCudaRuntime();
// Visible CUDA devices (0 without the runtime, a driver or a device). *why (optional)
// receives the runtime's reason when the answer is 0.
int CudaDeviceCount(std::string* why = nullptr);
// "NVIDIA H100 80GB HBM3" (cudaGetDeviceProperties), or "cuda:<index>" when unknown.
std::string CudaDeviceName(int index);
// The device's total memory in bytes (cudaDeviceProp::totalGlobalMem); 0 when unknown.
int64_t CudaTotalMemoryBytes(int index);

// Device time between two points of the calling thread's work on the legacy default
// stream (LibTorch's default stream: the one the trainer computes on, and the one the NCCL
// communicator orders its collectives after). Two CUDA events of the current device.
// Without the runtime the calls do nothing (0 seconds): StepTimer then uses the wall clock.
class CudaInterval {
 public:
  CudaInterval();   // creates the events (current device); std::runtime_error on failure
  ~CudaInterval();
  CudaInterval(const CudaInterval&) = delete;
  CudaInterval& operator=(const CudaInterval&) = delete;
  void Start();      // records the start event
  double Stop();     // records the end event, waits for it, returns the seconds between
 private:
  void* start_ = nullptr;  // cudaEvent_t
  void* stop_ = nullptr;
};

}  // namespace meshplan
