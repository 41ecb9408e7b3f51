// The YAML schemas of configs/models, configs/hardware and configs/clusters -> specs.
// Every field is read through YamlFields (type, range, location); units are converted here.
#include <fmt/format.h>

#include <algorithm>

#include "planner/config/config_loader_internal.h"
#include "planner/config/runtime_memory_yaml.h"
#include "planner/limits.h"
#include "planner/names.h"

namespace meshplan::config_internal {
namespace {

// Widths and counts beyond these are typos (planner/limits.h, docs/limits.md).
constexpr IntRange kWidth{1, kMaxModelWidth};
constexpr IntRange kCount{1, kMaxModelCount};
// Rates and fractions from their physical lower bounds (planner/limits.h), in the YAML's units.
constexpr NumberRange kBandwidthGBps{kMinBandwidthBps / 1e9, true, 1e6};
constexpr NumberRange kBandwidthTBps{kMinBandwidthBps / 1e12, true, 1e4};
constexpr NumberRange kPeakTFLOPs{kMinFlops / 1e12, true, 1e6};
constexpr NumberRange kEfficiency{kMinEfficiency, true, 1};
constexpr IntRange kThreads{1, kMaxIntraOpThreads};

}  // namespace

namespace {

std::optional<ShapeProblem> CheckMoeShape(const ModelSpec& m) {
  const MoeSpec& moe = m.moe;
  if (moe.top_k < 1 || moe.top_k > moe.experts)
    return ShapeProblem{"moe.top_k", fmt::format("top_k={} with experts={}; expected 1 <= top_k <= "
                                                 "experts (experts per token, of the routed "
                                                 "experts)", moe.top_k, moe.experts)};
  if (moe.expert_ffn_hidden < 1)
    return ShapeProblem{"moe.expert_ffn_hidden", "missing; expected a positive integer (the width "
                                                 "of each expert's FFN)"};
  if (moe.dense_layers < 0 || moe.dense_layers >= m.layers)
    return ShapeProblem{"moe.dense_layers",
                        fmt::format("dense_layers={} with layers={}; expected 0 <= dense_layers "
                                    "< layers (the first layers with a dense FFN)",
                                    moe.dense_layers, m.layers)};
  if (moe.shared_experts < 0)
    return ShapeProblem{"moe.shared_experts", "expected a non-negative integer"};
  if (moe.capacity_factor < 0)
    return ShapeProblem{"moe.capacity_factor", "expected 0 (dropless) or a positive number"};
  return std::nullopt;
}

// Every width and count within the shared limits, whichever file or row it came from
// (the YAML reads check them as they read; config.json and validate rows rely on this).
std::optional<ShapeProblem> CheckModelSizes(const ModelSpec& m) {
  struct Size {
    const char* field;
    int64_t value, min, max;
  };
  const Size sizes[] = {
      {"vocab_size", m.vocab_size, 1, kMaxModelWidth},
      {"hidden", m.hidden, 1, kMaxModelWidth},
      {"ffn_hidden", m.ffn_hidden, 1, kMaxModelWidth},
      {"layers", m.layers, 1, kMaxModelCount},
      {"heads", m.heads, 1, kMaxModelCount},
      {"kv_heads", m.kv_heads, 1, kMaxModelCount},
      {"max_seq", m.max_seq, 0, kMaxModelWidth},
      {"head_dim", m.attention_head_dim, 0, kMaxModelWidth},
      {"moe.experts", m.moe.experts, 0, kMaxModelCount},
      {"moe.shared_experts", m.moe.shared_experts, 0, kMaxModelCount},
      {"moe.expert_ffn_hidden", m.moe.expert_ffn_hidden, 0, kMaxModelWidth},
      {"mla.q_lora_rank", m.mla.q_lora_rank, 0, kMaxModelWidth},
      {"mla.kv_lora_rank", m.mla.kv_lora_rank, 0, kMaxModelWidth},
      {"mla.rope_head_dim", m.mla.rope_head_dim, 0, kMaxModelWidth},
      {"mla.v_head_dim", m.mla.v_head_dim, 0, kMaxModelWidth},
  };
  for (const Size& s : sizes)
    if (s.value < s.min || s.value > s.max)
      return ShapeProblem{s.field, fmt::format("value {} is out of range; expected an integer "
                                               "from {} to {:.0e} (docs/limits.md)",
                                               s.value, s.min, static_cast<double>(s.max))};
  return std::nullopt;
}

std::optional<ShapeProblem> CheckMlaShape(const ModelSpec& m) {
  const MlaSpec& mla = m.mla;
  if (mla.rope_head_dim < 1 || mla.rope_head_dim >= m.head_dim())
    return ShapeProblem{"mla.rope_head_dim",
                        fmt::format("rope_head_dim={} with head_dim={}; expected 1 <= "
                                    "rope_head_dim < head_dim", mla.rope_head_dim,
                                    m.head_dim())};
  if (mla.v_head_dim < 1)
    return ShapeProblem{"mla.v_head_dim", "expected a positive integer (the value head width)"};
  if (m.kv_heads != m.heads)
    return ShapeProblem{"kv_heads", fmt::format("kv_heads={} with heads={}; multi-head latent "
                                                "attention expands k and v for every head: "
                                                "expected kv_heads == heads", m.kv_heads, m.heads)};
  return std::nullopt;
}

}  // namespace

std::optional<ShapeProblem> CheckModelShape(const ModelSpec& m) {
  if (auto problem = CheckModelSizes(m)) return problem;
  if (m.attention_head_dim == 0 && m.hidden % m.heads != 0)
    return ShapeProblem{"hidden", fmt::format("hidden={} is not divisible by heads={}; expected a "
                                              "multiple of heads (head dim = hidden / heads), or "
                                              "set head_dim", m.hidden, m.heads)};
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    return ShapeProblem{"kv_heads", fmt::format("heads={} is not divisible by kv_heads={}; expected "
                                                "kv_heads to divide heads (grouped-query attention)",
                                                m.heads, m.kv_heads)};
  if (m.block == BlockKind::kGpt && m.max_seq == 0)
    return ShapeProblem{"max_seq", "a gpt block has learned position embeddings; expected "
                                   "max_seq > 0 (the number of positions)"};
  if (m.block == BlockKind::kGpt) {
    const char* extra = m.moe.enabled() ? "moe" : m.mla.enabled() ? "mla"
                        : m.qk_norm     ? "qk_norm" : m.attention_head_dim ? "head_dim"
                        : !m.gated_ffn() ? "ffn_activation" : nullptr;
    if (extra)
      return ShapeProblem{extra, std::string("a gpt block has no ") + extra +
                                     "; expected block: llama (or leave the field out)"};
  }
  if (m.moe.enabled() && !m.gated_ffn())
    return ShapeProblem{"ffn_activation", std::string("a mixture of experts' FFNs are SwiGLU; "
                                          "expected ffn_activation: swiglu with moe, got ") +
                                          ToString(m.ffn_activation)};
  if (m.moe.enabled())
    if (auto problem = CheckMoeShape(m)) return problem;
  if (m.mla.enabled())
    if (auto problem = CheckMlaShape(m)) return problem;
  // Rough count in double (cannot overflow): embeddings + blocks (+ experts).
  const double E = static_cast<double>(m.hidden), F = static_cast<double>(m.ffn_hidden);
  const double QD = static_cast<double>(m.heads) * static_cast<double>(m.head_dim());
  const double positions = m.block == BlockKind::kGpt ? static_cast<double>(m.max_seq) : 0.0;
  const double experts = static_cast<double>(m.moe.experts + m.moe.shared_experts) * 3.0 * E *
                         static_cast<double>(m.moe.expert_ffn_hidden);
  const double H = static_cast<double>(m.heads), Dv = static_cast<double>(m.v_head_dim());
  const double mla = static_cast<double>(m.mla.q_lora_rank) * (E + QD) +
                     static_cast<double>(m.mla.kv_lora_rank) * (E + QD + H * Dv) + H * Dv * E;
  const double params = 2.0 * static_cast<double>(m.vocab_size) * E + positions * E +
                        static_cast<double>(m.layers) *
                            (4.0 * E * std::max(E, QD) + 3.0 * E * F + experts + mla);
  if (params > kMaxModelParams)
    return ShapeProblem{"hidden", fmt::format("the model would have about {:.3g} parameters; "
                                              "expected at most 1e15 (a typo in a size?)",
                                              params)};
  return std::nullopt;
}

namespace {

MoeSpec MoeFromYaml(const YamlFields& f) {
  f.AllowOnly({"experts", "top_k", "shared_experts", "expert_ffn_hidden", "dense_layers",
               "router_bias", "capacity_factor", "load_imbalance"});
  MoeSpec moe;
  moe.experts = f.Int("experts", kCount);
  moe.top_k = f.Int("top_k", kCount);
  moe.shared_experts = f.Int("shared_experts", {0, 1'000'000}, 0);
  moe.expert_ffn_hidden = f.Int("expert_ffn_hidden", kWidth);
  moe.dense_layers = f.Int("dense_layers", {0, 1'000'000}, 0);
  moe.router_bias = f.Bool("router_bias", false);
  moe.capacity_factor = f.Number("capacity_factor", {0, true, 1e3}, 0);
  moe.load_imbalance = f.Number("load_imbalance", {1, true, 1e3}, kDefaultLoadImbalance);
  return moe;
}

MlaSpec MlaFromYaml(const YamlFields& f) {
  f.AllowOnly({"q_lora_rank", "kv_lora_rank", "rope_head_dim", "v_head_dim"});
  MlaSpec mla;
  mla.q_lora_rank = f.Int("q_lora_rank", {0, 100'000'000}, 0);
  mla.kv_lora_rank = f.Int("kv_lora_rank", kWidth);
  mla.rope_head_dim = f.Int("rope_head_dim", kWidth);
  mla.v_head_dim = f.Int("v_head_dim", kWidth);
  return mla;
}

}  // namespace

ModelSpec ModelFromYaml(const YamlFields& f, const std::string& default_name) {
  f.AllowOnly({"name", "block", "vocab_size", "hidden", "layers", "heads", "kv_heads", "ffn_hidden",
               "tied_embeddings", "max_seq", "head_dim", "qk_norm", "ffn_activation", "moe", "mla"});
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
  m.attention_head_dim = ExplicitHeadDim(f.Int("head_dim", {0, 100'000}, 0), m.hidden, m.heads);
  m.qk_norm = f.Bool("qk_norm", false);
  const std::string activation = f.String("ffn_activation", "swiglu");
  if (!ParseFfnActivation(activation, &m.ffn_activation))
    f.Fail("ffn_activation", "expected one of: " + std::string(AllowedFfnActivations()) +
                                 "; got '" + activation + "'");
  if (f.Has("moe")) m.moe = MoeFromYaml(f.Map("moe"));
  if (f.Has("mla")) m.mla = MlaFromYaml(f.Map("mla"));
  if (auto problem = CheckModelShape(m)) {
    const std::string& field = problem->field;
    const size_t dot = field.find('.');
    if (dot != std::string::npos && f.Has(field.substr(0, dot)))  // moe.top_k: at the key in moe
      f.Map(field.substr(0, dot)).Fail(field.substr(dot + 1), problem->message);
    f.Fail(field, problem->message);
  }
  return m;
}

NetworkTier TierFromYaml(const YamlFields& f) {
  f.AllowOnly({"name", "bandwidth_GBps", "latency_us", "bus_efficiency", "all_reduce"});
  NetworkTier tier;
  tier.name = f.String("name", "");
  tier.bandwidth_Bps = f.ScaledNumber("bandwidth_GBps", kBandwidthGBps, kGiga);
  tier.latency_s = f.ScaledNumber("latency_us", {0, true, 1e7}, kMicro);
  tier.bus_efficiency = f.Number("bus_efficiency", kEfficiency, tier.bus_efficiency);
  if (f.Has("all_reduce")) {  // an all-reduce of the backend's own (NetworkTier)
    const YamlFields ar = f.Map("all_reduce");
    ar.AllowOnly({"bandwidth_GBps", "latency_us"});
    tier.allreduce_bandwidth_Bps = ar.ScaledNumber("bandwidth_GBps", kBandwidthGBps, kGiga);
    tier.allreduce_latency_s = ar.ScaledNumber("latency_us", {0, true, 1e7}, kMicro);
  }
  return tier;
}

HostSpec HostFromYaml(const YamlFields& f, const HostSpec& defaults) {
  f.AllowOnly({"memory_GB_per_node", "link", "optimizer_GBps", "source"});
  HostSpec h = defaults;
  h.memory_bytes_per_node = static_cast<int64_t>(
      f.ScaledNumber("memory_GB_per_node", {kMinMemoryBytes / 1e9, true, 1e9}, kGiga,
                     static_cast<double>(defaults.memory_bytes_per_node)));
  if (f.Has("link")) {
    const YamlFields link = f.Map("link");
    link.AllowOnly({"name", "bandwidth_GBps", "latency_us", "bus_efficiency"});
    h.link.name = link.String("name", defaults.link.name);
    h.link.bandwidth_Bps =
        link.ScaledNumber("bandwidth_GBps", kBandwidthGBps, kGiga, defaults.link.bandwidth_Bps);
    h.link.latency_s = link.ScaledNumber("latency_us", {0, true, 1e7}, kMicro, defaults.link.latency_s);
    h.link.bus_efficiency = link.Number("bus_efficiency", kEfficiency, defaults.link.bus_efficiency);
  }
  h.optimizer_Bps = f.ScaledNumber("optimizer_GBps", kBandwidthGBps, kGiga, defaults.optimizer_Bps);
  h.source = f.String("source", defaults.source);
  return h;
}

KernelShape KernelShapeFromYaml(const YamlFields& f) {
  f.AllowOnly({"sm_count", "gemm_tile_m", "gemm_tile_n", "gemm_k_overhead", "gemm_k_overhead_fp8",
               "attention_tile_q", "gemm_streams_operands"});
  KernelShape k;
  constexpr IntRange kTile{1, 4096};
  k.sm_count = f.Int("sm_count", {0, 100'000}, k.sm_count);
  k.gemm_tile_m = f.Int("gemm_tile_m", kTile, k.gemm_tile_m);
  k.gemm_tile_n = f.Int("gemm_tile_n", kTile, k.gemm_tile_n);
  k.gemm_k_overhead = f.Number("gemm_k_overhead", {0, true, 1e6}, k.gemm_k_overhead);
  k.gemm_k_overhead_fp8 = f.Number("gemm_k_overhead_fp8", {0, true, 1e6}, k.gemm_k_overhead_fp8);
  k.attention_tile_q = f.Int("attention_tile_q", kTile, k.attention_tile_q);
  k.gemm_streams_operands = f.Bool("gemm_streams_operands", k.gemm_streams_operands);
  return k;
}

// A peak a GPU may lack (tf32, fp8): 0 = none, else at least kMinFlops.
double OptionalPeak(const YamlFields& peak, const std::string& key) {
  if (peak.Has(key) && peak.Number(key, {0, true, 1e6}) == 0) return 0;
  return peak.ScaledNumber(key, kPeakTFLOPs, kTera, 0);
}

GpuConfig GpuFromYaml(const YamlFields& f, const std::string& default_name) {
  f.AllowOnly({"name", "aliases", "source", "memory_MiB", "peak_TFLOPs", "memory_bandwidth_TBps",
               "efficiency", "kernel_overhead_us", "kernel_shape", "network", "runtime_memory",
               "comm_overlap_slowdown", "dp_overlap_slowdown", "comm_overlaps_compute",
               "threads_per_rank", "host"});
  GpuConfig out;
  GpuSpec& g = out.gpu;
  g.name = f.String("name", default_name);
  out.aliases = f.StringList("aliases");
  g.source = f.String("source", "");
  g.memory_bytes = MiBToBytes(f.Number("memory_MiB", {kMinMemoryBytes / (1024 * 1024), true, 1e12}));

  const YamlFields peak = f.Map("peak_TFLOPs");
  peak.AllowOnly({"fp32", "tf32", "bf16", "fp8"});
  g.peak_flops_fp32 = peak.ScaledNumber("fp32", kPeakTFLOPs, kTera);
  g.peak_flops_tf32 = OptionalPeak(peak, "tf32");
  g.peak_flops_bf16 = peak.ScaledNumber("bf16", kPeakTFLOPs, kTera);
  g.peak_flops_fp8 = OptionalPeak(peak, "fp8");
  g.memory_bandwidth_Bps = f.ScaledNumber("memory_bandwidth_TBps", kBandwidthTBps, kTera);

  if (f.Has("efficiency")) {
    const YamlFields eff = f.Map("efficiency");
    eff.AllowOnly({"matmul", "matmul_ceiling", "matmul_fp8_ceiling", "matmul_fp8_split_accumulate",
                   "attention", "attention_cudnn", "attention_flash3", "memory_bandwidth"});
    g.matmul_efficiency = eff.Number("matmul", kEfficiency, g.matmul_efficiency);
    g.matmul_ceiling_efficiency = eff.Number("matmul_ceiling", kEfficiency, 0);
    g.matmul_fp8_ceiling_efficiency =
        eff.Number("matmul_fp8_ceiling", kEfficiency, g.matmul_fp8_ceiling_efficiency);
    g.matmul_fp8_split_accumulate_efficiency = eff.Number(
        "matmul_fp8_split_accumulate", kEfficiency, g.matmul_fp8_split_accumulate_efficiency);
    g.attention_efficiency = eff.Number("attention", kEfficiency, g.attention_efficiency);
    g.attention_cudnn_efficiency = eff.Number("attention_cudnn", kEfficiency, 0);
    g.attention_flash3_efficiency = eff.Number("attention_flash3", kEfficiency, 0);
    g.memory_bandwidth_efficiency =
        eff.Number("memory_bandwidth", kEfficiency, g.memory_bandwidth_efficiency);
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
  g.comm_overlap_slowdown = f.Number("comm_overlap_slowdown", {0, true, 0.99}, 0);
  if (f.Has("dp_overlap_slowdown"))
    g.dp_overlap_slowdown = f.Number("dp_overlap_slowdown", {0, true, 0.99}, 0);
  g.comm_overlaps_compute = f.Bool("comm_overlaps_compute", g.comm_overlaps_compute);
  g.threads_per_rank = static_cast<int>(f.Int("threads_per_rank", kThreads, 0));
  if (f.Has("host")) out.host = HostFromYaml(f.Map("host"), {});
  return out;
}

ClusterSpec ClusterFromYaml(const YamlFields& f, const std::string& default_name,
                            const std::filesystem::path& base_dir) {
  f.AllowOnly({"name", "gpu", "nodes", "gpus_per_node", "intra_node", "inter_node", "host"});
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
  c.host = f.Has("host") ? HostFromYaml(f.Map("host"), gpu.host) : gpu.host;
  return c;
}

}  // namespace meshplan::config_internal
