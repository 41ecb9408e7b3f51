// LoadPublishedRuns: configs/validation/published_runs.yaml -> PublishedRuns
// (planner/validate/published_runs.h). Every row is the table's `common` keys with the
// row's own keys over them; each key is read, range-checked and located where it is written.
#include "planner/validate/published_runs.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>
#include <vector>

#include "planner/config/config_loader.h"
#include "planner/config/config_loader_internal.h"
#include "planner/config/framework_yaml.h"
#include "planner/config/yaml_fields.h"
#include "planner/limits.h"
#include "planner/names.h"
#include "planner/parallel_plan.h"

namespace meshplan {
namespace {

// A row's fields over its table's `common`: each key is read from the row when the row
// has it, else from common (errors point at whichever holds it; a missing key, at the row).
class RowFields {
 public:
  RowFields(const YamlFields& row, const YamlFields& common) : row_(row), common_(common) {}
  const YamlFields& For(const std::string& key) const {
    return row_.Has(key) || !common_.Has(key) ? row_ : common_;
  }
  const YamlFields& row() const { return row_; }

 private:
  const YamlFields& row_;
  const YamlFields& common_;
};

// The keys of a model given inline (without `model`).
constexpr std::string_view kInlineModelKeys[] = {"block",      "vocab_size", "hidden",
                                                 "layers",     "heads",      "kv_heads",
                                                 "ffn_hidden", "ffn_multiplier",
                                                 "tied_embeddings"};

// A configs/models file by name: its shape, as estimate --model NAME reads it.
ModelSpec NamedModelOf(const RowFields& f) {
  for (std::string_view key : kInlineModelKeys)
    if (f.For(std::string(key)).Has(std::string(key)))
      f.For(std::string(key)).Fail(std::string(key),
                                   "the model comes from `model: " +
                                       f.For("model").String("model") + "`; remove " +
                                       std::string(key) + " or `model`");
  const std::string name = f.For("model").String("model");
  try {
    return LoadModel(name);
  } catch (const InputError& e) {
    f.For("model").Fail("model", e.message());
  }
}

// A model written out: a gpt (multi-head, F = ffn_multiplier * hidden) or a llama-style
// shape (kv_heads, ffn_hidden), whose positions are the sequence the run trained on.
ModelSpec InlineModelOf(const RowFields& f, const std::string& name, int64_t seq_len) {
  ModelSpec m;
  m.name = name;
  const std::string block = f.For("block").String("block");
  if (!ParseBlockKind(block, &m.block))
    f.For("block").Fail("block", "expected one of: " + std::string(AllowedBlockKinds()) +
                                     "; got '" + block + "'");
  // The shared limits of every model (planner/limits.h), then the same shape checks.
  m.vocab_size = f.For("vocab_size").Int("vocab_size", {1, kMaxModelWidth});
  m.hidden = f.For("hidden").Int("hidden", {1, kMaxModelWidth});
  m.layers = f.For("layers").Int("layers", {1, kMaxModelCount});
  m.heads = f.For("heads").Int("heads", {1, kMaxModelCount});
  m.kv_heads = f.For("kv_heads").Int("kv_heads", {1, kMaxModelCount}, m.heads);
  const bool by_multiplier = f.For("ffn_multiplier").Has("ffn_multiplier");
  if (by_multiplier == f.For("ffn_hidden").Has("ffn_hidden"))
    f.For("ffn_hidden").Fail("ffn_hidden", "expected exactly one of ffn_hidden (elements) and "
                                           "ffn_multiplier (F = ffn_multiplier * hidden)");
  m.ffn_hidden = by_multiplier
                     ? f.For("ffn_multiplier").Int("ffn_multiplier", {1, 64}) * m.hidden
                     : f.For("ffn_hidden").Int("ffn_hidden", {1, kMaxModelWidth});
  m.tied_embeddings = f.For("tied_embeddings").Bool("tied_embeddings");
  m.max_seq = seq_len;  // learned positions for the sequence the run trained on
  if (m.hidden % m.heads != 0)
    f.For("heads").Fail("heads", fmt::format("hidden {} is not divisible by heads {}", m.hidden,
                                             m.heads));
  if (auto problem = config_internal::CheckModelShape(m)) {
    const std::string key = problem->field == "ffn_hidden" && by_multiplier ? "ffn_multiplier"
                                                                           : problem->field;
    f.For(key).Fail(key, problem->message);
  }
  return m;
}

ModelSpec ModelOf(const RowFields& f, const std::string& name, int64_t seq_len) {
  return f.For("model").Has("model") ? NamedModelOf(f) : InlineModelOf(f, name, seq_len);
}

// "N x gpu": nodes of the hardware file's network block (LoadCluster's shorthand).
ClusterSpec ClusterOf(const RowFields& f, int64_t gpus) {
  const std::string gpu = f.For("gpu").String("gpu");
  try {
    return LoadCluster(fmt::format("{}x{}", gpus, gpu));
  } catch (const InputError& e) {
    f.For("gpu").Fail("gpu", e.message());
  }
}

// The run's own settings beside its profile (RunSettings).
RunSettings RunSettingsOf(const RowFields& f) {
  RunSettings run;
  if (const YamlFields& where = f.For("grad_accumulation"); where.Has("grad_accumulation")) {
    const std::string accumulation = where.String("grad_accumulation");
    GradAccumulation mode;
    if (!ParseGradAccumulation(accumulation, &mode))
      where.Fail("grad_accumulation", "expected one of: " +
                                          std::string(AllowedGradAccumulations()) + "; got '" +
                                          accumulation + "'");
    run.grad_accumulation = mode;
  }
  // The run's norm kernel (torchtitan's norm_type), where it is not the profile's.
  if (const YamlFields& where = f.For("norm"); where.Has("norm")) {
    const std::string norm = where.String("norm");
    bool fused = false;
    if (!ParseNormKernel(norm, &fused))
      where.Fail("norm", "expected one of: fused, unfused; got '" + norm + "'");
    run.fused_norm = fused;
  }
  // The dtype of the master weights and Adam states of an fp8 run, where its recipe sets one
  // that is not the profile's (NeMo's optim.dtype).
  if (const YamlFields& where = f.For("fp8_states"); where.Has("fp8_states"))
    run.fp8_states = ReadChoice(where, "fp8_states", kFp8StateSpellings);
  // The loss kernel, where the run's recipe chooses one the profile does not run (NeMo's
  // cross_entropy_loss_fusion: fp32-fused).
  if (const YamlFields& where = f.For("loss"); where.Has("loss"))
    run.loss = ReadChoice(where, "loss", kLossKernelSpellings);
  return run;
}

// The training of a row run under `framework` (a configs/frameworks profile) with its own
// settings `run`.
TrainingSpec TrainingOf(const RowFields& f, const FrameworkSpec& framework, const RunSettings& run) {
  TrainingSpec t;
  t.global_batch = f.For("global_batch").Int("global_batch", {1, 1'000'000'000});
  t.seq_len = f.For("seq_len").Int("seq_len", {1, 1'000'000'000});
  const std::string precision = f.For("precision").String("precision");
  if (!ParsePrecision(precision, &t.precision))
    f.For("precision").Fail("precision", "expected one of: " + std::string(AllowedPrecisions()) +
                                             "; got '" + precision + "'");
  t.framework = framework;
  run.ApplyTo(&t.framework);
  return t;
}

// The plan string, parsed and checked against the row's model, batch and GPUs.
ParallelPlan PlanOf(const RowFields& f, const PlanFile& setup) {
  const YamlFields& row = f.row();
  const std::string text = row.String("plan");
  ParallelPlan plan;
  try {
    plan = ParsePlanString(text, row.file());
  } catch (const InputError& e) {
    row.Fail("plan", e.message());
  }
  const auto violations =
      Validate(plan, setup.model, setup.training, setup.cluster.world_size(),
               TpGroupLimit(setup.cluster, /*allow_tp_across_nodes=*/false));
  if (!violations.empty()) {
    std::string message = "'" + text + "' is invalid for this row: ";
    for (size_t i = 0; i < violations.size(); ++i)
      message += (i ? "; " : "") + violations[i].message + " [" + violations[i].constraint + "]";
    row.Fail("plan", message);
  }
  return plan;
}

// The range of a published figure, in its unit (docs/limits.md "Physical quantities").
NumberRange PublishedRange(PublishedFigure figure) {
  switch (figure) {
    case PublishedFigure::kTflopsPerGpu: return {kMinFlops / 1e12, true, 1e6};
    case PublishedFigure::kStepTime: return {kMinStepTimeS, true, kMaxStepTimeS};
    case PublishedFigure::kTokensPerGpu: return {kMinTokensPerS, true, kMaxTokensPerS};
    case PublishedFigure::kActivationMemory: break;
  }
  return {kMinMemoryBytes / (1024.0 * 1024 * 1024), true, 1e9};  // GiB
}

// The keys a table's `common` may give for all its rows (a row may repeat one).
constexpr std::string_view kSharedKeys[] = {
    "model",      "block",          "vocab_size", "seq_len",   "tied_embeddings",  "kv_heads",
    "ffn_hidden", "ffn_multiplier", "gpu",        "precision", "grad_accumulation", "norm",
    "fp8_states", "loss"};
// The keys only a row gives (`framework` overrides the table's own key).
constexpr std::string_view kRowKeys[] = {"name",         "params_B", "heads",     "hidden",
                                         "layers",       "gpus",     "framework", "global_batch",
                                         "plan",         "published", "fits",     "skip"};

// The framework a table or row names (an unknown one is an error at its key).
FrameworkSpec FrameworkOf(const YamlFields& where) {
  return LoadFrameworkAt(where.String("framework"), where.Where("framework"),
                         where.Field("framework"));
}

// `framework`: the table's own (loaded once for all its rows), when it names one.
PublishedRow RowOf(const YamlFields& row, const YamlFields& common, const PublishedTable& table,
                   std::optional<FrameworkSpec> framework) {
  std::vector<std::string_view> allowed(std::begin(kSharedKeys), std::end(kSharedKeys));
  allowed.insert(allowed.end(), std::begin(kRowKeys), std::end(kRowKeys));
  row.AllowOnly(allowed);
  const RowFields f(row, common);
  PublishedRow out;
  out.where = row.Where();
  out.name = row.String("name");
  out.params_billion = row.Number("params_B", {0, true, 1e6}, 0.0);
  if (row.Has("framework")) framework = FrameworkOf(row);
  if (framework) out.framework = framework->name;
  out.plan_text = row.String("plan");
  out.fits = row.Bool("fits", true);
  // A run that ran out of memory may publish no figure; every run that fitted publishes one.
  if (out.fits || row.Has("published"))
    out.published = row.Number("published", PublishedRange(table.figure));
  if (row.Has("skip")) {
    out.skip_reason = row.String("skip");
    if (out.skip_reason.find_first_not_of(" \t") == std::string::npos)
      row.Fail("skip", "expected the reason the row is not predicted, got an empty text");
    return out;  // the rest is read when meshplan can model the row
  }
  out.setup.cluster = ClusterOf(f, row.Int("gpus", {1, kMaxGpus}));
  // Neither the row nor its table names the software: the command line's default.
  if (!framework) framework = LoadFramework(DefaultFrameworkName(out.setup.cluster.gpu));
  out.framework = framework->name;
  out.run = RunSettingsOf(f);
  out.setup.training = TrainingOf(f, *framework, out.run);
  out.setup.model = ModelOf(f, out.name, out.setup.training.seq_len);
  // What estimate refuses, validate refuses too: fp8 needs FP8 tensor cores.
  if (const std::string why = WhyPrecisionUnsupported(out.setup.cluster.gpu,
                                                      out.setup.training.precision);
      !why.empty())
    f.For("precision").Fail("precision", why);
  out.setup.plan = PlanOf(f, out.setup);
  return out;
}

PublishedTable TableOf(const YamlFields& t) {
  t.AllowOnly({"id", "paper", "source", "page", "figure", "framework", "common", "rows"});
  PublishedTable out;
  out.id = t.String("id");
  out.paper = t.String("paper");
  out.source = t.String("source");
  out.page = t.String("page");
  std::optional<FrameworkSpec> framework;
  if (t.Has("framework")) {
    framework = FrameworkOf(t);
    out.framework = framework->name;
  }
  const std::string figure = t.String("figure");
  if (!ParsePublishedFigure(figure, &out.figure))
    t.Fail("figure", "expected one of: tflops_per_gpu, step_time_s, activation_GiB, "
                     "tokens_per_s_per_gpu; got '" + figure + "'");
  const YamlFields common = t.Map("common");
  common.AllowOnly(kSharedKeys);
  const YAML::Node rows = t.Get("rows");
  if (!rows.IsSequence() || rows.size() == 0)
    t.Fail("rows", "expected a non-empty list of rows, got " + DescribeNode(rows));
  for (size_t i = 0; i < rows.size(); ++i) {
    const YamlFields row(rows[i], t.file(), t.Field("rows") + fmt::format("[{}]", i));
    out.rows.push_back(RowOf(row, common, out, framework));
  }
  return out;
}


}  // namespace

void RunSettings::ApplyTo(FrameworkSpec* framework) const {
  if (grad_accumulation) framework->grad_accumulation = *grad_accumulation;
  if (fused_norm) framework->fused_norm = *fused_norm;
  if (fp8_states) framework->fp8_states = *fp8_states;
  if (loss) framework->loss = *loss;
}

const char* ToString(PublishedFigure figure) {
  switch (figure) {
    case PublishedFigure::kTflopsPerGpu: return "tflops_per_gpu";
    case PublishedFigure::kStepTime: return "step_time_s";
    case PublishedFigure::kActivationMemory: return "activation_GiB";
    case PublishedFigure::kTokensPerGpu: return "tokens_per_s_per_gpu";
  }
  return "?";
}

bool ParsePublishedFigure(const std::string& name, PublishedFigure* out) {
  for (PublishedFigure f : {PublishedFigure::kTflopsPerGpu, PublishedFigure::kStepTime,
                            PublishedFigure::kActivationMemory, PublishedFigure::kTokensPerGpu}) {
    if (name == ToString(f)) {
      *out = f;
      return true;
    }
  }
  return false;
}

const char* UnitOf(PublishedFigure figure) {
  switch (figure) {
    case PublishedFigure::kTflopsPerGpu: return "TFLOP/s per GPU";
    case PublishedFigure::kStepTime: return "s";
    case PublishedFigure::kActivationMemory: return "GiB";
    case PublishedFigure::kTokensPerGpu: return "tokens/s per GPU";
  }
  return "?";
}

std::string DefaultPublishedRunsPath() {
  return (ConfigsDir() / "validation" / "published_runs.yaml").string();
}

PublishedRuns LoadPublishedRuns(const std::string& path) {
  const YamlFields f(LoadYamlFile(path), path, "");
  f.AllowOnly({"tables"});
  const YAML::Node tables = f.Get("tables");
  if (!tables.IsSequence() || tables.size() == 0)
    f.Fail("tables", "expected a non-empty list of tables, got " + DescribeNode(tables));
  PublishedRuns out;
  out.file = path;
  for (size_t i = 0; i < tables.size(); ++i) {
    PublishedTable table = TableOf(YamlFields(tables[i], path, fmt::format("tables[{}]", i)));
    for (const PublishedTable& other : out.tables)
      if (other.id == table.id)
        throw InputError(LocationOf(path, tables[i].Mark()), fmt::format("tables[{}].id", i),
                         "the id '" + table.id + "' is used twice");
    out.tables.push_back(std::move(table));
  }
  return out;
}

}  // namespace meshplan
