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
// On CUDA (the GPU issue): the caching allocator's allocated / max allocated bytes.
// Thread-safe (atomic counters).
#pragma once

#include <cstdint>

namespace meshplan {

class MemoryProbe {
 public:
  virtual ~MemoryProbe() = default;
  virtual int64_t live_bytes() const = 0;  // bytes held by live tensors now
  virtual int64_t peak_bytes() const = 0;  // max of live_bytes since the last ResetPeak
  virtual void ResetPeak() = 0;            // peak := live
};

// The process's CPU probe (installed on the first call; later calls return the same one).
MemoryProbe& CpuMemoryProbe();

}  // namespace meshplan
