// GpuSpec -> hardware YAML (see hardware_yaml.h).
#include "planner/config/hardware_yaml.h"

#include <fmt/format.h>

#include <sstream>

#include "planner/config/runtime_memory_yaml.h"
#include "planner/config/yaml_fields.h"

namespace meshplan {
namespace {

// `value` in units of 10^exponent: rounded to `digits` significant digits, or with digits 0
// the shortest text that reads back to the identical double.
std::string Number(double value, int exponent, int digits) {
  if (digits == 0) return FormatShifted(value, exponent);
  return FormatShifted(std::stod(fmt::format("{:.{}g}", value, digits)), exponent);
}

// `line` with `comment` after it, the comments of a file in one column.
std::string Commented(const std::string& line, const std::string& comment) {
  return fmt::format("{:<34} # {}\n", line, comment);
}

}  // namespace

std::string NetworkTierToYaml(const NetworkTier& t, int d) {
  std::string s = "{";
  if (!t.name.empty()) s += "name: " + YamlQuoted(t.name) + ", ";
  s += fmt::format("bandwidth_GBps: {}, latency_us: {}, bus_efficiency: {}",
                   Number(t.bandwidth_Bps, 9, d), Number(t.latency_s, -6, d),
                   Number(t.bus_efficiency, 0, d));
  if (t.has_allreduce())
    s += fmt::format(", all_reduce: {{bandwidth_GBps: {}, latency_us: {}}}",
                     Number(t.allreduce_bandwidth_Bps, 9, d), Number(t.allreduce_latency_s, -6, d));
  return s + "}";
}

std::string HostToYaml(const HostSpec& h, int d) {
  if (!h.known()) return "";
  std::string out = Commented("host:", "offload: host memory, the GPU's host link, CPU AdamW rate");
  out += fmt::format("  memory_GB_per_node: {}\n  link: {}\n  optimizer_GBps: {}\n",
                     Number(static_cast<double>(h.memory_bytes_per_node), 9, d),
                     NetworkTierToYaml(h.link, d), Number(h.optimizer_Bps, 9, d));
  if (!h.source.empty()) out += "  source: " + YamlQuoted(h.source) + "\n";
  return out;
}

std::string GpuSpecToYaml(const GpuSpec& g, const HardwareYamlOptions& options) {
  const int d = options.significant_digits;
  const auto number = [d](double value, int exponent) { return Number(value, exponent, d); };
  std::string out;
  std::istringstream header(options.header);
  for (std::string line; std::getline(header, line);) out += line.empty() ? "#\n" : "# " + line + "\n";
  if (!g.name.empty()) out += "name: " + YamlQuoted(g.name) + "\n";
  if (!options.aliases.empty()) {
    out += "aliases: [";
    for (size_t i = 0; i < options.aliases.size(); ++i)
      out += (i ? ", " : "") + YamlQuoted(options.aliases[i]);
    out += "]\n";
  }
  if (!g.source.empty()) out += "source: " + YamlQuoted(g.source) + "\n";
  const double mib = static_cast<double>(g.memory_bytes) / (1024.0 * 1024.0);
  out += Commented("memory_MiB: " + Number(mib, 0, d == 0 ? 0 : 8), "MiB (2^20 bytes)");
  out += Commented("peak_TFLOPs:", "dense peak, TFLOP/s (1e12 FLOP/s)");
  out += fmt::format("  fp32: {}\n  tf32: {}\n  bf16: {}\n  fp8: {}\n", number(g.peak_flops_fp32, 12),
                     number(g.peak_flops_tf32, 12), number(g.peak_flops_bf16, 12),
                     number(g.peak_flops_fp8, 12));
  out += Commented("memory_bandwidth_TBps: " + number(g.memory_bandwidth_Bps, 12),
                   "TB/s (1e12 bytes/s)");
  out += Commented("efficiency:", "fractions of peak that real kernels reach");
  const auto fraction = [&](const char* key, double value) {
    out += fmt::format("  {}: {}\n", key, number(value, 0));
  };
  fraction("matmul", g.matmul_efficiency);
  if (g.matmul_ceiling_efficiency > 0) fraction("matmul_ceiling", g.matmul_ceiling_efficiency);
  if (g.matmul_fp8_ceiling_efficiency >= 0)
    fraction("matmul_fp8_ceiling", g.matmul_fp8_ceiling_efficiency);
  if (g.matmul_fp8_split_accumulate_efficiency != 1)
    fraction("matmul_fp8_split_accumulate", g.matmul_fp8_split_accumulate_efficiency);
  fraction("attention", g.attention_efficiency);
  if (g.attention_cudnn_efficiency > 0) fraction("attention_cudnn", g.attention_cudnn_efficiency);
  if (g.attention_flash3_efficiency > 0) fraction("attention_flash3", g.attention_flash3_efficiency);
  fraction("memory_bandwidth", g.memory_bandwidth_efficiency);
  out += Commented("kernel_overhead_us: " + number(g.kernel_overhead_s, -6),
                   "microseconds per launched op");
  const KernelShape& k = g.kernel_shape;
  out += Commented("kernel_shape:", "how efficiency depends on shape (planner/cost/compute_work.h)");
  out += fmt::format("  sm_count: {}\n  gemm_tile_m: {}\n  gemm_tile_n: {}\n  gemm_k_overhead: {}\n",
                     k.sm_count, k.gemm_tile_m, k.gemm_tile_n, number(k.gemm_k_overhead, 0));
  if (k.gemm_k_overhead_fp8 >= 0)
    out += fmt::format("  gemm_k_overhead_fp8: {}\n", number(k.gemm_k_overhead_fp8, 0));
  out += fmt::format("  attention_tile_q: {}\n  gemm_streams_operands: {}\n", k.attention_tile_q,
                     k.gemm_streams_operands);
  if (options.network) {
    const ClusterSpec& n = *options.network;
    out += Commented("network:", "bandwidth_GBps per GPU per direction, latency_us per ring step");
    out += fmt::format("  gpus_per_node: {}\n  intra_node: {}\n  inter_node: {}\n", n.gpus_per_node,
                       NetworkTierToYaml(n.intra_node, d), NetworkTierToYaml(n.inter_node, d));
    out += HostToYaml(n.host, d);  // planner/host_spec.h
  }
  if (g.comm_overlap_slowdown > 0)
    out += Commented("comm_overlap_slowdown: " + number(g.comm_overlap_slowdown, 0),
                     "compute lost beside overlapped TP communication");
  if (g.dp_overlap_slowdown >= 0)
    out += Commented("dp_overlap_slowdown: " + number(g.dp_overlap_slowdown, 0),
                     "compute lost beside overlapped DP / ZeRO communication");
  if (!g.comm_overlaps_compute)
    out += Commented("comm_overlaps_compute: false",
                     "communication runs on the cores that compute: none of it hides");
  if (g.threads_per_rank > 0)
    out += Commented(fmt::format("threads_per_rank: {}", g.threads_per_rank),
                     "intra-op threads of one rank, as measured; meshplan run gives each rank as many");
  out += RuntimeMemoryToYaml(g.runtime_memory);
  return out;
}

}  // namespace meshplan
