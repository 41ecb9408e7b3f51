// HostSpec: the host side of a node as the offload cost model sees it (planner/cost/offload.h).
//
// What a plan that offloads optimizer states, activations or parameters needs to know:
// how much host memory a node has, how fast one GPU reaches it, and how fast the host's
// CPUs run the AdamW step for one GPU's share of the parameters. Units are SI and sit in
// the names; the YAML `host:` block (a hardware file's default, a cluster file's override)
// uses GB, GB/s and is converted once at load (planner/config/config_loader_specs.cc).
// memory_bytes_per_node == 0 means "no host data": a plan that offloads is refused on
// such a cluster (exit 2 naming the missing field), and the search tries no offload there.
#pragma once

#include <cstdint>
#include <string>

#include "planner/cluster_spec_tier.h"

namespace meshplan {

struct HostSpec {
  int64_t memory_bytes_per_node = 0;  // host DRAM of one node, shared by its GPUs
  // One GPU's link to host memory, per direction, while every GPU of the node copies at
  // once (PCIe Gen4 / Gen5 x16, or NVLink-C2C on GH200); bus_efficiency as for the network.
  NetworkTier link;
  // A CPU AdamW step, per GPU's share of the node's cores: bytes of optimizer state
  // (fp32 master weights + m + v) updated per second.
  double optimizer_Bps = 0;
  std::string source;  // data sheets / papers behind the numbers

  bool known() const { return memory_bytes_per_node > 0; }
  bool operator==(const HostSpec&) const = default;
};

}  // namespace meshplan
