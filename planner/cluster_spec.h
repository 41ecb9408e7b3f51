// ClusterSpec: nodes of identical GPUs joined by a two-tier network.
//
// Bandwidths are per GPU and per direction (bytes/s): the line rate one rank can send
// at while every rank sends at once; bus_efficiency is the fraction NCCL's protocols
// deliver of it (its "bus bandwidth"). How collectives use the tiers:
// planner/cost/collective_time.h.
#pragma once

#include <cstdint>
#include <string>

#include "planner/cluster_spec_tier.h"
#include "planner/hardware_spec.h"
#include "planner/host_spec.h"

namespace meshplan {

struct ClusterSpec {
  std::string name;
  GpuSpec gpu;
  int64_t nodes = 1;
  int64_t gpus_per_node = 1;
  NetworkTier intra_node;
  NetworkTier inter_node;
  HostSpec host;  // host memory, host link, CPU optimizer rate (offload); unknown by default

  int64_t world_size() const { return nodes * gpus_per_node; }
  bool operator==(const ClusterSpec&) const = default;
};

}  // namespace meshplan
