// Writing a GpuSpec as a configs/hardware/*.yaml file (what `meshplan calibrate` saves), and
// the same GPU inline in a cluster or plan file (ClusterToYaml, planner/config/config_loader.h).
//
// The output follows the schema LoadGpu reads (planner/config/config_loader_specs.cc): name,
// aliases, source, memory_MiB, peak_TFLOPs {fp32, tf32, bf16, fp8}, memory_bandwidth_TBps,
// efficiency {matmul, matmul_ceiling, matmul_fp8_ceiling, matmul_fp8_split_accumulate, attention,
// attention_cudnn, attention_flash3, memory_bandwidth} (the optional ones when set), kernel_overhead_us and,
// when given, a network block (the defaults of NxGPU shorthand clusters, taken from a ClusterSpec's
// gpus_per_node and tiers) and that cluster's host: block when it has one (planner/host_spec.h),
// comm_overlap_slowdown when not 0, dp_overlap_slowdown when set, then the runtime_memory section when it is not all zero
// (planner/config/runtime_memory_yaml.h). Every key carries a unit comment. Numbers are rounded to
// `significant_digits` (a calibration is not more precise than that), so LoadGpu of the
// text gives the spec back to that precision, not bit for bit; with 0 each is the shortest
// decimal that reads back to the identical double, and the spec comes back exactly. Pure
// functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/hardware_spec.h"

namespace meshplan {

struct HardwareYamlOptions {
  std::vector<std::string> aliases;
  std::optional<ClusterSpec> network;  // gpus_per_node, intra_node, inter_node (gpu ignored)
  std::string header;                  // comment lines for the top (each gets "# ")
  int significant_digits = 4;          // 0: exact (the shortest text that reads back)
};

std::string GpuSpecToYaml(const GpuSpec& gpu, const HardwareYamlOptions& options);
// One network tier as a flow mapping ({name, bandwidth_GBps, latency_us, bus_efficiency,
// all_reduce}), and a cluster's host: block ("" when the host is unknown), numbers as above.
std::string NetworkTierToYaml(const NetworkTier& tier, int significant_digits);
std::string HostToYaml(const HostSpec& host, int significant_digits);

}  // namespace meshplan
