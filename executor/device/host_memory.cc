// glibc malloc settings for CPU training (see host_memory.h).
#include "executor/device/host_memory.h"

#include <climits>
#include <cstdlib>  // defines __GLIBC__ on glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace meshplan {

bool RetainFreedHostMemory() {
#if defined(__GLIBC__)
  constexpr int kMaxMmapThreshold = 32 * 1024 * 1024;  // glibc's HEAP_MAX_SIZE / 2 on 64-bit
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, kMaxMmapThreshold) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return mmap_ok && trim_ok;
#else
  return false;
#endif
}

}  // namespace meshplan
