// ClusterSpec: nodes of identical GPUs joined by a two-tier network.
//
// Bandwidths are per GPU and per direction (bytes/s): the line rate one rank can send
// at while every rank sends at once; bus_efficiency is the fraction NCCL's protocols
// deliver of it (its "bus bandwidth"). How collectives use the tiers:
// planner/cost/collective_time.h.
#pragma once

#include <cstdint>
#include <string>

#include "planner/hardware_spec.h"

namespace meshplan {

struct NetworkTier {
  std::string name;          // "NVLink4", "PCIe4", "InfiniBand NDR", ...
  double bandwidth_Bps = 0;  // per GPU, per direction
  double latency_s = 0;      // per ring step
  double bus_efficiency = 1; // achieved bus bandwidth / line rate, in (0, 1]
  double bus_bandwidth_Bps() const { return bandwidth_Bps * bus_efficiency; }
  bool operator==(const NetworkTier&) const = default;
};

struct ClusterSpec {
  std::string name;
  GpuSpec gpu;
  int64_t nodes = 1;
  int64_t gpus_per_node = 1;
  NetworkTier intra_node;
  NetworkTier inter_node;

  int64_t world_size() const { return nodes * gpus_per_node; }
  bool operator==(const ClusterSpec&) const = default;
};

}  // namespace meshplan
