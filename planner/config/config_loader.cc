// Name resolution in configs/, the NxGPU shorthand, and the public loaders of
// planner/config/config_loader.h (the schemas themselves are in config_loader_specs.cc).
#include "planner/config/config_loader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "planner/config/config_loader_internal.h"
#include "planner/input_file.h"
#include "planner/limits.h"
#include "planner/names.h"

namespace meshplan {
namespace config_internal {
namespace {

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         Lower(text.substr(text.size() - suffix.size())) == suffix;
}

bool IsYamlFile(const std::filesystem::directory_entry& entry) {
  const std::string ext = Lower(entry.path().extension().string());
  return entry.is_regular_file() && (ext == ".yaml" || ext == ".yml");
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

YamlFields RootOf(const YAML::Node& root, const std::filesystem::path& path) {
  return YamlFields(root, path.string(), "");
}

ModelSpec LoadModelFile(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return LoadHfConfig((path / "config.json").string());
  if (EndsWith(path.string(), ".json")) return LoadHfConfig(path.string());
  return ModelFromYamlText(ReadInputFile(path.string()), path.string());
}

GpuConfig GpuConfigFromText(const std::string& text, const std::filesystem::path& path) {
  return GpuFromYaml(RootOf(LoadYamlText(text, path.string()), path), path.stem().string());
}

GpuConfig LoadGpuFile(const std::filesystem::path& path) {
  return GpuConfigFromText(ReadInputFile(path.string()), path);
}

ClusterSpec LoadClusterFile(const std::filesystem::path& path) {
  return ClusterFromYamlText(ReadInputFile(path.string()), path.string());
}

// "64xH100" -> 64 GPUs of the GPU named H100 (stem or alias), nodes of its network.gpus_per_node.
// nullopt when `text` is not of the form <digits>x<name>.
std::optional<ClusterSpec> ClusterFromShorthand(const std::string& text, const InputLocation& where,
                                                const std::string& field) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits + 1 >= text.size() || std::tolower(text[digits]) != 'x')
    return std::nullopt;
  const std::string gpu_name = text.substr(digits + 1);
  int64_t count = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, count);
  if (ec != std::errc() || count > kMaxGpus)  // planner/limits.h
    throw InputError(where, field,
                     fmt::format("'{}': {} GPUs is out of range; expected NxGPU with 1 <= N <= {}",
                                 text, text.substr(0, digits), kMaxGpus));
  if (count < 1)
    throw InputError(where, field, "'" + text + "': expected NxGPU with N >= 1 (e.g. 8xH100)");
  const std::optional<GpuConfig> gpu = FindGpu(gpu_name, {});
  if (!gpu)
    ThrowUnknownName(ConfigKind::kGpu, gpu_name, where, field, " (in the shorthand '" + text + "')");
  if (!gpu->network)
    throw InputError(where, field,
                     "'" + text + "': the GPU '" + gpu->gpu.name +
                         "' has no network block (gpus_per_node, intra_node, inter_node) to "
                         "build a cluster from; write a cluster file instead");
  const int64_t per_node = gpu->network->gpus_per_node;
  if (count > per_node && count % per_node != 0)
    throw InputError(where, field,
                     fmt::format("'{}': {} GPUs do not fill whole nodes of {} (the {} network's "
                                 "gpus_per_node); expected N < {} or a multiple of {}, e.g. {}x{}",
                                 text, count, per_node, gpu->gpu.name, per_node, per_node,
                                 (count / per_node + 1) * per_node, gpu_name));
  ClusterSpec c;
  c.name = text;
  c.gpu = gpu->gpu;
  c.nodes = count > per_node ? count / per_node : 1;
  c.gpus_per_node = count > per_node ? per_node : count;
  c.intra_node = gpu->network->intra_node;
  c.inter_node = gpu->network->inter_node;
  c.host = gpu->host;
  return c;
}

}  // namespace

const char* FolderOf(ConfigKind kind) {
  switch (kind) {
    case ConfigKind::kModel: return "models";
    case ConfigKind::kGpu: return "hardware";
    case ConfigKind::kCluster: return "clusters";
    case ConfigKind::kFramework: return "frameworks";
  }
  return "";
}

const char* NounOf(ConfigKind kind) {
  switch (kind) {
    case ConfigKind::kModel: return "model";
    case ConfigKind::kGpu: return "GPU";
    case ConfigKind::kCluster: return "cluster";
    case ConfigKind::kFramework: return "framework";
  }
  return "";
}

bool LooksLikePath(const std::string& text) {
  return text.find('/') != std::string::npos || EndsWith(text, ".yaml") ||
         EndsWith(text, ".yml") || EndsWith(text, ".json");
}

std::filesystem::path ResolveRelative(const std::string& text, const std::filesystem::path& base_dir) {
  const std::filesystem::path path(text);
  if (!LooksLikePath(text) || path.is_absolute() || base_dir.empty()) return path;
  return base_dir / path;
}

std::optional<std::filesystem::path> FindConfig(ConfigKind kind, const std::string& name) {
  const std::filesystem::path dir = ConfigsDir() / FolderOf(kind);
  std::error_code ec;
  std::vector<std::filesystem::path> matches;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (IsYamlFile(entry) && Lower(entry.path().stem().string()) == Lower(name))
      matches.push_back(entry.path());
  if (matches.empty()) return std::nullopt;
  std::sort(matches.begin(), matches.end());  // deterministic if both .yaml and .yml exist
  return matches.front();
}

std::vector<std::string> ListConfigs(ConfigKind kind) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(ConfigsDir() / FolderOf(kind), ec))
    if (IsYamlFile(entry)) names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

void ThrowUnknownName(ConfigKind kind, const std::string& name, const InputLocation& where,
                      const std::string& field, const std::string& extra_hint) {
  const std::vector<std::string> names = ListConfigs(kind);
  const std::filesystem::path dir = ConfigsDir() / FolderOf(kind);
  std::string message = fmt::format("unknown {} '{}'{}; ", NounOf(kind), name, extra_hint);
  if (names.empty())
    message += "no configs found in " + dir.string() + " (set MESHPLAN_CONFIGS to the configs folder)";
  else
    message += "available in " + dir.string() + ": " + Join(names);
  switch (kind) {
    case ConfigKind::kModel:
      message += "; or a path to a .yaml file, a Hugging Face config.json or a folder holding one";
      break;
    case ConfigKind::kGpu: {
      std::vector<std::string> aliases;
      for (const auto& gpu_name : names)
        for (const auto& alias : LoadGpuFile(*FindConfig(kind, gpu_name)).aliases)
          aliases.push_back(alias);
      if (!aliases.empty()) message += "; aliases: " + Join(aliases);
      message += "; or a path to a .yaml file";
      break;
    }
    case ConfigKind::kFramework:
      message += "; or a path to a .yaml file";
      break;
    case ConfigKind::kCluster:
      message += "; or NxGPU (e.g. 64xH100: 64 GPUs from configs/hardware), or a path to a .yaml file";
      break;
  }
  throw InputError(where, field, message);
}

ModelSpec LoadModelAt(const std::string& name_or_path, const std::filesystem::path& base_dir,
                      const InputLocation& where, const std::string& field) {
  if (LooksLikePath(name_or_path)) return LoadModelFile(ResolveRelative(name_or_path, base_dir));
  const auto path = FindConfig(ConfigKind::kModel, name_or_path);
  if (!path) ThrowUnknownName(ConfigKind::kModel, name_or_path, where, field);
  return LoadModelFile(*path);
}

std::optional<GpuConfig> FindGpu(const std::string& name_or_path, const std::filesystem::path& base_dir) {
  if (LooksLikePath(name_or_path)) return LoadGpuFile(ResolveRelative(name_or_path, base_dir));
  if (const auto path = FindConfig(ConfigKind::kGpu, name_or_path)) return LoadGpuFile(*path);
  for (const auto& stem : ListConfigs(ConfigKind::kGpu)) {
    GpuConfig gpu = LoadGpuFile(*FindConfig(ConfigKind::kGpu, stem));
    for (const auto& alias : gpu.aliases)
      if (Lower(alias) == Lower(name_or_path)) return gpu;
  }
  return std::nullopt;
}

GpuConfig LoadGpuAt(const std::string& name_or_path, const std::filesystem::path& base_dir,
                    const InputLocation& where, const std::string& field) {
  std::optional<GpuConfig> gpu = FindGpu(name_or_path, base_dir);
  if (!gpu) ThrowUnknownName(ConfigKind::kGpu, name_or_path, where, field);
  return *std::move(gpu);
}

ClusterSpec LoadClusterAt(const std::string& text, const std::filesystem::path& base_dir,
                          const InputLocation& where, const std::string& field) {
  if (LooksLikePath(text)) return LoadClusterFile(ResolveRelative(text, base_dir));
  if (const auto path = FindConfig(ConfigKind::kCluster, text)) return LoadClusterFile(*path);
  if (auto cluster = ClusterFromShorthand(text, where, field)) return *std::move(cluster);
  ThrowUnknownName(ConfigKind::kCluster, text, where, field);
}

}  // namespace config_internal

namespace ci = config_internal;

std::filesystem::path ConfigsDir() {
  if (const char* env = std::getenv("MESHPLAN_CONFIGS"); env != nullptr && *env != '\0') return env;
#ifdef MESHPLAN_CONFIGS_DIR
  return MESHPLAN_CONFIGS_DIR;
#else
  return "configs";
#endif
}

ModelSpec ModelFromYamlText(const std::string& text, const std::string& file) {
  const std::filesystem::path path(file);
  return ci::ModelFromYaml(ci::RootOf(LoadYamlText(text, file), path), path.stem().string());
}

GpuSpec GpuFromYamlText(const std::string& text, const std::string& file) {
  return ci::GpuConfigFromText(text, file).gpu;
}

ClusterSpec ClusterFromYamlText(const std::string& text, const std::string& file) {
  const std::filesystem::path path(file);
  return ci::ClusterFromYaml(ci::RootOf(LoadYamlText(text, file), path), path.stem().string(),
                             path.parent_path());
}

ModelSpec LoadModel(const std::string& name_or_path) {
  return ci::LoadModelAt(name_or_path, {}, {}, "model");
}

GpuSpec LoadGpu(const std::string& name_or_path) {
  return ci::LoadGpuAt(name_or_path, {}, {}, "gpu").gpu;
}

std::optional<ClusterSpec> LoadGpuNetwork(const std::string& name_or_path) {
  const ci::GpuConfig config = ci::LoadGpuAt(name_or_path, {}, {}, "gpu");
  if (!config.network) return std::nullopt;
  ClusterSpec node;
  node.name = config.gpu.name + " node";
  node.gpu = config.gpu;
  node.gpus_per_node = config.network->gpus_per_node;
  node.intra_node = config.network->intra_node;
  node.inter_node = config.network->inter_node;
  return node;
}

ClusterSpec LoadCluster(const std::string& name_or_path_or_shorthand) {
  return ci::LoadClusterAt(name_or_path_or_shorthand, {}, {}, "cluster");
}

std::vector<std::string> ListModels() { return ci::ListConfigs(ci::ConfigKind::kModel); }
std::vector<std::string> ListGpus() { return ci::ListConfigs(ci::ConfigKind::kGpu); }
std::vector<std::string> ListClusters() { return ci::ListConfigs(ci::ConfigKind::kCluster); }

}  // namespace meshplan
