// MemoryProbe: how many bytes this process's tensors hold on a device, and the peak.
//
// On CPU: CpuMemoryProbe() installs, once per process, a counting wrapper as c10's CPU
// allocator (c10::SetCPUAllocator): every CPU tensor storage allocated AFTER the install
// is counted by its requested size (no allocator rounding, no header), until it is freed.
// Storage allocated before the install is neither counted nor uncounted, so install the
// probe before building the model. Memory outside the c10 allocator (BLAS/oneDNN scratch,
// Gloo's internal buffers, std containers) is not counted: the figure is "bytes of
// tensors", the quantity the detailed memory model predicts.
// The counters are process-wide (the allocator hook is): ranks run as threads of one
// process share them, so per-rank peaks need one process per rank.
// On CUDA: CudaMemoryProbe reads LibTorch's caching allocator (allocated bytes now and
// their peak: the tensors' sizes rounded to the allocator's 512-byte blocks; and the peak
// of reserved bytes, what the allocator held from the driver). ResetPeak resets both
// peaks. Per device: ranks sharing a GPU share its counters.
// Thread-safe (atomic counters; the caching allocator locks).
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
