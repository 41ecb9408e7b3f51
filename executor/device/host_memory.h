// Keeping freed host memory inside the process, so CPU training does not page-fault on
// every step: RetainFreedHostMemory sets glibc's M_MMAP_THRESHOLD to its maximum (32 MiB)
// and M_TRIM_THRESHOLD to 2 GiB, as jemalloc / tcmalloc do by design.
// Process-wide (it configures malloc), idempotent, a no-op without glibc; call it before
// the first step (meshplan run's ranks and the calibration do).
// Why (page faults measured against the cost model): docs/executor_internals.md#host-memory.
#pragma once

#include <cstdint>

namespace meshplan {

// Returns false when the C library refused the settings (or is not glibc).
bool RetainFreedHostMemory();

// The host memory a new allocation can take now without swapping: /proc/meminfo's
// MemAvailable, else the free pages (sysconf); 0 when unknown. What `run` checks a plan's
// CPU ranks against before they start, and `calibrate` its shapes.
int64_t AvailableHostMemoryBytes();

}  // namespace meshplan
