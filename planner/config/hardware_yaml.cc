// GpuSpec -> hardware YAML (see hardware_yaml.h).
#include "planner/config/hardware_yaml.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "planner/config/runtime_memory_yaml.h"
#include "planner/config/yaml_fields.h"

namespace meshplan {
namespace {

// `value` rounded to `digits` significant digits, as text in units of 10^exponent.
std::string Rounded(double value, int exponent, int digits) {
  const double rounded = std::stod(fmt::format("{:.{}g}", value, digits));
  return FormatShifted(rounded, exponent);
}

// A YAML double-quoted scalar (JSON string syntax is a subset of YAML's).
std::string Quote(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Tier(const NetworkTier& t, int digits) {
  std::string all_reduce;
  if (t.has_allreduce())
    all_reduce = fmt::format(", all_reduce: {{bandwidth_GBps: {}, latency_us: {}}}",
                             Rounded(t.allreduce_bandwidth_Bps, 9, digits),
                             Rounded(t.allreduce_latency_s, -6, digits));
  return fmt::format("{{name: {}, bandwidth_GBps: {}, latency_us: {}, bus_efficiency: {}{}}}",
                     Quote(t.name), Rounded(t.bandwidth_Bps, 9, digits),
                     Rounded(t.latency_s, -6, digits), Rounded(t.bus_efficiency, 0, digits),
                     all_reduce);
}

}  // namespace

std::string GpuSpecToYaml(const GpuSpec& g, const HardwareYamlOptions& options) {
  const int d = options.significant_digits;
  std::string out;
  std::istringstream header(options.header);
  for (std::string line; std::getline(header, line);) out += line.empty() ? "#\n" : "# " + line + "\n";
  out += "name: " + Quote(g.name) + "\n";
  if (!options.aliases.empty()) {
    out += "aliases: [";
    for (size_t i = 0; i < options.aliases.size(); ++i)
      out += (i ? ", " : "") + Quote(options.aliases[i]);
    out += "]\n";
  }
  if (!g.source.empty()) out += "source: " + Quote(g.source) + "\n";
  out += fmt::format("memory_MiB: {:<22} # MiB (2^20 bytes)\n",
                     Rounded(static_cast<double>(g.memory_bytes) / (1024.0 * 1024.0), 0, 8));
  out += "peak_TFLOPs:                  # dense peak, TFLOP/s (1e12 FLOP/s)\n";
  out += fmt::format("  fp32: {}\n  tf32: {}\n  bf16: {}\n  fp8: {}\n",
                     Rounded(g.peak_flops_fp32, 12, d), Rounded(g.peak_flops_tf32, 12, d),
                     Rounded(g.peak_flops_bf16, 12, d), Rounded(g.peak_flops_fp8, 12, d));
  out += fmt::format("memory_bandwidth_TBps: {:<14} # TB/s (1e12 bytes/s)\n",
                     Rounded(g.memory_bandwidth_Bps, 12, d));
  out += "efficiency:                   # fractions of peak that real kernels reach\n";
  out += fmt::format("  matmul: {}\n", Rounded(g.matmul_efficiency, 0, d));
  if (g.matmul_ceiling_efficiency > 0)
    out += fmt::format("  matmul_ceiling: {}\n", Rounded(g.matmul_ceiling_efficiency, 0, d));
  if (g.matmul_fp8_ceiling_efficiency >= 0)
    out += fmt::format("  matmul_fp8_ceiling: {}\n", Rounded(g.matmul_fp8_ceiling_efficiency, 0, d));
  out += fmt::format("  attention: {}\n", Rounded(g.attention_efficiency, 0, d));
  if (g.attention_cudnn_efficiency > 0)
    out += fmt::format("  attention_cudnn: {}\n", Rounded(g.attention_cudnn_efficiency, 0, d));
  if (g.attention_flash3_efficiency > 0)
    out += fmt::format("  attention_flash3: {}\n", Rounded(g.attention_flash3_efficiency, 0, d));
  out += fmt::format("  memory_bandwidth: {}\n", Rounded(g.memory_bandwidth_efficiency, 0, d));
  out += fmt::format("kernel_overhead_us: {:<17} # microseconds per launched op\n",
                     Rounded(g.kernel_overhead_s, -6, d));
  const KernelShape& k = g.kernel_shape;
  out += "kernel_shape:                 # how efficiency depends on shape (planner/cost/compute_work.h)\n";
  out += fmt::format("  sm_count: {}\n  gemm_tile_m: {}\n  gemm_tile_n: {}\n  gemm_k_overhead: {}\n"
                     "  attention_tile_q: {}\n  gemm_streams_operands: {}\n",
                     k.sm_count, k.gemm_tile_m, k.gemm_tile_n, Rounded(k.gemm_k_overhead, 0, d),
                     k.attention_tile_q, k.gemm_streams_operands);
  if (k.gemm_k_overhead_fp8 >= 0)
    out += fmt::format("  gemm_k_overhead_fp8: {}\n", Rounded(k.gemm_k_overhead_fp8, 0, d));
  if (options.network) {
    const ClusterSpec& n = *options.network;
    out += "network:                      # bandwidth_GBps per GPU per direction, latency_us per ring step\n";
    out += fmt::format("  gpus_per_node: {}\n  intra_node: {}\n  inter_node: {}\n", n.gpus_per_node,
                       Tier(n.intra_node, d), Tier(n.inter_node, d));
    if (n.host.known()) {  // planner/host_spec.h
      out += "host:                         # offload: host memory, the GPU's host link, CPU AdamW rate\n";
      out += fmt::format("  memory_GB_per_node: {}\n  link: {}\n  optimizer_GBps: {}\n",
                         Rounded(static_cast<double>(n.host.memory_bytes_per_node), 9, d),
                         Tier(n.host.link, d), Rounded(n.host.optimizer_Bps, 9, d));
      if (!n.host.source.empty()) out += "  source: " + Quote(n.host.source) + "\n";
    }
  }
  if (g.comm_overlap_slowdown > 0)
    out += fmt::format("comm_overlap_slowdown: {}        # compute lost beside overlapped TP communication\n",
                       Rounded(g.comm_overlap_slowdown, 0, d));
  if (g.dp_overlap_slowdown >= 0)
    out += fmt::format("dp_overlap_slowdown: {}        # compute lost beside overlapped DP / ZeRO communication\n",
                       Rounded(g.dp_overlap_slowdown, 0, d));
  if (!g.comm_overlaps_compute)
    out += "comm_overlaps_compute: false       # communication runs on the cores that compute: none of it hides\n";
  if (g.threads_per_rank > 0)
    out += fmt::format("threads_per_rank: {:<19} # intra-op threads of one rank, as measured; meshplan run gives each rank as many\n",
                       g.threads_per_rank);
  out += RuntimeMemoryToYaml(g.runtime_memory, "");
  return out;
}

}  // namespace meshplan
