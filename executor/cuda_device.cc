// CUDA device facts (see cuda_device.h).
#include "executor/cuda_device.h"

#if MESHPLAN_WITH_CUDA_RUNTIME
#include <cuda_runtime_api.h>
#endif

namespace meshplan {

#if MESHPLAN_WITH_CUDA_RUNTIME

bool BuiltWithCudaRuntime() { return true; }

int CudaDeviceCount(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "the CUDA runtime sees no device";
  return count;
}

std::string CudaDeviceName(int index) {
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, index) != cudaSuccess) {
    cudaGetLastError();
    return "cuda:" + std::to_string(index);
  }
  return props.name;
}

#else

bool BuiltWithCudaRuntime() { return false; }

int CudaDeviceCount(std::string* why) {
  if (why != nullptr) *why = "this build has no CUDA runtime (the CUDA toolkit was not found)";
  return 0;
}

std::string CudaDeviceName(int index) { return "cuda:" + std::to_string(index); }

#endif

}  // namespace meshplan
