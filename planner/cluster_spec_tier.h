// NetworkTier: one link class (a network tier, or a GPU's link to host memory) as a
// bandwidth per GPU per direction, a latency and NCCL's (or the copy engine's) achieved
// fraction of the line rate. Split from cluster_spec.h so host_spec.h can use it.
#pragma once

#include <string>

namespace meshplan {

struct NetworkTier {
  std::string name;          // "NVLink4", "PCIe4", "InfiniBand NDR", ...
  double bandwidth_Bps = 0;  // per GPU, per direction
  double latency_s = 0;      // per ring step (per transfer on a host link)
  double bus_efficiency = 1; // achieved bus bandwidth / line rate, in (0, 1]
  double bus_bandwidth_Bps() const { return bandwidth_Bps * bus_efficiency; }
  bool operator==(const NetworkTier&) const = default;
};

}  // namespace meshplan
