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
  // An all-reduce the backend runs with an algorithm of its own rather than the
  // reduce-scatter + all-gather ring the other collectives are timed as (Gloo on CPU ranks:
  // gloo::allreduce, 1.3-2.4 times a ring step's latency on a 2-vCPU VM): its latency per
  // ring step and bandwidth, which `meshplan calibrate` fits from the all-reduce samples
  // alone. 0: the tier's own (NCCL's all-reduce is that ring).
  double allreduce_latency_s = 0;
  double allreduce_bandwidth_Bps = 0;
  double bus_bandwidth_Bps() const { return bandwidth_Bps * bus_efficiency; }
  bool has_allreduce() const { return allreduce_bandwidth_Bps > 0; }
  // Latency per ring step and achieved bus bandwidth of an all-reduce (all_reduce true) or
  // of the other collectives.
  double latency_of(bool all_reduce) const {
    return all_reduce && has_allreduce() ? allreduce_latency_s : latency_s;
  }
  double bus_bandwidth_of(bool all_reduce) const {
    return (all_reduce && has_allreduce() ? allreduce_bandwidth_Bps : bandwidth_Bps) * bus_efficiency;
  }
  bool operator==(const NetworkTier&) const = default;
};

}  // namespace meshplan
