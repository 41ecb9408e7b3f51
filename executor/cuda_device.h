// CUDA device facts through the CUDA runtime, whether or not LibTorch was built with CUDA.
//
// Compiled with the CUDA runtime when the build found the toolkit
// (MESHPLAN_WITH_CUDA_RUNTIME, executor/cuda.cmake); without it every function answers
// "no device". Thread-safe (the runtime's calls are).
#pragma once

#include <string>

namespace meshplan {

// True when this build links the CUDA runtime.
bool BuiltWithCudaRuntime();
// Visible CUDA devices (0 without the runtime, a driver or a device). *why (optional)
// receives the runtime's reason when the answer is 0.
int CudaDeviceCount(std::string* why = nullptr);
// "NVIDIA H100 80GB HBM3" (cudaGetDeviceProperties), or "cuda:<index>" when unknown.
std::string CudaDeviceName(int index);

}  // namespace meshplan
