// Plan files: LoadPlanFile, PlanFileToYaml and SavePlanFile (planner/config/config_loader.h).
//
// A plan file has four sections: model and cluster (a name, path or NxGPU string, or
// an inline mapping in the configs/ schemas), training, and plan (the keys of
// ParsePlanString, each parsed by it, so both spellings stay one). The writer emits
// inline specs so a file is self-contained, every number as the shortest decimal that
// reads back (through its unit) to the identical double: LoadPlanFile(PlanFileToYaml(p)) == p
// holds exactly.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "planner/atomic_file.h"
#include "planner/config/config_loader.h"
#include "planner/config/config_loader_internal.h"
#include "planner/input_file.h"
#include "planner/limits.h"
#include "planner/checked_math.h"
#include "planner/config/framework_yaml.h"
#include "planner/config/hardware_yaml.h"
#include "planner/names.h"
#include "planner/plan_fields.h"

namespace meshplan {
namespace ci = config_internal;
namespace {

// ---- Reading ----

// `gpu` picks the framework when the section names none (DefaultFrameworkName).
TrainingSpec TrainingFromYaml(const YamlFields& f, const GpuSpec& gpu) {
  f.AllowOnly({"global_batch", "seq_len", "precision", "steps", "learning_rate",
               "moe_aux_loss_coef", "framework", "grad_accumulation", "fp8_states", "loss"});
  TrainingSpec t;
  // Limits keep global_batch * seq_len (tokens per step) far inside int64 (planner/limits.h).
  t.global_batch = f.Int("global_batch", {1, kMaxGlobalBatch});
  t.seq_len = f.Int("seq_len", {1, kMaxSeqLen});
  const std::optional<int64_t> tokens = CheckedMul(t.global_batch, t.seq_len);
  if (!tokens || *tokens > kMaxTokensPerStep)
    f.Fail("seq_len", fmt::format("global_batch x seq_len = {} x {} tokens per step; expected at "
                                  "most {} (kMaxTokensPerStep, docs/limits.md)",
                                  t.global_batch, t.seq_len, kMaxTokensPerStep));
  const std::string precision = f.String("precision", ToString(t.precision));
  if (!ParsePrecision(precision, &t.precision))
    f.Fail("precision",
           "expected one of: " + std::string(AllowedPrecisions()) + "; got '" + precision + "'");
  t.steps = f.Int("steps", {1, kMaxConfigInt}, t.steps);
  t.learning_rate = f.Number("learning_rate", {0, false, 10}, t.learning_rate);
  t.moe_aux_loss_coef = f.Number("moe_aux_loss_coef", {0, true, 10}, t.moe_aux_loss_coef);
  t.framework = LoadFrameworkAt(f.String("framework", DefaultFrameworkName(gpu)),
                                f.Where("framework"), f.Field("framework"));
  GradAccumulation& mode = t.framework.grad_accumulation;
  const std::string accumulation = f.String("grad_accumulation", ToString(mode));
  if (!ParseGradAccumulation(accumulation, &mode))
    f.Fail("grad_accumulation", "expected one of: " + std::string(AllowedGradAccumulations()) +
                                    "; got '" + accumulation + "'");
  t.framework.fp8_states =
      ReadChoice(f, "fp8_states", kFp8StateSpellings, t.framework.fp8_states);
  t.framework.loss = ReadChoice(f, "loss", kLossKernelSpellings, t.framework.loss);
  return t;
}

// Each value goes through ParsePlanString, re-located at its line:column on error.
ParallelPlan PlanFromYaml(const YamlFields& f) {
  static const std::vector<std::string_view> kKeys = [] {  // planner/plan_fields.h
    std::vector<std::string_view> keys;
    for (const PlanFieldSpec& field : PlanFields()) keys.push_back(field.key);
    return keys;
  }();
  f.AllowOnly(kKeys);
  std::string joined;
  for (const auto& item : f.node()) {
    const std::string key = item.first.Scalar();
    const YAML::Node& value = item.second;
    if (!value.IsScalar() || value.Scalar().find_first_of(",=") != std::string::npos)
      f.Fail(key, "expected a single value, got " + DescribeNode(value));
    const std::string pair = key + "=" + value.Scalar();
    try {
      ParsePlanString(pair, f.file());
    } catch (const InputError& e) {
      f.Fail(key, e.message());
    }
    joined += (joined.empty() ? "" : ",") + pair;
  }
  return ParsePlanString(joined, f.file());
}

// ---- Writing ----

// The shortest decimal that reads back to exactly `value` (no unit).
std::string Shortest(double value) { return FormatShifted(value, 0); }

}  // namespace

std::string ModelToYaml(const ModelSpec& m) {
  std::string out;
  if (!m.name.empty()) out += "name: " + YamlQuoted(m.name) + "\n";
  out += fmt::format(
      "block: {}\nvocab_size: {}\nhidden: {}\nlayers: {}\nheads: {}\nkv_heads: {}\n"
      "ffn_hidden: {}\ntied_embeddings: {}\nmax_seq: {}\n",
      ToString(m.block), m.vocab_size, m.hidden, m.layers, m.heads, m.kv_heads, m.ffn_hidden,
      m.tied_embeddings ? "true" : "false", m.max_seq);
  if (m.attention_head_dim > 0) out += fmt::format("head_dim: {}\n", m.attention_head_dim);
  if (m.qk_norm) out += "qk_norm: true\n";
  if (!m.gated_ffn()) out += fmt::format("ffn_activation: {}\n", ToString(m.ffn_activation));
  if (m.moe.enabled()) {
    const MoeSpec& e = m.moe;
    out += fmt::format(
        "moe:\n  experts: {}\n  top_k: {}\n  shared_experts: {}\n"
        "  expert_ffn_hidden: {}\n  dense_layers: {}\n  router_bias: {}\n"
        "  capacity_factor: {}\n  load_imbalance: {}\n",
        e.experts, e.top_k, e.shared_experts, e.expert_ffn_hidden, e.dense_layers,
        e.router_bias ? "true" : "false", Shortest(e.capacity_factor),
        Shortest(e.load_imbalance));
  }
  if (m.mla.enabled())
    out += fmt::format(
        "mla:\n  q_lora_rank: {}\n  kv_lora_rank: {}\n  rope_head_dim: {}\n"
        "  v_head_dim: {}\n",
        m.mla.q_lora_rank, m.mla.kv_lora_rank, m.mla.rope_head_dim, m.mla.v_head_dim);
  return out;
}

namespace {

// `key`: and the section: `reference` (a name or path) when given, else `inline_yaml` indented
// under it.
void EmitSection(std::string& out, const char* key, const std::string& reference,
                 const std::string& inline_yaml) {
  if (!reference.empty()) {
    out += fmt::format("{}: {}\n", key, YamlQuoted(reference));
    return;
  }
  out += fmt::format("{}:\n", key);
  for (size_t begin = 0; begin < inline_yaml.size();) {
    const size_t end = inline_yaml.find('\n', begin);
    out += "  " + inline_yaml.substr(begin, end - begin + 1);
    begin = end + 1;
  }
}

}  // namespace

std::string ClusterToYaml(const ClusterSpec& c) {
  std::string out;
  if (!c.name.empty()) out += "name: " + YamlQuoted(c.name) + "\n";
  out += fmt::format("nodes: {}\ngpus_per_node: {}\n", c.nodes, c.gpus_per_node);
  HardwareYamlOptions exact;
  exact.significant_digits = 0;
  EmitSection(out, "gpu", "", GpuSpecToYaml(c.gpu, exact));
  out += "intra_node: " + NetworkTierToYaml(c.intra_node, 0) + "\n";
  out += "inter_node: " + NetworkTierToYaml(c.inter_node, 0) + "\n";
  return out + HostToYaml(c.host, 0);
}

namespace {

void EmitTraining(std::string& out, const TrainingSpec& t) {
  out += fmt::format(
      "training:\n  global_batch: {}\n  seq_len: {}\n  precision: {}\n  steps: {}\n"
      "  learning_rate: {}\n",
      t.global_batch, t.seq_len, ToString(t.precision), t.steps, Shortest(t.learning_rate));
  if (t.moe_aux_loss_coef != kDefaultMoeAuxLossCoef)
    out += "  moe_aux_loss_coef: " + Shortest(t.moe_aux_loss_coef) + "\n";
  // The profile by name (a path for a file outside configs/frameworks/), and what differs
  // from it: LoadPlanFile(written) gives the same spec back.
  out += "  framework: " + t.framework.name + "\n";
  const FrameworkSpec profile = LoadFramework(t.framework.name);
  if (t.framework.grad_accumulation != profile.grad_accumulation)
    out += std::string("  grad_accumulation: ") + ToString(t.framework.grad_accumulation) + "\n";
  if (t.framework.fp8_states != profile.fp8_states)
    out += std::string("  fp8_states: ") + SpellingOf(kFp8StateSpellings, t.framework.fp8_states) +
           "\n";
  if (t.framework.loss != profile.loss)
    out += std::string("  loss: ") + SpellingOf(kLossKernelSpellings, t.framework.loss) + "\n";
}

// One line per key of ToPlanString, so the file and the plan string cannot disagree.
void EmitPlan(std::string& out, const ParallelPlan& plan) {
  out += "plan:\n";
  const std::string text = ToPlanString(plan);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    out += "  " + item.substr(0, eq) + ": " + item.substr(eq + 1) + "\n";
    start = end + 1;
  }
}

}  // namespace

PlanFile LoadPlanFile(const std::string& path, const FrameworkSpec* run_by) {
  return PlanFileFromText(ReadInputFile(path), path, run_by);
}

PlanFile PlanFileFromText(const std::string& text, const std::string& path_text,
                          const FrameworkSpec* run_by) {
  const std::filesystem::path path(path_text);
  const YamlFields f(LoadYamlText(text, path_text), path_text, "");
  f.AllowOnly({"model", "cluster", "training", "plan"});
  const std::filesystem::path base_dir = path.parent_path();
  PlanFile out;

  const YAML::Node model = f.Get("model");
  if (model.IsDefined() && model.IsMap())
    out.model = ci::ModelFromYaml(f.Map("model"), "");
  else
    out.model = ci::LoadModelAt(f.String("model"), base_dir, f.Where("model"), "model");

  const YAML::Node cluster = f.Get("cluster");
  if (cluster.IsDefined() && cluster.IsMap())
    out.cluster = ci::ClusterFromYaml(f.Map("cluster"), "", base_dir);
  else
    out.cluster = ci::LoadClusterAt(f.String("cluster"), base_dir, f.Where("cluster"), "cluster");

  out.training = TrainingFromYaml(f.Map("training"), out.cluster.gpu);
  if (const std::string why = WhyPrecisionUnsupported(out.cluster.gpu, out.training.precision);
      !why.empty())
    f.Map("training").Fail("precision", why);
  out.plan = PlanFromYaml(f.Map("plan"));
  if (run_by != nullptr) out.training.framework = *run_by;

  const auto violations = Validate(out.plan, out.model, out.training, out.cluster.world_size());
  if (!violations.empty()) {
    std::string message = "the plan is invalid for this model, cluster and batch: ";
    for (size_t i = 0; i < violations.size(); ++i)
      message += (i ? "; " : "") + violations[i].message + " [" + violations[i].constraint + "]";
    const YamlFields training = f.Map("training");
    message += fmt::format(
        " (global_batch is training.global_batch at line {}, seq is training.seq_len at line {}, "
        "the {} GPUs are the cluster at line {})",
        training.Where("global_batch").line, training.Where("seq_len").line,
        out.cluster.world_size(), f.Where("cluster").line);
    message += ProfilesOffering(out.plan, violations, "training.framework: NAME");
    throw InputError(f.Where("plan"), "plan", message);
  }
  return out;
}

std::string PlanFileToYaml(const PlanFile& p, const PlanFileReferences& refs) {
  const bool self_contained = refs.model.empty() && refs.cluster.empty();
  std::string out =
      std::string(self_contained
                      ? "# meshplan plan file: model, cluster, training and the parallel plan, "
                        "self-contained.\n"
                      : "# meshplan plan file: model, cluster (relative paths are relative to "
                        "this file), training and the plan.\n") +
      "# Units: memory_MiB in MiB (2^20 bytes); peak_TFLOPs in 1e12 FLOP/s (dense);\n"
      "# memory_bandwidth_TBps in 1e12 bytes/s; bandwidth_GBps in 1e9 bytes/s per GPU per\n"
      "# direction; latency_us and kernel_overhead_us in microseconds; seq_len in tokens;\n"
      "# global_batch in sequences per optimizer step.\n";
  EmitSection(out, "model", refs.model, ModelToYaml(p.model));
  EmitSection(out, "cluster", refs.cluster, ClusterToYaml(p.cluster));
  EmitTraining(out, p.training);
  EmitPlan(out, p.plan);
  return out;
}

void SavePlanFile(const std::string& path, const PlanFile& plan_file) {
  try {
    WriteFileAtomically(path, PlanFileToYaml(plan_file));
  } catch (const std::runtime_error& e) {
    throw InputError({path}, "", std::string("cannot write the plan file: ") + e.what());
  }
}

}  // namespace meshplan
