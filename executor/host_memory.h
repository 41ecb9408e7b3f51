// Keeping freed host memory inside the process, so CPU training does not page-fault on
// every step.
//
// A training step frees and re-allocates the same activation tensors every micro-batch.
// With glibc's defaults, buffers above the (dynamic) mmap threshold are unmapped on free
// and the top of the heap is trimmed back to the OS, so the next micro-batch touches fresh
// pages again: on a VM one page fault costs ~10 us, i.e. ~2.5 ms per MB, which made the
// CPU executor's step 30-70% slower with recompute none (every block's activations kept,
// then freed) than the calibrated cost model predicted, while full recompute (small
// transient stash, reused warm) matched it (measured in tests/executor/
// calibration_loop_test.cc). RetainFreedHostMemory sets M_MMAP_THRESHOLD to glibc's
// maximum (32 MiB: smaller blocks come from the heap and are reused) and M_TRIM_THRESHOLD
// to 2 GiB (freed heap memory stays mapped), as jemalloc / tcmalloc do by design.
// Process-wide (it configures malloc), idempotent, a no-op without glibc; call it before
// the first step (meshplan run's ranks and the calibration do).
#pragma once

namespace meshplan {

// Returns false when the C library refused the settings (or is not glibc).
bool RetainFreedHostMemory();

}  // namespace meshplan
