// The counting CPU allocator behind CpuMemoryProbe().
//
// Each allocation takes kHeaderBytes more from c10::alloc_cpu and stores its requested
// size in front of the data, so the (function-pointer) deleter can uncount it without a
// lookup table. kHeaderBytes = 64 keeps c10's 64-byte data alignment.
#include "executor/device/memory_probe.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <atomic>
#include <cstring>


namespace meshplan {

namespace {

constexpr size_t kHeaderBytes = 64;

// The allocator hook is process-wide by nature, so are its counters (the one piece of
// global state in meshplan; see memory_probe.h).
std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};

void Count(int64_t delta) {
  const int64_t live = g_live_bytes.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (live > peak &&
         !g_peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void CountingDelete(void* data) {
  if (data == nullptr) return;
  char* base = static_cast<char*>(data) - kHeaderBytes;
  size_t bytes = 0;
  std::memcpy(&bytes, base, sizeof(bytes));
  Count(-static_cast<int64_t>(bytes));
  c10::free_cpu(base);
}

class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return {nullptr, nullptr, &CountingDelete, c10::Device(c10::DeviceType::CPU)};
    char* base = static_cast<char*>(c10::alloc_cpu(bytes + kHeaderBytes));
    std::memcpy(base, &bytes, sizeof(bytes));
    Count(static_cast<int64_t>(bytes));
    void* data = base + kHeaderBytes;
    return {data, data, &CountingDelete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &CountingDelete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

class CpuProbe final : public MemoryProbe {
 public:
  CpuProbe() {
    // Priority above c10's default registration (0), so later default registrations
    // cannot silently replace the counter. Ownership passes to c10 (never freed).
    c10::SetCPUAllocator(new CountingCpuAllocator(), /*priority=*/100);
  }
  int64_t live_bytes() const override { return g_live_bytes.load(); }
  int64_t peak_bytes() const override { return g_peak_bytes.load(); }
  void ResetPeak() override { g_peak_bytes.store(g_live_bytes.load()); }
};

}  // namespace

MemoryProbe& CpuMemoryProbe() {
  static CpuProbe probe;  // thread-safe one-time install
  return probe;
}

#if !MESHPLAN_TORCH_CUDA
// A LibTorch without CUDA has no caching allocator (executor/device/cuda_memory_probe.cc is the
// CUDA one).
MemoryProbe* CudaMemoryProbe(int) { return nullptr; }
#endif

}  // namespace meshplan
