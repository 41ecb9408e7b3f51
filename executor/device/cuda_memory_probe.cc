// The MemoryProbe of a CUDA device: LibTorch's caching allocator's own counters (built
// only against a LibTorch with CUDA: executor/CMakeLists.txt adds this file when the
// c10_cuda target exists; see memory_probe.h).
#include <c10/cuda/CUDACachingAllocator.h>

#include <map>
#include <memory>
#include <mutex>

#include "executor/device/memory_probe.h"

namespace meshplan {

namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;
constexpr size_t kAggregate = 0;  // StatType::AGGREGATE (its namespace moved across versions)

class CudaProbe final : public MemoryProbe {
 public:
  explicit CudaProbe(c10::DeviceIndex device) : device_(device) {}
  int64_t live_bytes() const override { return Stats().allocated_bytes[kAggregate].current; }
  int64_t peak_bytes() const override { return Stats().allocated_bytes[kAggregate].peak; }
  int64_t peak_reserved_bytes() const override { return Stats().reserved_bytes[kAggregate].peak; }
  void ResetPeak() override { alloc::resetPeakStats(device_); }

 private:
  alloc::DeviceStats Stats() const { return alloc::getDeviceStats(device_); }
  c10::DeviceIndex device_;
};

}  // namespace

MemoryProbe* CudaMemoryProbe(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<CudaProbe>> probes;  // one per device, never freed
  std::lock_guard<std::mutex> lock(mu);
  auto& probe = probes[device];
  if (!probe) probe = std::make_unique<CudaProbe>(static_cast<c10::DeviceIndex>(device));
  return probe.get();
}

}  // namespace meshplan
