// `meshplan shrink PLAN.yaml --nproc N`: the plan's layout on N local ranks with a tiny model
// of the same family (planner/scale_down.h), written as a plan, a model and a cluster file
// ready for `meshplan run` and `meshplan compare`.
//
//   meshplan shrink plan.yaml --nproc 4 [--device cpu|cuda] [--out-dir shrunk] [--format table|json]
//
// cpu (the default): the cluster is N ranks of this machine's CPU profile (configs/hardware/
// cpu-ci.yaml) on one node; cuda: one node of N of the plan's GPU. Bad input (exit 2): an
// unreadable plan, an N that cannot keep the layout, an output folder that cannot be written.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/setup_options.h"
#include "planner/atomic_file.h"
#include "planner/config/config_loader.h"
#include "planner/cost/param_count.h"
#include "planner/input_error.h"
#include "planner/limits.h"
#include "planner/names.h"
#include "planner/parallel_plan.h"
#include "planner/scale_down.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

// The CPU profile a shrunk plan runs on: the one `meshplan calibrate` measured for CI.
constexpr const char* kCpuProfile = "cpu-ci";
// The files beside plan.yaml, which names them by these relative paths.
constexpr const char* kModelFile = "model.yaml";
constexpr const char* kClusterFile = "cluster.yaml";

struct ShrinkCommandOptions {
  std::string plan_file;
  int64_t nproc = 0;
  std::string device = "cpu";
  std::string out_dir = "shrunk";
  std::string format = "table";
};

ClusterSpec RunCluster(const PlanFile& big, const ShrinkCommandOptions& options) {
  ClusterSpec cluster;
  if (options.device == "cpu") {
    cluster = LoadCluster(fmt::format("1x{}", kCpuProfile));
    cluster.name = fmt::format("cpu-{}x", options.nproc);
  } else {
    cluster = big.cluster;
    cluster.name = fmt::format("{}x{}", options.nproc, big.cluster.gpu.name);
  }
  cluster.nodes = 1;
  cluster.gpus_per_node = options.nproc;
  return cluster;
}

std::string DescribeModel(const ModelSpec& m) {
  std::string text = fmt::format("{} block, E={} L={} H={} K={} F={} V={}", ToString(m.block),
                                 m.hidden, m.layers, m.heads, m.kv_heads, m.ffn_hidden,
                                 m.vocab_size);
  if (m.moe.enabled())
    text += fmt::format(", {} experts top-{} (+{} shared) of Fe={}", m.moe.experts, m.moe.top_k,
                        m.moe.shared_experts, m.moe.expert_ffn_hidden);
  return text + fmt::format(", {} parameters", FormatCount(static_cast<double>(CountParams(m))));
}

int RunShrink(const ShrinkCommandOptions& options) {
  const PlanFile big = NamingFlag("plan", [&] { return LoadPlanFile(options.plan_file); });
  const ScaledDown small = ScaleDown(big, RunCluster(big, options), options.device == "cpu");

  // Every text first, then the files: a bad folder leaves nothing written.
  namespace fs = std::filesystem;
  const fs::path dir(options.out_dir);
  const std::string model_text =
      fmt::format("# {} scaled down by `meshplan shrink` from {}\n", small.plan.model.name,
                  big.model.name) +
      ModelToYaml(small.plan.model);
  const std::string cluster_text =
      fmt::format("# {} ranks on one node, for `meshplan shrink`'s plan\n", options.nproc) +
      ClusterToYaml(small.plan.cluster);
  const std::string plan_text =
      fmt::format("# `meshplan shrink {} --nproc {}`: {} on {} ranks\n", options.plan_file,
                  options.nproc, ToPlanString(big.plan), options.nproc) +
      PlanFileToYaml(small.plan, {.model = kModelFile, .cluster = kClusterFile});
  std::error_code error;
  fs::create_directories(dir, error);
  if (error)
    throw InputError({"<command line>"}, "--out-dir",
                     fmt::format("cannot create {}: {}", dir.string(), error.message()));
  const std::string plan_path = (dir / "plan.yaml").string();
  const std::string model_path = (dir / kModelFile).string();
  const std::string cluster_path = (dir / kClusterFile).string();
  const std::string measured_path = (dir / "measured.json").string();
  WriteFileAtomically(model_path, model_text);
  WriteFileAtomically(cluster_path, cluster_text);
  WriteFileAtomically(plan_path, plan_text);

  const std::string run = fmt::format("meshplan run {} --nproc {} --device {} --out {}", plan_path,
                                      options.nproc, options.device, measured_path);
  const std::string compare =
      fmt::format("meshplan compare {} {}", plan_path, measured_path);
  if (options.format == "json") {
    const nlohmann::json out = {{"from", ToPlanString(big.plan)},
                                {"plan", ToPlanString(small.plan.plan)},
                                {"nproc", options.nproc},
                                {"device", options.device},
                                {"model", small.plan.model.name},
                                {"params", CountParams(small.plan.model)},
                                {"changes", small.changes},
                                {"files", {plan_path, model_path, cluster_path}},
                                {"next", {run, compare}}};
    std::cout << ToJsonText(out) << "\n";
    return 0;
  }
  fmt::print("meshplan shrink: {} ({}) on {} -> {} {} ranks\n", big.model.name,
             ToPlanString(big.plan), big.cluster.name, options.nproc, options.device);
  fmt::print("  plan:    {}\n", ToPlanString(small.plan.plan));
  fmt::print("  model:   {}: {}\n", small.plan.model.name, DescribeModel(small.plan.model));
  fmt::print("  batch:   {} x {} tokens, {}, {} steps\n", small.plan.training.global_batch,
             small.plan.training.seq_len, ToString(small.plan.training.precision),
             small.plan.training.steps);
  fmt::print("  changed: {}\n", small.changes.empty() ? "nothing" : fmt::format("{}", fmt::join(small.changes, ", ")));
  fmt::print("wrote {}, model.yaml and cluster.yaml beside it. Next:\n  {}\n  {}\n", plan_path,
             run, compare);
  return 0;
}

}  // namespace

void AddShrinkCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ShrinkCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "shrink", "the plan's layout (dp / tp / pp / cp / ep, ZeRO, schedule, recompute) on N "
                "local ranks with a tiny model of the same family: a plan, a model and a "
                "cluster file ready for `meshplan run` and `compare`");
  command->add_option("plan", options->plan_file, "the plan file to scale down")->required();
  command->add_option("--nproc", options->nproc, "local ranks to keep the layout on (a divisor "
                                                 "of the plan's world size)")
      ->required()
      ->check(IntegerInRange(1, kMaxGpus, "ranks"));
  command->add_option("--device", options->device,
                      "cpu: ranks of this machine's CPU profile (fp32); cuda: N of the plan's GPU")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  command->add_option("--out-dir", options->out_dir, "the folder for plan.yaml, model.yaml and "
                                                     "cluster.yaml")
      ->check(NonEmptyText("a folder"))
      ->capture_default_str();
  AddFormatOption(command, &options->format);
  command->callback([options, exit_code] { *exit_code = RunShrink(*options); });
}

}  // namespace meshplan
