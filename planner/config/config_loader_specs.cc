// The YAML schemas of configs/models, configs/hardware and configs/clusters -> specs.
// Every field is read through YamlFields (type, range, location); units are converted here.
#include <fmt/format.h>

#include "planner/config/config_loader_internal.h"
#include "planner/config/runtime_memory_yaml.h"
#include "planner/limits.h"
#include "planner/names.h"

namespace meshplan::config_internal {
namespace {

// Widths and counts beyond these are typos (the largest published models are ~1e5 wide).
constexpr IntRange kWidth{1, 100'000'000};
constexpr IntRange kCount{1, 1'000'000};
// A model with more parameters than this is a typo; it also keeps CountParams in int64.
constexpr double kMaxParams = 1e15;

}  // namespace

std::optional<ShapeProblem> CheckModelShape(const ModelSpec& m) {
  if (m.hidden % m.heads != 0)
    return ShapeProblem{"hidden", fmt::format("hidden={} is not divisible by heads={}; expected a "
                                              "multiple of heads (head dim = hidden / heads)",
                                              m.hidden, m.heads)};
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    return ShapeProblem{"kv_heads", fmt::format("heads={} is not divisible by kv_heads={}; expected "
                                                "kv_heads to divide heads (grouped-query attention)",
                                                m.heads, m.kv_heads)};
  if (m.block == BlockKind::kGpt && m.max_seq == 0)
    return ShapeProblem{"max_seq", "a gpt block has learned position embeddings; expected "
                                   "max_seq > 0 (the number of positions)"};
  // Rough count in double (cannot overflow): embeddings + blocks.
  const double E = static_cast<double>(m.hidden), F = static_cast<double>(m.ffn_hidden);
  const double positions = m.block == BlockKind::kGpt ? static_cast<double>(m.max_seq) : 0.0;
  const double params = 2.0 * static_cast<double>(m.vocab_size) * E + positions * E +
                        static_cast<double>(m.layers) * (4.0 * E * E + 3.0 * E * F);
  if (params > kMaxParams)
    return ShapeProblem{"hidden", fmt::format("the model would have about {:.3g} parameters; "
                                              "expected at most 1e15 (a typo in a size?)",
                                              params)};
  return std::nullopt;
}

ModelSpec ModelFromYaml(const YamlFields& f, const std::string& default_name) {
  f.AllowOnly({"name", "block", "vocab_size", "hidden", "layers", "heads", "kv_heads", "ffn_hidden",
               "tied_embeddings", "max_seq"});
  ModelSpec m;
  m.name = f.String("name", default_name);
  const std::string block = f.String("block");
  if (!ParseBlockKind(block, &m.block))
    f.Fail("block", "expected one of: " + std::string(AllowedBlockKinds()) + "; got '" + block + "'");
  m.vocab_size = f.Int("vocab_size", kWidth);
  m.hidden = f.Int("hidden", kWidth);
  m.layers = f.Int("layers", kCount);
  m.heads = f.Int("heads", kCount);
  m.kv_heads = f.Int("kv_heads", kCount, m.heads);
  m.ffn_hidden = f.Int("ffn_hidden", kWidth);
  m.tied_embeddings = f.Bool("tied_embeddings", false);
  m.max_seq = f.Int("max_seq", {0, 100'000'000}, 0);
  if (auto problem = CheckModelShape(m)) f.Fail(problem->field, problem->message);
  return m;
}

NetworkTier TierFromYaml(const YamlFields& f) {
  f.AllowOnly({"name", "bandwidth_GBps", "latency_us", "bus_efficiency"});
  NetworkTier tier;
  tier.name = f.String("name", "");
  tier.bandwidth_Bps = f.ScaledNumber("bandwidth_GBps", {0, false, 1e6}, kGiga);
  tier.latency_s = f.ScaledNumber("latency_us", {0, true, 1e7}, kMicro);
  tier.bus_efficiency = f.Number("bus_efficiency", {0, false, 1}, tier.bus_efficiency);
  return tier;
}

KernelShape KernelShapeFromYaml(const YamlFields& f) {
  f.AllowOnly({"sm_count", "gemm_tile_m", "gemm_tile_n", "gemm_k_overhead", "attention_tile_q"});
  KernelShape k;
  constexpr IntRange kTile{1, 4096};
  k.sm_count = f.Int("sm_count", {0, 100'000}, k.sm_count);
  k.gemm_tile_m = f.Int("gemm_tile_m", kTile, k.gemm_tile_m);
  k.gemm_tile_n = f.Int("gemm_tile_n", kTile, k.gemm_tile_n);
  k.gemm_k_overhead = f.Number("gemm_k_overhead", {0, true, 1e6}, k.gemm_k_overhead);
  k.attention_tile_q = f.Int("attention_tile_q", kTile, k.attention_tile_q);
  return k;
}

GpuConfig GpuFromYaml(const YamlFields& f, const std::string& default_name) {
  f.AllowOnly({"name", "aliases", "source", "memory_MiB", "peak_TFLOPs", "memory_bandwidth_TBps",
               "efficiency", "kernel_overhead_us", "kernel_shape", "network",
               "runtime_memory"});
  GpuConfig out;
  GpuSpec& g = out.gpu;
  g.name = f.String("name", default_name);
  out.aliases = f.StringList("aliases");
  g.source = f.String("source", "");
  g.memory_bytes = MiBToBytes(f.Number("memory_MiB", {0, false, 1e12}));
  if (g.memory_bytes < 1) f.Fail("memory_MiB", "expected at least one byte of memory");

  const YamlFields peak = f.Map("peak_TFLOPs");
  peak.AllowOnly({"fp32", "tf32", "bf16", "fp8"});
  constexpr NumberRange kPositive{0, false, 1e6}, kZeroIsNone{0, true, 1e6};
  g.peak_flops_fp32 = peak.ScaledNumber("fp32", kPositive, kTera);
  g.peak_flops_tf32 = peak.ScaledNumber("tf32", kZeroIsNone, kTera, 0);
  g.peak_flops_bf16 = peak.ScaledNumber("bf16", kPositive, kTera);
  g.peak_flops_fp8 = peak.ScaledNumber("fp8", kZeroIsNone, kTera, 0);
  g.memory_bandwidth_Bps = f.ScaledNumber("memory_bandwidth_TBps", {0, false, 1e4}, kTera);

  if (f.Has("efficiency")) {
    const YamlFields eff = f.Map("efficiency");
    eff.AllowOnly({"matmul", "attention", "memory_bandwidth"});
    constexpr NumberRange kFraction{0, false, 1};
    g.matmul_efficiency = eff.Number("matmul", kFraction, g.matmul_efficiency);
    g.attention_efficiency = eff.Number("attention", kFraction, g.attention_efficiency);
    g.memory_bandwidth_efficiency =
        eff.Number("memory_bandwidth", kFraction, g.memory_bandwidth_efficiency);
  }
  g.kernel_overhead_s = f.ScaledNumber("kernel_overhead_us", {0, true, 1e6}, kMicro, 0);
  if (f.Has("kernel_shape")) g.kernel_shape = KernelShapeFromYaml(f.Map("kernel_shape"));

  if (f.Has("network")) {
    const YamlFields net = f.Map("network");
    net.AllowOnly({"gpus_per_node", "intra_node", "inter_node"});
    GpuNetwork n;
    n.gpus_per_node = net.Int("gpus_per_node", kCount);
    n.intra_node = TierFromYaml(net.Map("intra_node"));
    n.inter_node = TierFromYaml(net.Map("inter_node"));
    out.network = n;
  }
  if (f.Has("runtime_memory")) g.runtime_memory = RuntimeMemoryFromYaml(f.Map("runtime_memory"));
  return out;
}

ClusterSpec ClusterFromYaml(const YamlFields& f, const std::string& default_name,
                            const std::filesystem::path& base_dir) {
  f.AllowOnly({"name", "gpu", "nodes", "gpus_per_node", "intra_node", "inter_node"});
  ClusterSpec c;
  c.name = f.String("name", default_name);

  GpuConfig gpu;
  const YAML::Node gpu_node = f.Get("gpu");
  if (gpu_node.IsDefined() && gpu_node.IsMap()) {
    gpu = GpuFromYaml(f.Map("gpu"), "");
  } else {
    const std::string gpu_name = f.String("gpu");  // missing / wrong type reported here
    gpu = LoadGpuAt(gpu_name, base_dir, f.Where("gpu"), f.Field("gpu"));
  }
  c.gpu = gpu.gpu;

  const std::string no_default =
      " (the GPU '" + gpu.gpu.name + "' has no network block to take a default from)";
  c.nodes = f.Int("nodes", {1, 10'000'000});
  if (gpu.network) {
    c.gpus_per_node = f.Int("gpus_per_node", kCount, gpu.network->gpus_per_node);
  } else if (!f.Has("gpus_per_node")) {
    f.Fail("gpus_per_node", "missing required field; expected a positive integer" + no_default);
  } else {
    c.gpus_per_node = f.Int("gpus_per_node", kCount);
  }
  // nodes <= 1e7 and gpus_per_node <= 1e6: the product fits int64.
  if (c.world_size() > kMaxGpus)
    f.Fail(f.Has("gpus_per_node") ? "gpus_per_node" : "nodes",
           fmt::format("nodes x gpus_per_node = {} x {} = {} GPUs; expected at most {} (kMaxGpus, "
                       "docs/limits.md)",
                       c.nodes, c.gpus_per_node, c.world_size(), kMaxGpus));

  const auto tier = [&](const std::string& key, const NetworkTier GpuNetwork::*member) {
    if (f.Has(key)) return TierFromYaml(f.Map(key));
    if (gpu.network) return (*gpu.network).*member;
    f.Fail(key, "missing required field; expected a mapping {name, bandwidth_GBps, latency_us}" +
                    no_default);
  };
  c.intra_node = tier("intra_node", &GpuNetwork::intra_node);
  c.inter_node = tier("inter_node", &GpuNetwork::inter_node);
  return c;
}

}  // namespace meshplan::config_internal
