// MemoryProbe: how many bytes this process's tensors hold on a device, and the peak.
// CPU (CpuMemoryProbe): counts the requested size of every CPU tensor storage allocated
// after its install (once per process), so install it before building the model; memory
// outside the c10 allocator is not counted. Its counters are process-wide: ranks run as
// threads of one process share them, so per-rank peaks need one process per rank.
// CUDA (CudaMemoryProbe): LibTorch's caching allocator's allocated bytes and their peak, and
// the peak of reserved bytes; ResetPeak resets both peaks. Per device: ranks sharing a GPU
// share its counters.
// Thread-safe (atomic counters; the caching allocator locks).
// What is counted and why: docs/executor_internals.md#memory-probe.
#pragma once

#include <cstdint>

namespace meshplan {

class MemoryProbe {
 public:
  virtual ~MemoryProbe() = default;
  virtual int64_t live_bytes() const = 0;  // bytes held by live tensors now
  virtual int64_t peak_bytes() const = 0;  // max of live_bytes since the last ResetPeak
  virtual void ResetPeak() = 0;            // peak := live
  // CUDA: the peak of the caching allocator's reserved bytes since the last ResetPeak.
  virtual int64_t peak_reserved_bytes() const { return 0; }
};

// The process's CPU probe (installed on the first call; later calls return the same one).
MemoryProbe& CpuMemoryProbe();
// The probe of CUDA device `device`, or null when this build's LibTorch has no CUDA.
MemoryProbe* CudaMemoryProbe(int device);

}  // namespace meshplan
