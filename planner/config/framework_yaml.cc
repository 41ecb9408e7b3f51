#include "planner/config/framework_yaml.h"

#include <array>
#include <filesystem>
#include <utility>

#include "planner/attention_impl.h"
#include "planner/config/config_loader_internal.h"
#include "planner/input_file.h"
#include "planner/names.h"

namespace meshplan {
namespace {

namespace ci = config_internal;

template <typename Enum, size_t N>
using Spellings = std::array<std::pair<Enum, const char*>, N>;

constexpr Spellings<KernelSet, 3> kKernelSets{{{KernelSet::kMegatron2021, "megatron-2021"},
                                               {KernelSet::kEager, "eager"},
                                               {KernelSet::kFused, "fused"}}};
constexpr Spellings<AttentionImpl, 3> kAttention{
    {{AttentionImpl::kFused, "fused"}, {AttentionImpl::kNaive, "naive"}, {AttentionImpl::kAuto, "auto"}}};
constexpr Spellings<GradDtype, 2> kGradDtypes{{{GradDtype::kParam, "param"}, {GradDtype::kFp32, "fp32"}}};
constexpr Spellings<Fp8StateDtype, 2> kFp8States{
    {{Fp8StateDtype::kBf16, "bf16"}, {Fp8StateDtype::kFp32, "fp32"}}};
constexpr Spellings<OptimizerStep, 2> kOptimizers{
    {{OptimizerStep::kFusedAdam, "fused-adam"}, {OptimizerStep::kMegatronFp16, "megatron-fp16"}}};

constexpr Spellings<bool, 2> kZero1Gradients{{{false, "in-place"}, {true, "shard-copy"}}};

template <typename Enum, size_t N>
std::string AllowedOf(const Spellings<Enum, N>& table) {
  std::string out;
  for (const auto& [value, name] : table) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

// A required key whose value is one of `table`'s spellings.
template <typename Enum, size_t N>
Enum ReadChoice(const YamlFields& f, const std::string& key, const Spellings<Enum, N>& table) {
  const std::string text = f.String(key);
  for (const auto& [value, name] : table)
    if (text == name) return value;
  f.Fail(key, "expected one of: " + AllowedOf(table) + "; got '" + text + "'");
}

RecomputeOffer ReadRecompute(const YamlFields& f) {
  if (!f.Has("recompute")) f.Fail("recompute", "missing required field; expected a list of: none, selective, full, op, every");
  RecomputeOffer offer{false, false, false, false, false};
  for (const std::string& name : f.StringList("recompute")) {
    bool* slot = name == "none"        ? &offer.none
                 : name == "selective" ? &offer.selective
                 : name == "full"      ? &offer.full
                 : name == "op"        ? &offer.op
                 : name == "every"     ? &offer.every
                                       : nullptr;
    if (slot == nullptr)
      f.Fail("recompute", "expected a list of: none, selective, full, op, every; got '" + name + "'");
    *slot = true;
  }
  if (!offer.none)
    f.Fail("recompute", "must offer 'none' (every framework can run without recompute)");
  return offer;
}

FrameworkSpec FrameworkFromYaml(const YamlFields& f, const std::string& default_name) {
  f.AllowOnly({"name", "version", "source", "kernels", "attention", "main_grads", "fp8_states",
               "grad_accumulation", "optimizer", "recompute", "zero1_gradients",
               "allocator_fragmentation"});
  FrameworkSpec s;
  s.name = f.String("name", default_name);
  s.version = f.String("version");
  s.kernels = ReadChoice(f, "kernels", kKernelSets);
  s.attention = ReadChoice(f, "attention", kAttention);
  s.main_grads = ReadChoice(f, "main_grads", kGradDtypes);
  s.fp8_states = ReadChoice(f, "fp8_states", kFp8States);
  const std::string accumulation = f.String("grad_accumulation");
  if (!ParseGradAccumulation(accumulation, &s.grad_accumulation))
    f.Fail("grad_accumulation", "expected one of: " + std::string(AllowedGradAccumulations()) +
                                    "; got '" + accumulation + "'");
  s.optimizer = ReadChoice(f, "optimizer", kOptimizers);
  s.recompute = ReadRecompute(f);
  s.zero1_gradient_shard = ReadChoice(f, "zero1_gradients", kZero1Gradients);
  if (f.Has("allocator_fragmentation")) {
    s.allocator_fragmentation = f.Number("allocator_fragmentation", {0, true});
    if (s.allocator_fragmentation >= 1)
      f.Fail("allocator_fragmentation", "expected a fraction in [0, 1) (the share of reserved "
                                        "memory no tensor holds)");
  }
  return s;
}

}  // namespace

FrameworkSpec FrameworkFromYamlText(const std::string& text, const std::string& file) {
  const YAML::Node root = LoadYamlText(text, file);
  if (!root.IsMap())
    throw InputError(LocationOf(file, root.Mark()), "", "expected a mapping (a framework profile)");
  return FrameworkFromYaml(YamlFields(root, file, ""), std::filesystem::path(file).stem().string());
}

FrameworkSpec LoadFramework(const std::string& name_or_path) {
  return LoadFrameworkAt(name_or_path, {"<command line>"}, "framework");
}

FrameworkSpec LoadFrameworkAt(const std::string& name_or_path, const InputLocation& where,
                              const std::string& field) {
  if (ci::LooksLikePath(name_or_path)) {
    FrameworkSpec spec = FrameworkFromYamlText(ReadInputFile(name_or_path), name_or_path);
    spec.name = name_or_path;
    return spec;
  }
  const auto path = ci::FindConfig(ci::ConfigKind::kFramework, name_or_path);
  if (!path) ci::ThrowUnknownName(ci::ConfigKind::kFramework, name_or_path, where, field);
  FrameworkSpec spec = FrameworkFromYamlText(ReadInputFile(path->string()), path->string());
  spec.name = path->stem().string();
  return spec;
}

std::vector<std::string> ListFrameworks() { return ci::ListConfigs(ci::ConfigKind::kFramework); }

const char* DefaultFrameworkName(const GpuSpec& gpu) {
  return gpu.kernel_shape.sm_count == 0 ? kExecutorFramework : "megatron-core";
}

const char* ToString(KernelSet kernels) {
  for (const auto& [value, name] : kKernelSets)
    if (value == kernels) return name;
  return "?";
}

std::string FrameworkLabel(const FrameworkSpec& framework) {
  return framework.version.empty() ? framework.name : framework.name + " " + framework.version;
}

}  // namespace meshplan
