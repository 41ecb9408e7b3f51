#include "cli/setup_options.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

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
      ->capture_default_str();
  command->add_option("--seq", options->seq, "sequence length in tokens")
      ->check(IntegerInRange(1, kMaxSeqLen, "tokens; kMaxSeqLen, docs/limits.md"))
      ->capture_default_str();
  command->add_option("--precision", options->precision,
                      "bf16 | mixed | fp32 | fp8 (fp8: FP8 linear GEMMs, master weights as the "
                      "framework keeps them; GPUs with FP8 tensor cores only)")
      ->capture_default_str();
  command->add_option("--framework", options->framework,
                      "the software that runs the plan: a name from configs/frameworks/ (megatron-core, "
                      "megatron-lm-2021, megatron-lm-2022, torchtitan, pytorch, deepspeed, meshplan) "
                      "or a YAML file; default: megatron-core on GPUs, meshplan on CPU profiles")
      ->check(NonEmptyText("a framework"));
  command->add_option("--grad-accumulation", options->grad_accumulation,
                      "fused | separate: how micro-batches' weight gradients are summed (fused: in "
                      "the GEMM, Megatron-Core and meshplan's executor; separate: an add kernel per "
                      "micro-batch, PyTorch autograd / DDP / FSDP); default: the framework's");
}

TrainingSetup ResolveSetup(const SetupOptions& options) {
  TrainingSetup setup;
  setup.model = NamingFlag("--model", [&] { return LoadModel(options.model); });
  setup.cluster = NamingFlag("--cluster", [&] { return LoadCluster(options.cluster); });
  const InputLocation flags{"<command line>"};
  // The flags' checks (IntegerInRange) ran when they were parsed; these cover callers
  // that fill SetupOptions themselves (search --bench).
  if (options.global_batch <= 0 || options.global_batch > kMaxGlobalBatch)
    throw InputError(flags, "--global-batch",
                     fmt::format("must be a number of sequences from 1 to {} (kMaxGlobalBatch, "
                                 "docs/limits.md), got {}",
                                 kMaxGlobalBatch, options.global_batch));
  if (options.seq <= 0 || options.seq > kMaxSeqLen)
    throw InputError(flags, "--seq",
                     fmt::format("must be a number of tokens from 1 to {} (kMaxSeqLen, "
                                 "docs/limits.md), got {}",
                                 kMaxSeqLen, options.seq));
  if (const auto tokens = CheckedMul(options.global_batch, options.seq);
      !tokens || *tokens > kMaxTokensPerStep)
    throw InputError(flags, "--global-batch",
                     fmt::format("--global-batch {} x --seq {} tokens per step; expected at most "
                                 "{} (kMaxTokensPerStep, docs/limits.md)",
                                 options.global_batch, options.seq, kMaxTokensPerStep));
  setup.training.global_batch = options.global_batch;
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
  return setup;
}

void AddPlanInputOptions(CLI::App* command, PlanInputOptions* options) {
  command->add_option("--plan", options->plan,
                      "the plan, e.g. \"dp=2,tp=4,pp=1,cp=1,zero=1,sp=1,mbs=1,recompute=none,"
                      "schedule=1f1b,vpp=1,tp_overlap=0\"; keys: " + PlanFieldKeyList() +
                          " (omitted keys keep their defaults; no --plan: dp = all GPUs)");
  command->add_option("--plan-file", options->plan_file,
                      "a plan YAML (as `meshplan search --out` writes): supplies model, cluster, "
                      "training and plan");
}

namespace {

// Flags that a plan file replaces; giving one beside --plan-file is an error, not a guess.
constexpr const char* kPlanFileReplaces[] = {"--model",     "--cluster",   "--global-batch",
                                             "--seq",       "--precision", "--framework",
                                             "--grad-accumulation",      "--plan"};

}  // namespace

PlanFile ResolvePlanInput(const CLI::App& command, const SetupOptions& setup_options,
                          const PlanInputOptions& options) {
  const InputLocation flags{"<command line>"};
  PlanFile input;
  if (!options.plan_file.empty()) {
    for (const char* flag : kPlanFileReplaces)
      if (command.count(flag) > 0)
        throw InputError(flags, flag,
                         "cannot be combined with --plan-file (the plan file supplies the model, "
                         "cluster, training and plan)");
    input = NamingFlag("--plan-file", [&] { return LoadPlanFile(options.plan_file); });
  } else {
    TrainingSetup setup = ResolveSetup(setup_options);
    input.model = std::move(setup.model);
    input.cluster = std::move(setup.cluster);
    input.training = setup.training;
    input.plan = ParsePlanString(options.plan, "--plan");
    // An empty --plan means plain data parallel over every GPU.
    if (command.count("--plan") == 0) input.plan.dp = input.cluster.world_size();
  }
  const std::vector<PlanViolation> violations =
      Validate(input.plan, input.model, input.training, input.cluster.world_size());
  if (!violations.empty()) {
    std::string message = "the plan " + ToPlanString(input.plan) + " is invalid for " +
                          input.model.name + " on " + std::to_string(input.cluster.world_size()) +
                          " GPUs:";
    for (const PlanViolation& v : violations) message += "\n  " + v.constraint + ": " + v.message;
    if (options.plan_file.empty())  // say which flag each value came from
      message += fmt::format(
          "\nwhere: global_batch is --global-batch {}, seq is --seq {}, the {} GPUs are "
          "--cluster {} (dp*tp*pp*cp must equal them), the factors are {}",
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
