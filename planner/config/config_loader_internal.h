// Private to the config loaders (config_loader.cc, config_loader_hf.cc,
// config_loader_plan.cc): name resolution, the YAML -> spec readers for each
// schema, the model shape checks shared with the Hugging Face reader, and the
// unit conversions. Not for use outside planner/config_loader*.cc.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/config/yaml_fields.h"
#include "planner/hardware_spec.h"
#include "planner/input_error.h"
#include "planner/model_spec.h"

namespace meshplan::config_internal {

// ---- Units: the YAML keys carry the unit; specs are SI. ----
// Decimal units convert by shifting the exponent of the YAML text (YamlFields::ScaledNumber,
// FormatShifted), so that writing and reading a spec gives back the identical double.
inline constexpr int kTera = 12;   // TFLOPs -> FLOP/s, TBps -> bytes/s
inline constexpr int kGiga = 9;    // GBps -> bytes/s
inline constexpr int kMicro = -6;  // us -> s
// MiB are binary: bytes = MiB * 2^20, exact in both directions for any byte count < 2^53.
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;
inline int64_t MiBToBytes(double mib) { return static_cast<int64_t>(std::llround(mib * kBytesPerMiB)); }

// ---- Names and paths ----
// The configs/ subfolders.
enum class ConfigKind { kModel, kGpu, kCluster, kFramework };
const char* FolderOf(ConfigKind kind);  // "models", "hardware", "clusters", "frameworks"
const char* NounOf(ConfigKind kind);    // "model", "GPU", "cluster", "framework"

// A path (contains '/' or ends in .yaml/.yml/.json) rather than a name.
bool LooksLikePath(const std::string& text);
// `text` if absolute or not a path; else relative to `base_dir` (when base_dir is not empty).
std::filesystem::path ResolveRelative(const std::string& text, const std::filesystem::path& base_dir);
// configs/<folder>/<name>.yaml|.yml, matching the stem case-insensitively; nullopt if absent.
std::optional<std::filesystem::path> FindConfig(ConfigKind kind, const std::string& name);
// Sorted file stems in configs/<folder>/.
std::vector<std::string> ListConfigs(ConfigKind kind);
// "unknown model 'x'; available: a, b, ..." at `where` (the referencing file, or none).
[[noreturn]] void ThrowUnknownName(ConfigKind kind, const std::string& name,
                                   const InputLocation& where, const std::string& field,
                                   const std::string& extra_hint = "");

// ---- Models ----
// A model schema mapping; `default_name` when the mapping has no name key.
ModelSpec ModelFromYaml(const YamlFields& fields, const std::string& default_name);
// First rule the shape breaks, as (our field name, message); shared with the HF reader.
struct ShapeProblem {
  std::string field;
  std::string message;
};
std::optional<ShapeProblem> CheckModelShape(const ModelSpec& model);
// ModelSpec::attention_head_dim for a head_dim read from a file: 0 when it equals
// hidden / heads (so that equal models compare equal however they were written).
inline int64_t ExplicitHeadDim(int64_t head_dim, int64_t hidden, int64_t heads) {
  return heads > 0 && hidden % heads == 0 && head_dim == hidden / heads ? 0 : head_dim;
}
// A model name, YAML path, HF config.json (or a folder holding one); `where` and
// `field` locate the reference for unknown-name errors.
ModelSpec LoadModelAt(const std::string& name_or_path, const std::filesystem::path& base_dir,
                      const InputLocation& where, const std::string& field);

// ---- Hardware ----
// The `network` block of a hardware file: the defaults for NxGPU shorthand clusters.
struct GpuNetwork {
  int64_t gpus_per_node = 0;
  NetworkTier intra_node;
  NetworkTier inter_node;
};
struct GpuConfig {
  GpuSpec gpu;
  std::vector<std::string> aliases;
  std::optional<GpuNetwork> network;
  HostSpec host;  // the `host:` block: the default of clusters of this GPU (unknown if absent)
};
// The `host:` block of a hardware or cluster file over `defaults` (a cluster's over its
// GPU's): memory_GB_per_node, link {name, bandwidth_GBps, latency_us, bus_efficiency},
// optimizer_GBps, source; each key optional, absent keys keep the default's value.
HostSpec HostFromYaml(const YamlFields& fields, const HostSpec& defaults);
GpuConfig GpuFromYaml(const YamlFields& fields, const std::string& default_name);
NetworkTier TierFromYaml(const YamlFields& fields);
// A hardware name or alias (case-insensitive) or YAML path; nullopt for an unknown name.
std::optional<GpuConfig> FindGpu(const std::string& name_or_path, const std::filesystem::path& base_dir);
GpuConfig LoadGpuAt(const std::string& name_or_path, const std::filesystem::path& base_dir,
                    const InputLocation& where, const std::string& field);

// ---- Clusters ----
ClusterSpec ClusterFromYaml(const YamlFields& fields, const std::string& default_name,
                            const std::filesystem::path& base_dir);
ClusterSpec LoadClusterAt(const std::string& text, const std::filesystem::path& base_dir,
                          const InputLocation& where, const std::string& field);

}  // namespace meshplan::config_internal
