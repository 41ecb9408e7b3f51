#include "cli/setup_options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/checked_math.h"
#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/export/export.h"
#include "planner/cost/offload.h"
#include "planner/input_error.h"
#include "planner/limits.h"
#include "planner/names.h"
#include "planner/parallel_plan.h"
#include "planner/plan_fields.h"
#include "planner/spellings.h"
#include "planner/units_format.h"

namespace meshplan {

void AddSetupOptions(CLI::App* command, SetupOptions* options) {
  command->add_option("--model", options->model,
                      "model: a name from configs/models/, a YAML file or a HF config.json")
      ->capture_default_str();
  command->add_option("--cluster", options->cluster,
                      "cluster: a name from configs/clusters/, a YAML file, or NxGPU (e.g. 64xH100)")
      ->capture_default_str();
  command->add_option("--global-batch", options->global_batch, "sequences per optimizer step")
      ->check(IntegerInRange(1, kMaxGlobalBatch, "sequences; kMaxGlobalBatch, docs/limits.md"))
      ->each([options](const std::string&) { options->global_batch_given = true; })
      ->capture_default_str();
  const CLI::Validator token_count(
      [](std::string& text) {
        int64_t tokens = 0;
        return ParseTokenCount(text, kMaxTokensPerStep, &tokens);
      },
      "TOKENS");
  command->add_option("--tokens-per-step", options->tokens_per_step,
                      "the global batch in tokens instead of sequences (--global-batch = this / "
                      "--seq, exact): " + std::string(kTokenCountForms))
      ->check(token_count);
  command->add_option("--seq", options->seq, "sequence length in tokens")
      ->check(IntegerInRange(1, kMaxSeqLen, "tokens; kMaxSeqLen, docs/limits.md"))
      ->capture_default_str();
  command->add_option("--precision", options->precision,
                      "bf16 | mixed | fp32 | fp8 (fp8: FP8 linear GEMMs, master weights as the "
                      "framework keeps them; GPUs with FP8 tensor cores only)")
      ->capture_default_str();
  // Read once for every command that takes the setup flags.
  static const std::string kFrameworkHelp = fmt::format(
      "the software that runs the plan: a name from configs/frameworks/ ({}) or a YAML file; "
      "default: megatron-core on GPUs, meshplan on CPU profiles",
      fmt::join(ListFrameworks(), ", "));
  command->add_option("--framework", options->framework, kFrameworkHelp)
      ->check(NonEmptyText("a framework"));
  command->add_option("--grad-accumulation", options->grad_accumulation,
                      "fused | separate: how micro-batches' weight gradients are summed (fused: in "
                      "the GEMM, Megatron-Core and meshplan's executor; separate: an add kernel per "
                      "micro-batch, PyTorch autograd / DDP / FSDP); default: the framework's");
  command->add_option("--fp8-states", options->fp8_states,
                      "bf16 | fp32: the dtype of master weights and Adam states under --precision "
                      "fp8 (NeMo's optim.dtype; Transformer Engine recipes keep fp32); default: the "
                      "framework's");
  command->add_option("--loss", options->loss,
                      "how the loss runs, one of " + AllowedSpellings(kLossKernelSpellings) +
                          " (fp32-fused: Megatron-Core's --cross-entropy-loss-fusion, NeMo's "
                          "cross_entropy_loss_fusion; docs/frameworks.md); default: the "
                          "framework's");
}

namespace {

// The global batch in sequences: --global-batch, or --tokens-per-step / --seq when exact.
int64_t GlobalBatchOf(const SetupOptions& options) {
  if (options.tokens_per_step.empty()) return options.global_batch;
  const InputLocation flags{"<command line>"};
  if (options.global_batch_given)
    throw InputError(flags, "--tokens-per-step",
                     "cannot be combined with --global-batch: give the batch in sequences "
                     "(--global-batch) or in tokens (--tokens-per-step), not both");
  int64_t tokens = 0;
  if (const std::string why = ParseTokenCount(options.tokens_per_step, kMaxTokensPerStep, &tokens);
      !why.empty())
    throw InputError(flags, "--tokens-per-step", why);
  if (tokens % options.seq != 0) {
    const int64_t below = std::max<int64_t>(tokens / options.seq, 1);  // the nearest multiples
    throw InputError(
        flags, "--tokens-per-step",
        fmt::format("{} is {} tokens, not a whole number of sequences of --seq {}; expected a "
                    "multiple of {}, e.g. {} ({} sequences) or {} ({})",
                    options.tokens_per_step, GroupDigits(tokens), options.seq, options.seq,
                    GroupDigits(below * options.seq), below,
                    GroupDigits((below + 1) * options.seq), below + 1));
  }
  return tokens / options.seq;
}

// A flag whose value is one of `table`'s spellings, left at `*out` (the framework's) when
// empty; anything else exits 2 naming the flag and the allowed values.
template <typename Enum, size_t N>
void ReadChoiceFlag(const InputLocation& flags, const char* flag, const Spellings<Enum, N>& table,
                    const std::string& text, Enum* out) {
  if (!text.empty() && !ParseSpelling(table, text, out))
    throw InputError(flags, flag,
                     "expected one of: " + AllowedSpellings(table) + "; got '" + text + "'");
}

}  // namespace

TrainingSetup ResolveSetup(const SetupOptions& options) {
  TrainingSetup setup;
  setup.model = NamingFlag("--model", [&] { return LoadModel(options.model); });
  setup.cluster = NamingFlag("--cluster", [&] { return LoadCluster(options.cluster); });
  const InputLocation flags{"<command line>"};
  // The flags' checks (IntegerInRange) ran when they were parsed; these cover callers
  // that fill SetupOptions themselves (search --bench).
  if (options.seq <= 0 || options.seq > kMaxSeqLen)
    throw InputError(flags, "--seq",
                     fmt::format("must be a number of tokens from 1 to {} (kMaxSeqLen, "
                                 "docs/limits.md), got {}",
                                 kMaxSeqLen, options.seq));
  const int64_t global_batch = GlobalBatchOf(options);
  const char* batch_flag = options.tokens_per_step.empty() ? "--global-batch" : "--tokens-per-step";
  if (global_batch <= 0 || global_batch > kMaxGlobalBatch)
    throw InputError(flags, batch_flag,
                     fmt::format("must be a number of sequences from 1 to {} (kMaxGlobalBatch, "
                                 "docs/limits.md), got {}",
                                 kMaxGlobalBatch, global_batch));
  if (const auto tokens = CheckedMul(global_batch, options.seq);
      !tokens || *tokens > kMaxTokensPerStep)
    throw InputError(flags, batch_flag,
                     fmt::format("--global-batch {} x --seq {} tokens per step; expected at most "
                                 "{} (kMaxTokensPerStep, docs/limits.md)",
                                 global_batch, options.seq, kMaxTokensPerStep));
  setup.training.global_batch = global_batch;
  setup.training.seq_len = options.seq;
  if (!ParsePrecision(options.precision, &setup.training.precision))
    throw InputError(flags, "--precision", "expected one of: " + std::string(AllowedPrecisions()) +
                                               "; got '" + options.precision + "'");
  if (const std::string why = WhyPrecisionUnsupported(setup.cluster.gpu, setup.training.precision);
      !why.empty())
    throw InputError(flags, "--precision", why + " (--cluster " + options.cluster + ")");
  const std::string framework =
      options.framework.empty() ? DefaultFrameworkName(setup.cluster.gpu) : options.framework;
  setup.training.framework = NamingFlag("--framework", [&] { return LoadFramework(framework); });
  GradAccumulation& mode = setup.training.framework.grad_accumulation;
  if (!options.grad_accumulation.empty() && !ParseGradAccumulation(options.grad_accumulation, &mode))
    throw InputError(flags, "--grad-accumulation",
                     "expected one of: " + std::string(AllowedGradAccumulations()) + "; got '" +
                         options.grad_accumulation + "'");
  ReadChoiceFlag(flags, "--fp8-states", kFp8StateSpellings, options.fp8_states,
                 &setup.training.framework.fp8_states);
  ReadChoiceFlag(flags, "--loss", kLossKernelSpellings, options.loss, &setup.training.framework.loss);
  return setup;
}

void AddPlanInputOptions(CLI::App* command, PlanInputOptions* options) {
  command->add_option("--plan", options->plan,
                      "the plan, e.g. \"dp=2,tp=4,pp=1,cp=1,zero=1,sp=1,mbs=1,recompute=none,"
                      "schedule=1f1b,vpp=1,tp_overlap=0\"; keys: " + PlanFieldKeyList() +
                          " (omitted keys keep their defaults, but dp fills the GPUs that tp x pp x cp "
                          "leave: no --plan is dp = all GPUs)");
  command->add_option("--plan-file", options->plan_file,
                      "a plan YAML (as `meshplan search --out` writes): supplies model, cluster, "
                      "training and plan");
}

namespace {

// Flags that a plan file replaces; giving one beside --plan-file is an error, not a guess.
constexpr const char* kPlanFileReplaces[] = {
    "--model",     "--cluster",   "--global-batch",      "--tokens-per-step", "--seq",
    "--precision", "--framework", "--grad-accumulation", "--fp8-states", "--loss", "--plan"};

}  // namespace

ParallelPlan ParsePlanOption(const std::string& text, int64_t world_size, const std::string& flag) {
  ParallelPlan plan = ParsePlanString(text, flag);
  for (const PlanFieldValue& item : ParsePlanFields(text, flag))
    if (item.field->id == PlanField::kDp) return plan;
  const std::optional<int64_t> others = CheckedProduct({plan.tp, plan.pp, plan.cp});
  if (others && *others > 0 && world_size % *others == 0) plan.dp = world_size / *others;
  return plan;
}

void RefuseSetupFlagsBesidePlanFile(const CLI::App& command) {
  for (const char* flag : kPlanFileReplaces)
    if (command.count(flag) > 0)
      throw InputError({"<command line>"}, flag,
                       "cannot be combined with --plan-file (the plan file supplies the model, "
                       "cluster, training and plan)");
}

PlanFile ResolvePlanInput(const CLI::App& command, const SetupOptions& setup_options,
                          const PlanInputOptions& options) {
  PlanFile input;
  if (!options.plan_file.empty()) {
    RefuseSetupFlagsBesidePlanFile(command);
    input = NamingFlag("--plan-file", [&] { return LoadPlanFile(options.plan_file); });
  } else {
    TrainingSetup setup = ResolveSetup(setup_options);
    input.model = std::move(setup.model);
    input.cluster = std::move(setup.cluster);
    input.training = setup.training;
    input.plan = ParsePlanOption(options.plan, input.cluster.world_size());
  }
  const std::vector<PlanViolation> violations =
      Validate(input.plan, input.model, input.training, input.cluster.world_size());
  if (!violations.empty()) {
    std::string message = "the plan " + ToPlanString(input.plan) + " is invalid for " +
                          input.model.name + " on " + std::to_string(input.cluster.world_size()) +
                          " GPUs:";
    for (const PlanViolation& v : violations) message += "\n  " + v.constraint + ": " + v.message;
    message += ProfilesOffering(input.plan, violations, "--framework NAME");
    if (options.plan_file.empty())  // say which flag each value came from
      message += fmt::format(
          "\nwhere: global_batch is {} {}, seq is --seq {}, the {} GPUs are "
          "--cluster {} (dp*tp*pp*cp must equal them), the factors are {}",
          setup_options.tokens_per_step.empty()
              ? std::string("--global-batch")
              : "--tokens-per-step " + setup_options.tokens_per_step + " / --seq =",
          input.training.global_batch, input.training.seq_len, input.cluster.world_size(),
          setup_options.cluster,
          command.count("--plan") > 0 ? "--plan " + options.plan
                                      : std::string("the default plan (no --plan: dp = all GPUs)"));
    throw InputError({options.plan_file.empty() ? "<command line>" : options.plan_file}, "plan",
                     message);
  }
  RequireHostData(input.cluster, input.plan,
                  {options.plan_file.empty() ? "--cluster " + setup_options.cluster
                                             : options.plan_file});
  return input;
}

void AddFormatOption(CLI::App* command, std::string* format) {
  command->add_option("--format", *format, "output format: table | json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
}

void AddExportTargetOption(CLI::App* command, const std::string& flag, std::string* target,
                           const std::string& help) {
  const CLI::Validator known(
      [](std::string& name) {
        ExportTarget parsed;
        return ParseExportTarget(name, &parsed)
                   ? std::string()
                   : "unknown target '" + name + "'; allowed: " + AllowedExportTargets();
      },
      AllowedExportTargets(), "export target");
  command->add_option(flag, *target, help + " (" + AllowedExportTargets() + ")")->check(known);
}

void AddHeadroomOption(CLI::App* command, double* headroom) {
  // A headroom of 1 or more leaves no memory for any plan; a negative one overcommits.
  const CLI::Validator in_range(
      [](std::string& text) -> std::string {
        double value = 0;
        if (!ParseDecimal(text, &value))  // hex, "", "8 GB": not read as some number
          return "'" + text + "' is not a decimal number; expected a fraction in [0, 1)";
        return value >= 0 && value < 1 ? "" : "must be in [0, 1), got " + text;
      },
      "[0, 1)");
  command->add_option("--headroom", *headroom,
                      "fraction of GPU memory kept free (0.05: plans may use 95%)")
      ->check(in_range)
      ->capture_default_str();
}

std::string ToJsonText(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace meshplan
