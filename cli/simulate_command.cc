// `meshplan simulate`: one training step of a plan played out event by event
// (simulator/simulate.h), beside the analytic estimate of the same plan.
//
//   meshplan simulate --model llama2-7b --cluster 8xH100 --plan "dp=2,tp=4,sp=1"
//       --global-batch 64 --seq 4096 [--precision mixed] [--stage S] [--format table|json]
//       [--trace out.json [--trace-microbatches N] [--trace-stages 0,3]]
//   meshplan simulate --plan-file plan.yaml
//
// The table compares like with like: both columns are the same pipeline stage, by default
// the one with the most work (the analytic model's slowest stage: its time less its idle
// time), `--stage S` another. The same setup and plan flags as `estimate`; bad input is an
// InputError (exit code 2).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/setup_options.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/cost_report.h"
#include "planner/cost/flops.h"
#include "planner/figure_check.h"
#include "planner/input_error.h"
#include "planner/limits.h"
#include "planner/names.h"
#include "planner/units_format.h"
#include "simulator/simulate.h"
#include "simulator/trace_export.h"

namespace meshplan {
namespace {

struct SimulateCommandOptions {
  SetupOptions setup;
  PlanInputOptions input;
  std::string trace;
  TraceFilter trace_filter;
  int64_t stage = -1;  // the simulated stage the table shows; -1: the one with the most work
  std::string format = "table";
};

// The simulated stage with the most work: its time less the time it waits for the others,
// the rule by which the analytic model picks its slowest stage (planner/cost/step_time.cc).
int64_t StageWithMostWork(const SimResult& sim) {
  int64_t best = sim.slowest_stage;
  double most = -1;
  for (const SimStage& s : sim.stages)
    if (const double work = s.time.total_s - s.time.bubble_s; work > most) most = work, best = s.stage;
  return best;
}

nlohmann::json SimToJson(const SimResult& sim, double tokens_per_s, double mfu) {
  nlohmann::json stages = nlohmann::json::array();
  for (const SimStage& s : sim.stages) {
    nlohmann::json streams;
    for (int i = 0; i < kNumSimStreams; ++i)
      streams[ToString(static_cast<SimStream>(i))] = {{"busy_s", s.streams[i].busy_s},
                                                      {"utilisation", s.streams[i].utilisation}};
    stages.push_back({{"stage", s.stage},
                      {"rank", s.global_rank},
                      {"time", StepTimeToJson(s.time)},
                      {"streams", std::move(streams)}});
  }
  return {{"step_time_s", sim.time.total_s},
          {"time", StepTimeToJson(sim.time)},
          {"tokens_per_s", tokens_per_s},
          {"mfu", mfu},
          {"slowest_stage", sim.slowest_stage},
          {"stages", std::move(stages)},
          {"ops", sim.ops},
          {"events", sim.events}};
}

std::string Delta(double analytic, double simulated) {
  if (analytic == simulated) return "";
  if (analytic == 0) return "new";
  return fmt::format("{:+.1f}%", 100 * (simulated - analytic) / analytic);
}

// `stage`: the simulated stage shown; `most_work`: the stage with the most work.
void PrintTable(const PlanFile& in, const PlanCost& cost, const SimResult& sim, int64_t stage,
                int64_t most_work, double sim_tokens_per_s, double sim_mfu) {
  fmt::print("meshplan simulate: {} on {} ({} GPUs), plan {}\n", in.model.name, in.cluster.name,
             in.cluster.world_size(), ToShortPlanString(in.plan).empty()
                                          ? std::string("(defaults)")
                                          : ToShortPlanString(in.plan));
  fmt::print("cluster: {}\n", DescribeCluster(in.cluster));
  fmt::print("global batch {} x {} tokens, {}, {}; simulated {} ops on {} stage{}, {} events\n\n",
             in.training.global_batch, in.training.seq_len, ToString(in.training.precision),
             FrameworkLabel(in.training.framework), sim.ops, sim.stages.size(),
             sim.stages.size() == 1 ? "" : "s", sim.events);
  const StepTimeBreakdown& a = cost.time;
  const StepTimeBreakdown& s = sim.stages[static_cast<size_t>(stage)].time;
  const bool one_stage = sim.stages.size() == 1;
  fmt::print("{:<32}{:>14}{:>14}{:>9}\n",
             one_stage ? std::string("step time") : fmt::format("step time, stage {}*", stage),
             "analytic", "simulated", "delta");
  auto line = [](const std::string& name, double x, double y) {
    fmt::print("{:<32}{:>14}{:>14}{:>9}\n", name, FormatMs(x, 3), FormatMs(y, 3), Delta(x, y));
  };
  line("compute", a.compute_s, s.compute_s);
  if (a.recompute_s > 0 || s.recompute_s > 0) line("  of which recompute", a.recompute_s, s.recompute_s);
  for (MeshDim d : kAllCommDims)
    if (a.exposed_comm_s[d] > 0 || s.exposed_comm_s[d] > 0)
      line(fmt::format("exposed {} communication", ToString(d)), a.exposed_comm_s[d],
           s.exposed_comm_s[d]);
  line("pipeline bubble", a.bubble_s, s.bubble_s);
  line("optimizer", a.optimizer_s, s.optimizer_s);
  if (a.offload_s > 0 || s.offload_s > 0) line("offload copies", a.offload_s, s.offload_s);
  line(one_stage ? "total" : fmt::format("total (stage {} ends)", stage), a.total_s, s.total_s);
  if (stage != sim.slowest_stage)
    line(fmt::format("step (stage {} ends last)", sim.slowest_stage), a.total_s, sim.time.total_s);
  fmt::print("{:<32}{:>14}{:>14}{:>9}\n", "tokens/s",
             GroupDigits(static_cast<int64_t>(cost.tokens_per_s)),
             GroupDigits(static_cast<int64_t>(sim_tokens_per_s)),
             Delta(cost.tokens_per_s, sim_tokens_per_s));
  fmt::print("{:<32}{:>13.1f}%{:>13.1f}%\n", "MFU", 100 * cost.mfu, 100 * sim_mfu);
  if (!one_stage)
    fmt::print("* both columns: stage {}, {}; its idle time waiting for the\n  others "
               "counts as bubble. --stage S shows another stage's simulated time.\n",
               stage, stage == most_work ? "the stage with the most work" : "as --stage asks");
  if (const std::vector<std::string> missing = NotSimulated(in.plan); !missing.empty())
    fmt::print("note: not simulated: {}. The simulated column runs the plan without them; the "
               "analytic one\n  includes their copies and the CPU optimizer step.\n",
               fmt::join(missing, ", "));

  fmt::print("\nStreams, busy share of the step (stage {} is the slowest):\n", sim.slowest_stage);
  // The ep stream (the expert all-to-alls, the last one) only when the plan has ep > 1.
  const int streams = in.plan.ep > 1 ? kNumSimStreams : static_cast<int>(SimStream::kEp);
  fmt::print("{:>6} {:>7} {:>10}", "stage", "rank", "end");
  for (int i = 0; i < streams; ++i) fmt::print(" {:>8}", ToString(static_cast<SimStream>(i)));
  fmt::print("\n");
  for (const SimStage& st : sim.stages) {
    fmt::print("{:>6} {:>7} {:>10}", st.stage, st.global_rank, FormatMs(st.time.total_s, 3));
    for (int i = 0; i < streams; ++i) fmt::print(" {:>7.1f}%", 100 * st.streams[i].utilisation);
    fmt::print("\n");
  }
}

// Simulate(), with a step past the simulator's bounds (planner/limits.h) refused as an
// InputError that names where the batch came from and what to change.
SimResult SimulateOrRefuse(const PlanFile& in, const SimulateCommandOptions& options) {
  try {
    return Simulate(in.model, in.cluster, in.training, in.plan,
                    {.timeline = !options.trace.empty()});
  } catch (const SimulationTooLarge& e) {
    const bool from_file = !options.input.plan_file.empty();
    const std::string fix =
        !options.trace.empty() && std::string(e.what()).find("kMaxTraceOps") != std::string::npos
            ? "drop --trace, or simulate fewer micro-batches"
            : "fewer micro-batches per step";
    throw InputError(
        {from_file ? options.input.plan_file : "<command line>"},
        from_file ? "training.global_batch" : "--global-batch",
        fmt::format("{}; {}: lower the global batch ({}) or raise mbs or dp ({})", e.what(), fix,
                    from_file ? "training.global_batch" : "--global-batch",
                    from_file ? "the plan section" : "--plan"));
  }
}

// The stage numbers of --stage and --trace-stages exist in this plan, and the trace filters
// come with --trace.
void CheckStageFlags(const CLI::App& command, const SimulateCommandOptions& options, int64_t pp) {
  auto refuse = [](const char* flag, const std::string& why) {
    throw InputError({"<command line>"}, flag, why);
  };
  const std::string range = fmt::format("a stage of this plan: 0 to {} (pp={})", pp - 1, pp);
  if (options.stage >= pp)
    refuse("--stage", fmt::format("stage {} is not {}", options.stage, range));
  for (int64_t s : options.trace_filter.stages)
    if (s < 0 || s >= pp) refuse("--trace-stages", fmt::format("stage {} is not {}", s, range));
  if (options.trace.empty())
    for (const char* flag : {"--trace-microbatches", "--trace-stages"})
      if (command.count(flag) > 0) refuse(flag, "filters the trace: give --trace FILE too");
}

int RunSimulate(const CLI::App& command, const SimulateCommandOptions& options) {
  const PlanFile in = ResolvePlanInput(command, options.setup, options.input);
  CheckStageFlags(command, options, in.plan.pp);
  const PlanCost cost = Estimate(in.model, in.cluster, in.training, in.plan);
  const SimResult sim = SimulateOrRefuse(in, options);
  const double seconds = sim.time.total_s;
  const double tokens_per_s =
      seconds > 0 ? static_cast<double>(in.training.tokens_per_step()) / seconds : 0;
  const double mfu = Utilization(cost.model_flops_per_step, in.plan.world_size(),
                                 in.cluster.gpu.PeakFlops(in.training.precision), seconds);
  const std::string inputs = DescribeInputs(in);
  CheckFigures(cost, inputs);
  CheckFigures(sim.time, inputs);
  CheckFigure(tokens_per_s, "simulated tokens/s", inputs);
  CheckFigure(mfu, "simulated MFU", inputs);
  TraceFileStats trace;
  if (!options.trace.empty()) {
    try {
      trace = WriteTrace(sim, options.trace, ToPlanString(in.plan), options.trace_filter);
    } catch (const std::runtime_error& e) {
      throw InputError({"<command line>"}, "--trace", e.what());
    }
  }
  const int64_t most_work = StageWithMostWork(sim);
  const int64_t stage = options.stage >= 0 ? options.stage : most_work;
  if (options.format == "json") {
    nlohmann::json out;
    out["setup"] = SetupToJson(in);
    out["analytic"] = CostToJson(cost);
    out["simulated"] = SimToJson(sim, tokens_per_s, mfu);
    out["simulated"]["not_simulated"] = NotSimulated(in.plan);
    out["simulated"]["stage_with_most_work"] = most_work;
    if (!options.trace.empty())
      out["trace"] = {{"path", options.trace}, {"events", trace.events}, {"bytes", trace.bytes}};
    std::cout << ToJsonText(out) << "\n";
    return 0;
  }
  PrintTable(in, cost, sim, stage, most_work, tokens_per_s, mfu);
  if (!options.trace.empty())
    fmt::print("\nWrote the trace to {}: {}, {} of {} ops (--trace-microbatches and\n"
               "--trace-stages keep fewer). Open it in ui.perfetto.dev or chrome://tracing.\n",
               options.trace, GroupDigits(trace.bytes) + " bytes", GroupDigits(trace.events),
               GroupDigits(sim.ops));
  return 0;
}

}  // namespace

void AddSimulateCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<SimulateCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "simulate", "play one training step of a plan out in time (compute and communication "
                  "streams per rank, pipeline schedule, shared network tiers) and compare it "
                  "with the analytic estimate");
  AddSetupOptions(command, &options->setup);
  AddPlanInputOptions(command, &options->input);
  command->add_option("--trace", options->trace,
                      "write a Chrome/Perfetto trace (JSON) of the simulated step to this file")
      ->check(OutputFile());
  command->add_option("--trace-microbatches", options->trace_filter.microbatches,
                      "keep only the first N micro-batches in the trace (per-step ops stay)")
      ->check(IntegerInRange(1, kMaxGlobalBatch, "micro-batches"));
  command->add_option("--trace-stages", options->trace_filter.stages,
                      "keep only these pipeline stages in the trace, e.g. 0,3")
      ->delimiter(',');
  command->add_option("--stage", options->stage,
                      "the pipeline stage the table shows (default: the one with the most work, "
                      "as the analytic column)")
      ->check(IntegerInRange(0, kMaxGpus, "a pipeline stage"));
  AddFormatOption(command, &options->format);
  command->callback([command, options, exit_code] { *exit_code = RunSimulate(*command, *options); });
}

}  // namespace meshplan

