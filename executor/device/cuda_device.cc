// CUDA device facts (see cuda_device.h).
#include "executor/device/cuda_device.h"

#include <stdexcept>

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

int64_t CudaTotalMemoryBytes(int index) {
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, index) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(props.totalGlobalMem);
}

namespace {

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorName(err) + ": " +
                             cudaGetErrorString(err));
}

}  // namespace

CudaInterval::CudaInterval() {
  cudaEvent_t start = nullptr, stop = nullptr;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  start_ = start;
  stop_ = stop;
}

CudaInterval::~CudaInterval() {
  if (start_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  if (stop_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void CudaInterval::Start() {
  Check(cudaEventRecord(static_cast<cudaEvent_t>(start_), /*legacy default stream*/ nullptr),
        "cudaEventRecord");
}

double CudaInterval::Stop() {
  const auto start = static_cast<cudaEvent_t>(start_), stop = static_cast<cudaEvent_t>(stop_);
  Check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
  Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  return static_cast<double>(ms) / 1e3;
}

#else

CudaInterval::CudaInterval() = default;
CudaInterval::~CudaInterval() = default;
void CudaInterval::Start() {}
double CudaInterval::Stop() { return 0; }

bool BuiltWithCudaRuntime() { return false; }

int CudaDeviceCount(std::string* why) {
  if (why != nullptr) *why = "this build has no CUDA runtime (the CUDA toolkit was not found)";
  return 0;
}

std::string CudaDeviceName(int index) { return "cuda:" + std::to_string(index); }

int64_t CudaTotalMemoryBytes(int) { return 0; }

#endif

}  // namespace meshplan
