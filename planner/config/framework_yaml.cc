#include "planner/config/framework_yaml.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "planner/attention_impl.h"
#include "planner/config/config_loader_internal.h"
#include "planner/input_file.h"
#include "planner/names.h"
#include "planner/parallel_plan.h"
#include "planner/spellings.h"

namespace meshplan {
namespace {

namespace ci = config_internal;

constexpr Spellings<KernelSet, 4> kKernelSets{{{KernelSet::kMegatron2021, "megatron-2021"},
                                               {KernelSet::kEager, "eager"},
                                               {KernelSet::kFused, "fused"},
                                               {KernelSet::kTorchtitan2024, "torchtitan-2024"}}};
constexpr Spellings<bool, 2> kNormKernels{{{false, "unfused"}, {true, "fused"}}};
constexpr Spellings<GradDtype, 2> kGradDtypes{{{GradDtype::kParam, "param"}, {GradDtype::kFp32, "fp32"}}};
constexpr Spellings<MasterWeights, 2> kMasterWeights{
    {{MasterWeights::kFp32, "fp32"}, {MasterWeights::kRemainder, "remainder"}}};
constexpr Spellings<OptimizerStep, 3> kOptimizers{{{OptimizerStep::kFusedAdam, "fused-adam"},
                                                    {OptimizerStep::kForeachAdam, "foreach-adam"},
                                                    {OptimizerStep::kMegatronFp16, "megatron-fp16"}}};

constexpr Spellings<LogFormat, 5> kLogFormats{{{LogFormat::kMeshplan, "meshplan"},
                                               {LogFormat::kMegatron, "megatron"},
                                               {LogFormat::kTorchtitan, "torchtitan"},
                                               {LogFormat::kDeepspeed, "deepspeed"},
                                               {LogFormat::kPytorchHook, "pytorch-hook"}}};

constexpr Spellings<bool, 2> kZero1Gradients{{{false, "in-place"}, {true, "shard-copy"}}};
constexpr Spellings<Zero3Buffers, 2> kZero3Buffers{
    {{Zero3Buffers::kViews, "views"}, {Zero3Buffers::kCopies, "copies"}}};
constexpr Spellings<Zero3EndParts, 2> kZero3EndParts{
    {{Zero3EndParts::kGroups, "groups"}, {Zero3EndParts::kRoot, "root"}}};
constexpr Spellings<DdpBuckets, 2> kDdpBuckets{
    {{DdpBuckets::kViews, "views"}, {DdpBuckets::kCopies, "copies"}}};
constexpr Spellings<ParamGather, 2> kParamGathers{
    {{ParamGather::kAfterStep, "after-step"}, {ParamGather::kNextForward, "next-forward"}}};
constexpr Spellings<TpOverlapOffer, 3> kTpOverlapOffers{{{TpOverlapOffer::kAny, "any"},
                                                        {TpOverlapOffer::kWithSp, "with-sp"},
                                                        {TpOverlapOffer::kNone, "none"}}};
constexpr Spellings<PpOverlapOffer, 2> kPpOverlapOffers{{{PpOverlapOffer::kNone, "none"},
                                                         {PpOverlapOffer::kInterleaved, "interleaved"}}};
constexpr Spellings<TpBackwardOverlap, 2> kTpBackwardOverlaps{
    {{TpBackwardOverlap::kNone, "none"}, {TpBackwardOverlap::kColumnGemms, "column-gemms"}}};
constexpr Spellings<SpOffer, 3> kSequenceParallelOffers{{{SpOffer::kOptional, "optional"},
                                                         {SpOffer::kAlways, "always"},
                                                         {SpOffer::kNever, "never"}}};

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

// `key` (zero, zero_pipelined, zero_with_tp_cp): ZeRO stages the framework offers, a list of 0, 1, 2, 3 (each
// at most once).
ZeroOffer ReadZero(const YamlFields& f, const std::string& key) {
  const char* expected = "expected a list of ZeRO stages: 0, 1, 2, 3";
  if (!f.Has(key)) f.Fail(key, std::string("missing required field; ") + expected);
  ZeroOffer offer{0};
  for (const std::string& text : f.StringList(key)) {
    if (text.size() != 1 || text[0] < '0' || text[0] > '3')
      f.Fail(key, std::string(expected) + "; got '" + text + "'");
    const int stage = text[0] - '0';
    if (offer.offers(stage)) f.Fail(key, "stage " + text + " given twice");
    offer.stages = static_cast<uint8_t>(offer.stages | (1 << stage));
  }
  if (offer.stages == 0) f.Fail(key, std::string(expected) + "; got an empty list");
  return offer;
}

// `offload`, when given: the offload combinations the framework runs, each one or more of act,
// opt, params joined by '+' ("opt+params"); nothing offloaded is always offered.
OffloadOffer ReadOffload(const YamlFields& f) {
  if (!f.Has("offload")) {
    if (f.Has("offload_act_alone")) f.Fail("offload_act_alone", "needs an `offload:` list");
    return {};
  }
  const char* expected = "expected a list of offload combinations, each of act, opt, params "
                         "joined by '+' (e.g. [act, opt+params])";
  OffloadOffer offer{1};  // nothing offloaded
  for (const std::string& text : f.StringList("offload")) {
    bool on[3] = {false, false, false};
    size_t at = 0;
    while (at <= text.size()) {
      const size_t end = std::min(text.find('+', at), text.size());
      const std::string part = text.substr(at, end - at);
      const int i = part == "act" ? 0 : part == "opt" ? 1 : part == "params" ? 2 : -1;
      if (i < 0 || on[i]) f.Fail("offload", std::string(expected) + "; got '" + text + "'");
      on[i] = true;
      at = end + 1;
    }
    offer.combos = static_cast<uint8_t>(offer.combos | (1 << OffloadOffer::Bit(on[0], on[1], on[2])));
  }
  offer.act_alone = f.Bool("offload_act_alone", false);
  return offer;
}

// `parallelism`, when given: the parallelisms besides data and pipeline parallelism the
// framework runs (tp, cp, ep, each at most once); [] for none.
ParallelismOffer ReadParallelism(const YamlFields& f) {
  if (!f.Has("parallelism")) return {};
  ParallelismOffer offer{false, false, false};
  for (const std::string& text : f.StringList("parallelism")) {
    bool* on = text == "tp" ? &offer.tp : text == "cp" ? &offer.cp : text == "ep" ? &offer.ep : nullptr;
    if (!on) f.Fail("parallelism", "expected a list of: tp, cp, ep; got '" + text + "'");
    if (*on) f.Fail("parallelism", text + " given twice");
    *on = true;
  }
  return offer;
}

// `prefetch`, when given: the ZeRO-3 gather depths the framework runs (0 to
// kMaxZero3Prefetch, each at most once; 1, the search's plans, among them).
PrefetchOffer ReadPrefetch(const YamlFields& f) {
  if (!f.Has("prefetch")) return {};
  const std::string expected = "expected a list of ZeRO-3 prefetch depths from 0 to " +
                               std::to_string(kMaxZero3Prefetch);
  PrefetchOffer offer{0};
  for (const std::string& text : f.StringList("prefetch")) {
    const int depth = text.size() == 1 && text[0] >= '0' && text[0] <= '9' ? text[0] - '0' : -1;
    if (depth < 0 || depth > kMaxZero3Prefetch) f.Fail("prefetch", expected + "; got '" + text + "'");
    if (offer.offers(depth)) f.Fail("prefetch", text + " given twice");
    offer.depths = static_cast<uint8_t>(offer.depths | (1 << depth));
  }
  if (!offer.offers(1))
    f.Fail("prefetch", "must offer 1 (one block gathered ahead: the search's plans)");
  return offer;
}

// `schedules`, when given: the pipeline schedules the framework runs (gpipe, 1f1b,
// interleaved, zb_h1, each at most once); [] for none (no pipeline parallelism).
ScheduleOffer ReadSchedules(const YamlFields& f) {
  if (!f.Has("schedules")) return {};
  ScheduleOffer offer{0};
  for (const std::string& text : f.StringList("schedules")) {
    PipelineSchedule s;
    if (!ParsePipelineSchedule(text, &s))
      f.Fail("schedules", std::string("expected a list of: ") + AllowedPipelineSchedules() +
                              "; got '" + text + "'");
    if (offer.offers(static_cast<int>(s))) f.Fail("schedules", text + " given twice");
    offer.schedules = static_cast<uint8_t>(offer.schedules | (1 << static_cast<int>(s)));
  }
  return offer;
}

// The optional `calibration` mapping: the factors (in (0, 10]) and which of them
// `calibrate --from-logs` fits.
FrameworkCalibration ReadCalibration(const YamlFields& f) {
  FrameworkCalibration c;
  if (!f.Has("calibration")) return c;
  const YamlFields m = f.Map("calibration");
  m.AllowOnly({"fittable", "compute_scale", "bandwidth_scale"});
  constexpr NumberRange kScale{0, false, 10};
  c.compute_scale = m.Number("compute_scale", kScale, 1.0);
  c.bandwidth_scale = m.Number("bandwidth_scale", kScale, 1.0);
  for (const std::string& name : m.StringList("fittable")) {
    if (name == "compute_scale") c.fit_compute = true;
    else if (name == "bandwidth_scale") c.fit_bandwidth = true;
    else m.Fail("fittable", "expected a list of: compute_scale, bandwidth_scale; got '" + name + "'");
  }
  return c;
}

// `key`, when given: the name of another profile of configs/frameworks/ than `self` ("" when
// absent).
std::string ReadOtherProfile(const YamlFields& f, const char* key, const std::string& self) {
  if (!f.Has(key)) return "";
  const std::string other = f.String(key);
  const std::vector<std::string> names = ListFrameworks();
  if (other == self || std::find(names.begin(), names.end(), other) == names.end())
    f.Fail(key, fmt::format("expected another profile of configs/frameworks/ ({}); got '{}'",
                            fmt::join(names, ", "), other));
  return other;
}

FrameworkSpec FrameworkFromYaml(const YamlFields& f, const std::string& default_name) {
  f.AllowOnly({"name", "version", "source", "built_on", "version_of", "kernels", "norm",
               "attention", "attention_kernel", "main_grads", "fp8_states", "master_weights",
               "grad_accumulation", "optimizer", "loss", "recompute", "zero", "zero_pipelined",
               "zero_with_tp_cp", "zero1_gradients", "zero3_buffers", "zero3_end_parts",
               "ddp_buckets", "param_gather", "offload", "offload_act_alone", "parallelism",
               "prefetch", "schedules", "tp_overlap", "pp_overlap", "tp_backward_overlap",
               "sequence_parallel",
               "reduce_bucket_elements",
               "allocator_fragmentation", "log_format", "calibration"});
  FrameworkSpec s;
  s.name = f.String("name", default_name);
  s.version = f.String("version");
  s.built_on = ReadOtherProfile(f, "built_on", s.name);
  s.version_of = ReadOtherProfile(f, "version_of", s.name);
  s.kernels = ReadChoice(f, "kernels", kKernelSets);
  if (f.Has("norm")) s.fused_norm = ReadChoice(f, "norm", kNormKernels);
  s.attention = ReadChoice(f, "attention", kAttentionImplSpellings);
  s.attention_kernel = f.Has("attention_kernel")
                           ? ReadChoice(f, "attention_kernel", kAttentionKernelSpellings)
                           : AttentionKernel::kFlash2;
  s.main_grads = ReadChoice(f, "main_grads", kGradDtypes);
  s.fp8_states = ReadChoice(f, "fp8_states", kFp8StateSpellings);
  if (f.Has("master_weights")) s.master_weights = ReadChoice(f, "master_weights", kMasterWeights);
  const std::string accumulation = f.String("grad_accumulation");
  if (!ParseGradAccumulation(accumulation, &s.grad_accumulation))
    f.Fail("grad_accumulation", "expected one of: " + std::string(AllowedGradAccumulations()) +
                                    "; got '" + accumulation + "'");
  s.optimizer = ReadChoice(f, "optimizer", kOptimizers);
  if (f.Has("loss")) s.loss = ReadChoice(f, "loss", kLossKernelSpellings);
  s.recompute = ReadRecompute(f);
  s.zero = ReadZero(f, "zero");
  if (f.Has("zero_pipelined")) s.zero_pipelined = ReadZero(f, "zero_pipelined");
  if (f.Has("zero_with_tp_cp")) s.zero_with_tp_cp = ReadZero(f, "zero_with_tp_cp");
  s.zero1_gradient_shard = ReadChoice(f, "zero1_gradients", kZero1Gradients);
  if (f.Has("zero3_buffers")) s.zero3_buffers = ReadChoice(f, "zero3_buffers", kZero3Buffers);
  if (f.Has("zero3_end_parts"))
    s.zero3_end_parts = ReadChoice(f, "zero3_end_parts", kZero3EndParts);
  if (f.Has("ddp_buckets")) s.ddp_buckets = ReadChoice(f, "ddp_buckets", kDdpBuckets);
  if (f.Has("param_gather")) s.param_gather = ReadChoice(f, "param_gather", kParamGathers);
  s.offload = ReadOffload(f);
  s.parallelism = ReadParallelism(f);
  s.prefetch = ReadPrefetch(f);
  s.schedules = ReadSchedules(f);
  if (f.Has("tp_overlap")) s.tp_overlap = ReadChoice(f, "tp_overlap", kTpOverlapOffers);
  if (f.Has("pp_overlap")) s.pp_overlap = ReadChoice(f, "pp_overlap", kPpOverlapOffers);
  if (f.Has("tp_backward_overlap"))
    s.tp_backward_overlap = ReadChoice(f, "tp_backward_overlap", kTpBackwardOverlaps);
  if (f.Has("sequence_parallel"))
    s.sequence_parallel = ReadChoice(f, "sequence_parallel", kSequenceParallelOffers);
  s.reduce_bucket_elements = f.Number("reduce_bucket_elements", {0, true, 1e12}, 0.0);
  if (f.Has("allocator_fragmentation")) {
    s.allocator_fragmentation = f.Number("allocator_fragmentation", {0, true});
    if (s.allocator_fragmentation >= 1)
      f.Fail("allocator_fragmentation", "expected a fraction in [0, 1) (the share of reserved "
                                        "memory no tensor holds)");
  }
  s.log_format = ReadChoice(f, "log_format", kLogFormats);
  s.calibration = ReadCalibration(f);
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

const char* ToString(KernelSet kernels) { return SpellingOf(kKernelSets, kernels); }

bool ParseNormKernel(const std::string& name, bool* fused) {
  return ParseSpelling(kNormKernels, name, fused);
}

const char* ToString(LogFormat format) { return SpellingOf(kLogFormats, format); }

std::string FrameworkToYamlText(const FrameworkSpec& s, const std::string& comment) {
  auto spelled = [](const auto& table, auto value) { return std::string(SpellingOf(table, value)); };
  std::string recompute;
  const RecomputeOffer& r = s.recompute;
  for (const auto& [on, name] : {std::pair{r.none, "none"}, {r.selective, "selective"},
                                 {r.full, "full"}, {r.op, "op"}, {r.every, "every"}})
    if (on) recompute += (recompute.empty() ? "" : ", ") + std::string(name);
  std::string fittable;
  if (s.calibration.fit_compute) fittable = "compute_scale";
  if (s.calibration.fit_bandwidth) fittable += (fittable.empty() ? "" : ", ") + std::string("bandwidth_scale");
  std::string out;
  for (size_t at = 0; at < comment.size();) {
    const size_t end = std::min(comment.find('\n', at), comment.size());
    out += "# " + comment.substr(at, end - at) + "\n";
    at = end + 1;
  }
  out += "name: " + s.name + "\n";
  out += "version: \"" + s.version + "\"\n";
  if (!s.built_on.empty()) out += "built_on: " + s.built_on + "\n";
  if (!s.version_of.empty()) out += "version_of: " + s.version_of + "\n";
  out += "kernels: " + spelled(kKernelSets, s.kernels) + "\n";
  out += "norm: " + spelled(kNormKernels, s.fused_norm) + "\n";
  out += "attention: " + spelled(kAttentionImplSpellings, s.attention) + "\n";
  out += "attention_kernel: " + spelled(kAttentionKernelSpellings, s.attention_kernel) + "\n";
  out += "main_grads: " + spelled(kGradDtypes, s.main_grads) + "\n";
  out += "fp8_states: " + spelled(kFp8StateSpellings, s.fp8_states) + "\n";
  out += "master_weights: " + spelled(kMasterWeights, s.master_weights) + "\n";
  out += "grad_accumulation: " + std::string(ToString(s.grad_accumulation)) + "\n";
  out += "optimizer: " + spelled(kOptimizers, s.optimizer) + "\n";
  out += "loss: " + spelled(kLossKernelSpellings, s.loss) + "\n";
  out += "recompute: [" + recompute + "]\n";
  out += "zero: [" + OfferedZeroStagesText(s.zero) + "]\n";
  if (s.zero_pipelined)
    out += "zero_pipelined: [" + OfferedZeroStagesText(*s.zero_pipelined) + "]\n";
  if (s.zero_with_tp_cp)
    out += "zero_with_tp_cp: [" + OfferedZeroStagesText(*s.zero_with_tp_cp) + "]\n";
  out += "zero1_gradients: " + spelled(kZero1Gradients, s.zero1_gradient_shard) + "\n";
  out += "zero3_buffers: " + spelled(kZero3Buffers, s.zero3_buffers) + "\n";
  out += "zero3_end_parts: " + spelled(kZero3EndParts, s.zero3_end_parts) + "\n";
  out += "ddp_buckets: " + spelled(kDdpBuckets, s.ddp_buckets) + "\n";
  out += "param_gather: " + spelled(kParamGathers, s.param_gather) + "\n";
  out += "offload: [" + OffloadCombosText(s.offload) + "]\n";
  if (s.offload.act_alone) out += "offload_act_alone: true\n";
  out += "parallelism: [" + OfferedParallelismText(s.parallelism) + "]\n";
  out += "prefetch: [" + OfferedPrefetchText(s.prefetch) + "]\n";
  out += "schedules: [" + OfferedSchedulesText(s.schedules) + "]\n";
  out += "tp_overlap: " + spelled(kTpOverlapOffers, s.tp_overlap) + "\n";
  out += "pp_overlap: " + spelled(kPpOverlapOffers, s.pp_overlap) + "\n";
  out += "tp_backward_overlap: " + spelled(kTpBackwardOverlaps, s.tp_backward_overlap) + "\n";
  out += "sequence_parallel: " + spelled(kSequenceParallelOffers, s.sequence_parallel) + "\n";
  if (s.reduce_bucket_elements > 0)
    out += fmt::format("reduce_bucket_elements: {}\n", s.reduce_bucket_elements);
  if (s.allocator_fragmentation >= 0)
    out += fmt::format("allocator_fragmentation: {}\n", s.allocator_fragmentation);
  out += "log_format: " + spelled(kLogFormats, s.log_format) + "\n";
  out += "calibration:\n  fittable: [" + fittable + "]\n";
  out += fmt::format("  compute_scale: {}\n  bandwidth_scale: {}\n", s.calibration.compute_scale,
                     s.calibration.bandwidth_scale);
  return out;
}

std::string ProfilesOffering(const ParallelPlan& plan, const std::vector<PlanViolation>& violations,
                             const std::string& how) {
  if (std::none_of(violations.begin(), violations.end(),
                   [](const PlanViolation& v) { return IsFrameworkRule(v.constraint); }))
    return "";
  // The profiles under which the plan breaks none of those rules.
  std::string names;
  for (const std::string& name : ListFrameworks())
    if (FrameworkRefusals(plan, LoadFramework(name)) == 0)
      names += (names.empty() ? "" : ", ") + name;
  return names.empty() ? "" : "\nprofiles that offer it: " + names + " (" + how + ")";
}

}  // namespace meshplan
