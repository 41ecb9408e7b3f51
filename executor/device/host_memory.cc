// glibc malloc settings for CPU training (see host_memory.h).
#include "executor/device/host_memory.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>  // defines __GLIBC__ on glibc
#include <fstream>
#include <string>

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

int64_t AvailableHostMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");  // a kernel file: never a FIFO
  for (std::string key; meminfo >> key;) {
    int64_t kib = 0;
    if (key == "MemAvailable:" && meminfo >> kib) return kib * 1024;
    meminfo.ignore(1 << 10, '\n');
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page_bytes = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_bytes > 0 ? static_cast<int64_t>(pages) * page_bytes : 0;
}

}  // namespace meshplan
