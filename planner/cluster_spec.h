// ClusterSpec: nodes of identical GPUs joined by a two-tier network.
//
// Bandwidths are per GPU and per direction (bytes/s): what one rank can send
// while every rank sends at once. A collective whose group stays inside a node
// runs on intra_node; one that crosses nodes is limited by inter_node.
#pragma once

#include <cstdint>
#include <string>

#include "planner/hardware_spec.h"

namespace meshplan {

struct NetworkTier {
  std::string name;          // "NVLink4", "PCIe4", "InfiniBand NDR", ...
  double bandwidth_Bps = 0;  // per GPU, per direction
  double latency_s = 0;      // per ring step
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
