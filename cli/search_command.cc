// `meshplan search`: every valid plan for a setup, ranked by predicted tokens/s.
//
// Exit codes: 0 at least one plan fits; 2 bad input (unknown model, a world size or
// batch that no plan can split, a bad flag); 3 valid plans exist but none fits in
// memory (the output then says what would make one fit).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/search_report.h"
#include "cli/setup_options.h"
#include "planner/atomic_file.h"
#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/flops.h"
#include "planner/cost/offload.h"
#include "planner/export/export.h"
#include "planner/figure_check.h"
#include "planner/input_error.h"
#include "planner/limits.h"
#include "planner/names.h"
#include "planner/output_path.h"
#include "planner/plan_fields.h"
#include "planner/search/search.h"
#include "planner/search/search_advice.h"
#include "planner/search/search_benchmarks.h"
#include "planner/units_format.h"
#include "planner/validate/error_band.h"
#include "cli/search_simulate.h"

namespace meshplan {
namespace {

struct SearchCommandOptions {
  SetupOptions setup;
  int top = 10;
  std::string format = "table";
  std::string out;
  bool explain = false;
  std::string explain_plan;
  bool pareto = false;
  double headroom = kDefaultMemoryHeadroom;
  std::string memory_model = "detailed";
  int threads = 0;
  bool bench = false;
  bool allow_tp_across_nodes = false;
  bool even_stages = false;  // no uneven first / last pipeline stages
  std::string only;
  std::string dump;          // every evaluated candidate to this .csv / .jsonl file
  bool setup_given = false;  // any of --model, --cluster, --global-batch, --tokens-per-step,
                             // --seq, --precision
  int simulate_top = 0;      // re-rank the best K by simulation (cli/search_simulate.h)
  std::string export_target;  // --export: the best plan for this framework (meshplan export)
  std::string export_out;     // --export-out: where that goes (empty: after the tables)
};

// ---------------------------------------------------------------------------
// Benchmark

int RunBench(const SearchCommandOptions& o, const SearchOptions& base) {
  constexpr int kRepeats = 3;
  nlohmann::json results = nlohmann::json::array();
  const bool json = o.format == "json";
  if (!json)
    fmt::print("Plan-search benchmark: exhaustive search, median wall time of {} runs\n\n",
               kRepeats);
  for (const SearchBenchmarkCase& c : SearchBenchmarkCases()) {
    SetupOptions so;
    so.model = c.model;
    so.cluster = c.cluster;
    so.global_batch = c.global_batch;
    so.seq = c.seq_len;
    so.framework = o.setup.framework;  // empty: the GPU default
    const TrainingSetup s = ResolveSetup(so);
    std::vector<SearchResult> runs;
    for (int i = 0; i < kRepeats; ++i) runs.push_back(Search(s.model, s.cluster, s.training, base));
    std::sort(runs.begin(), runs.end(),
              [](const SearchResult& a, const SearchResult& b) { return a.wall_s < b.wall_s; });
    const SearchResult& r = runs[kRepeats / 2];
    if (json) {
      results.push_back({{"name", c.name},
                         {"model", c.model},
                         {"cluster", c.cluster},
                         {"gpus", s.cluster.world_size()},
                         {"global_batch", c.global_batch},
                         {"seq", c.seq_len},
                         {"framework", s.training.framework.name},
                         {"candidates", r.candidates},
                         {"valid", r.valid},
                         {"evaluated", r.valid + r.variants},
                         {"fitting", r.fitting},
                         {"wall_s", r.wall_s},
                         {"cpu_s", r.cpu_s},
                         {"evaluations_per_s", r.evaluations_per_s},
                         {"threads", r.threads},
                         {"best", r.top.empty() ? nlohmann::json() : RankedToJson(r.top.front())}});
      continue;
    }
    fmt::print("{}: {} ({} GPUs), global batch {} x {} tokens, {}\n", c.name, c.model,
               s.cluster.world_size(), c.global_batch, c.seq_len, s.training.framework.name);
    fmt::print("  candidates {}, evaluated {} (valid) + {} (prefetch / offload variants), "
               "fitting {}; {} step timings\n",
               GroupDigits(r.candidates), GroupDigits(r.valid), GroupDigits(r.variants),
               GroupDigits(r.fitting), GroupDigits(r.knobs.timings));
    fmt::print("  wall {:.3f} s on {} thread{} ({:.3f} s of CPU), {} evaluations/s\n", r.wall_s,
               r.threads, r.threads == 1 ? "" : "s", r.cpu_s,
               GroupDigits(static_cast<int64_t>(r.evaluations_per_s)));
    if (!r.top.empty())
      fmt::print("  best: {} ({} tokens/s, MFU {:.1f}%, {} per GPU)\n\n",
                 ToShortPlanString(r.top.front().plan),
                 GroupDigits(static_cast<int64_t>(r.top.front().cost.tokens_per_s)),
                 100 * r.top.front().cost.mfu, FormatGiB(r.top.front().cost.memory.total_bytes, 1));
  }
  if (json) std::cout << ToJsonText(nlohmann::json{{"benchmarks", results}}) << "\n";
  return 0;
}

// ---------------------------------------------------------------------------

// The flags as SearchOptions; throws InputError naming a flag that is out of range.
SearchOptions ToSearchOptions(const SearchCommandOptions& o) {
  const InputLocation flags{"<command line>"};
  if (o.top < 1) throw InputError(flags, "--top", "must be >= 1, got " + std::to_string(o.top));
  if (o.simulate_top < 0)
    throw InputError(flags, "--simulate-top", "must be >= 0, got " + std::to_string(o.simulate_top));
  if (o.threads < 0)
    throw InputError(flags, "--threads", "must be >= 0 (0 = all cores), got " +
                                             std::to_string(o.threads));
  CheckDistinctOutputs({{"--out", o.out}, {"--dump", o.dump}, {"--export-out", o.export_out}});
  if (!o.export_out.empty() && o.export_target.empty())
    throw InputError(flags, "--export-out", "needs --export TARGET (" +
                                                std::string(AllowedExportTargets()) + ")");
  SearchOptions options;
  options.top_k = std::max(o.top, o.simulate_top);  // --simulate-top K keeps K plans
  options.memory_headroom = o.headroom;
  options.memory_model = o.memory_model == "seed" ? MemoryModel::kSeed : MemoryModel::kDetailed;
  options.threads = o.threads;
  options.space.allow_tp_across_nodes = o.allow_tp_across_nodes;
  options.space.uneven_stages = !o.even_stages;
  options.space.pins = ParsePlanPins(o.only, "--only");
  return options;
}

// "searching: 12/40 meshes (30%)" on stderr, rewritten in place and cleared at the end.
void PrintProgress(int64_t done, int64_t total) {
  fmt::print(stderr, "\rsearching: {}/{} meshes ({:.0f}%)", done, total,
             total > 0 ? 100.0 * done / total : 100.0);
  if (done == total) fmt::print(stderr, "\r{:60}\r", "");
  std::fflush(stderr);
}

// What one `meshplan search` found: the search, the advice when nothing fits, and the
// best plans re-ranked by simulation (--simulate-top).
struct SearchOutcome {
  SearchResult result;
  int64_t dump_rows = 0;  // candidates written by --dump
  std::optional<FitAdvice> advice;
  std::vector<SimulatedPlan> simulated;
  std::string exported;  // --export: the best plan as the target's text
};

// --dump: the file the search streams every evaluated candidate into (an InputError for
// a bad extension or a file that cannot be created); nullopt without the flag.
std::optional<CandidateDump> OpenDump(const SearchCommandOptions& o) {
  if (o.dump.empty()) return std::nullopt;
  CandidateDump::FormatOf(o.dump, "--dump");  // the extension first: exit 2, nothing created
  try {
    return std::optional<CandidateDump>(std::in_place, o.dump, "--dump");
  } catch (const std::runtime_error& e) {
    throw InputError({"<command line>"}, "--dump", e.what());
  }
}

// Runs the search and what follows from it; throws InputError when no plan is valid (the
// dump, uncommitted, then leaves no file). A dump is committed once the search is done.
SearchOutcome SearchSetup(const SearchCommandOptions& o, const TrainingSetup& s,
                          SearchOptions options) {
  SearchOutcome out;
  std::optional<CandidateDump> dump = OpenDump(o);
  options.dump = dump ? &*dump : nullptr;
  out.result = Search(s.model, s.cluster, s.training, options);
  options.dump = nullptr;
  const SearchResult& r = out.result;
  if (r.valid == 0)
    throw InputError({"<command line>"}, "search",
                     DescribeNoValidPlan(r, s.model, s.cluster, s.training, options));
  for (const RankedPlan& p : r.top) CheckFigures(p.cost, DescribeInputs({s, p.plan}));
  if (dump) {
    try {
      dump->Commit();
    } catch (const std::runtime_error& e) {  // a write that failed (a full disk): input's side
      throw InputError({"<command line>"}, "--dump", e.what());
    }
    out.dump_rows = dump->rows_written();
  }
  if (r.fitting == 0) out.advice = AdviseFit(s.model, s.cluster, s.training, options, r);
  try {
    out.simulated = SimulateTopPlans(s, r.top, o.simulate_top, o.threads);
  } catch (const SimulationTooLarge& e) {
    throw InputError({"<command line>"}, "--simulate-top",
                     std::string(e.what()) + "; lower --global-batch or drop --simulate-top");
  }
  return out;
}

// --format json: the result, the advice, the simulated ranking and the --out path.
void PrintSearchJson(const SearchCommandOptions& o, const TrainingSetup& s,
                     const SearchOptions& options, const SearchOutcome& out) {
  const SearchResult& r = out.result;
  nlohmann::json j = ResultToJson(r, s, options);
  if (out.advice) j["no_fit"] = AdviceToJson(*out.advice);
  j["error_band"] = ErrorBandToJson(ErrorBandFor(s.training.framework, s.cluster.gpu));
  if (o.simulate_top > 0) j["simulated"] = SimulatedRankingToJson(out.simulated);
  if (!o.out.empty() && !r.top.empty()) j["out"] = o.out;
  if (!out.exported.empty())
    j["export"] = {{"target", o.export_target}, {"text", out.exported},
                   {"out", o.export_out.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.export_out)}};
  if (!o.dump.empty()) j["dump"] = {{"path", o.dump}, {"rows", out.dump_rows}};
  std::cout << ToJsonText(j) << "\n";
}

// The setup line, the counts, the ranked plans and what --simulate-top, --pareto,
// --explain and --explain-plan asked for.
void PrintSearchTables(const SearchCommandOptions& o, const TrainingSetup& s,
                       const SearchOptions& options, const SearchOutcome& out) {
  const SearchResult& r = out.result;
  fmt::print("meshplan search: {}\n", SetupLine(s, options));
  fmt::print("{} candidates, {} valid{}, {} fit in {} per GPU ({:.0f}% headroom); {:.3f} s on {} "
             "thread{} ({} plans/s)\n",
             GroupDigits(r.candidates), GroupDigits(r.valid),
             r.variants > 0 ? " + " + GroupDigits(r.variants) + " prefetch / offload variants" : "",
             GroupDigits(r.fitting), FormatGiB(UsableBytes(s.cluster.gpu, options.memory_headroom), 1),
             100 * options.memory_headroom, r.wall_s, r.threads,
             r.threads == 1 ? "" : "s", GroupDigits(static_cast<int64_t>(r.evaluations_per_s)));
  if (!r.top.empty()) {
    fmt::print("\n");
    // --simulate-top K may have kept more than --top plans: print --top of them.
    const std::vector<RankedPlan> shown(
        r.top.begin(), r.top.begin() + std::min<size_t>(r.top.size(), static_cast<size_t>(o.top)));
    PrintPlanTable(shown, s.cluster, "rank", true);
    const ErrorBand band = ErrorBandFor(s.training.framework, s.cluster.gpu);
    fmt::print("Step times{} {} (meshplan validate).\n", band.runs > 0 ? "" : ":", DescribeBand(band));
    fmt::print("TFLOP/s/GPU and MFU: {}.\n", kModelFlopsConvention);
    if (s.training.precision == Precision::kFp8)  // name both peaks (docs/cost_model.md 4)
      fmt::print("MFU is against the dense bf16 peak ({:.1f} TFLOP/s); against the dense FP8 peak "
                 "({:.1f} TFLOP/s) the best plan's is {:.1f}%.\n",
                 s.cluster.gpu.peak_flops_bf16 / 1e12, s.cluster.gpu.peak_flops_fp8 / 1e12,
                 100 * r.top.front().cost.mfu_fp8_peak);
  }
  if (!out.simulated.empty()) PrintSimulatedRanking(out.simulated);
  if (o.pareto && !r.pareto.empty()) {
    fmt::print("\nPareto frontier (no other plan uses less memory AND runs faster), by memory:\n");
    PrintPlanTable(r.pareto, s.cluster, "", false);
  }
  if (o.explain) PrintExplain(r, s, options);
  if (r.probe) PrintProbe(*r.probe, r, s, options);
}

// After a search that found fitting plans: where --out went, and for a bare
// `meshplan search` the commands to try next.
void PrintNextSteps(const SearchCommandOptions& o, const SearchOutcome& out) {
  if (!o.out.empty())
    fmt::print("\nWrote the best plan to {} (meshplan run / compare / estimate read it).\n", o.out);
  if (!out.exported.empty() && !o.export_out.empty())
    fmt::print("Wrote the best plan for {} to {} (meshplan export).\n", o.export_target, o.export_out);
  else if (!out.exported.empty())
    fmt::print("\nThe best plan for {} (meshplan export):\n{}", o.export_target, out.exported);
  if (!o.setup_given && !o.explain && !o.pareto && o.explain_plan.empty() && o.out.empty() &&
      o.dump.empty()) {
    fmt::print("\nThis is the built-in default setup. Next:\n"
               "  meshplan search --explain                 why the other candidates were removed\n"
               "  meshplan search --pareto                  the memory vs tokens/s trade-off\n"
               "  meshplan search --out plan.yaml           save the best plan for run / compare\n"
               "  meshplan search --model llama3-70b --cluster 64xH100 --global-batch 512\n");
  }
}

// Flags -> search -> --out file -> JSON or tables; 0, or kExitNoPlanFits when none fits.
int RunSearch(const SearchCommandOptions& o) {
  SearchOptions options = ToSearchOptions(o);
  if (o.bench) {  // it times the search alone and prints only the timings
    const std::pair<const char*, bool> outputs[] = {
        {"--dump", !o.dump.empty()},          {"--explain", o.explain},
        {"--explain-plan", !o.explain_plan.empty()}, {"--pareto", o.pareto},
        {"--out", !o.out.empty()},            {"--simulate-top", o.simulate_top > 0},
        {"--export", !o.export_target.empty()}, {"--export-out", !o.export_out.empty()}};
    for (const auto& [flag, given] : outputs)
      if (given)
        throw InputError({"<command line>"}, flag,
                         "cannot be combined with --bench (the benchmark times the search alone "
                         "and prints only its timings)");
  }
  if (o.bench && o.setup_given)
    throw InputError({"<command line>"}, "--bench",
                     "runs its two built-in setups (530B on 5120 A100, 405B on 16384 H100): "
                     "drop --model, --cluster, --global-batch, --tokens-per-step, --seq and "
                     "--precision (--framework, --only and --threads apply)");
  if (o.bench) return RunBench(o, options);
  const TrainingSetup s = ResolveSetup(o.setup);
  if (!o.explain_plan.empty())
    options.probe = ParsePlanOption(o.explain_plan, s.cluster.world_size(), "--explain-plan");
  ParallelPlan pinned_offload;  // offload pinned on: the cluster must say what its host has
  options.space.pins.SetKnobs(&pinned_offload);
  RequireHostData(s.cluster, pinned_offload, {"--cluster " + o.setup.cluster});
  const bool json = o.format == "json";
  if (!json && isatty(STDERR_FILENO)) options.progress = PrintProgress;
  SearchOutcome out = SearchSetup(o, s, options);
  if (!out.result.top.empty()) {
    const PlanFile best{s.model, s.cluster, s.training, out.result.top.front().plan};
    // Exported first: a plan the target cannot express exits 2 before any file is written.
    if (!o.export_target.empty()) {
      ExportTarget target;
      ParseExportTarget(o.export_target, &target);  // checked by AddExportTargetOption
      out.exported = ExportPlan(best, target, o.out.empty() ? "<search's best plan>" : o.out);
    }
    if (!o.out.empty()) SavePlanFile(o.out, best);
    if (!o.export_out.empty()) WriteFileAtomically(o.export_out, out.exported);
  }
  if (json) {
    PrintSearchJson(o, s, options, out);
  } else {
    PrintSearchTables(o, s, options, out);
    if (!o.dump.empty())
      fmt::print("\nWrote all {} evaluated candidates to {} (grid order).\n",
                 GroupDigits(out.dump_rows), o.dump);
    if (out.advice) PrintNoFit(*out.advice, out.result, s, options);
    else PrintNextSteps(o, out);
  }
  return out.advice ? kExitNoPlanFits : 0;
}

}  // namespace

void AddSearchCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<SearchCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "search",
      "Search every valid parallel plan (dp x tp x pp x cp, ep for MoE models, ZeRO 0-3, sp, "
      "micro-batch, recompute, pipeline schedule) and rank the ones that fit by predicted tokens/s.\n"
      "Exit codes: 0 plans found, 2 bad input or no valid plan, 3 valid plans exist but none "
      "fits in memory.");
  AddSetupOptions(cmd, &options->setup);
  cmd->add_option("--top", options->top, "how many plans to print")
      ->check(IntegerInRange(1, 1'000'000, "plans"))
      ->capture_default_str();
  AddFormatOption(cmd, &options->format);
  cmd->add_option("--out", options->out,
                  "write the best plan (with model, cluster, training) to this YAML plan file")
      ->check(OutputFile());
  cmd->add_flag("--explain", options->explain,
                "print how many candidates each rule and the memory limit removed");
  cmd->add_option("--explain-plan", options->explain_plan,
                  "say why this plan (a plan string, e.g. \"dp=2,tp=4\"; dp left out fills the GPUs) "
                  "was rejected, or its rank")
      ->check(NonEmptyText("a plan string"));
  cmd->add_flag("--pareto", options->pareto, "print the memory-vs-tokens/s Pareto frontier");
  cmd->add_option("--simulate-top", options->simulate_top,
                  "re-rank the best K plans by simulating one step of each (meshplan simulate)")
      ->check(IntegerInRange(0, kMaxSimulateTop, "plans; kMaxSimulateTop, docs/limits.md"))
      ->capture_default_str();
  AddHeadroomOption(cmd, &options->headroom);
  cmd->add_option("--memory-model", options->memory_model, "seed | detailed")
      ->check(CLI::IsMember({"seed", "detailed"}))
      ->capture_default_str();
  cmd->add_option("--threads", options->threads, "worker threads (0 = all cores)")
      ->check(IntegerInRange(0, kMaxThreads, "kMaxThreads, docs/limits.md"))
      ->capture_default_str();
  cmd->add_flag("--allow-tp-across-nodes", options->allow_tp_across_nodes,
                "let a tensor-parallel group span nodes (default: tp divides the GPUs per node)");
  cmd->add_flag("--even-stages", options->even_stages,
                "try even pipeline stages only (default: also the split with a lighter first and "
                "last stage)");
  cmd->add_option("--only", options->only,
                  "pin plan keys, search the rest (e.g. \"tp=1,pp=1\" or \"zero=3\"; each key once; "
                  "any plan-string key: " + PlanFieldKeyList() + ")")
      ->check(NonEmptyText("plan keys to pin"));
  cmd->add_option("--dump", options->dump,
                  "write every evaluated candidate (plan, memory and time columns, fits, reason) "
                  "to this file as it is searched, in grid order: .csv (with a header) or .jsonl "
                  "(JSON Lines); written whole or not at all")
      ->check(OutputFile());
  AddExportTargetOption(cmd, "--export", &options->export_target,
                        "also write the best plan as this framework's configuration "
                        "(meshplan export; exit 2, nothing written, when it cannot express it)");
  cmd->add_option("--export-out", options->export_out,
                  "write --export's text to this file (default: after the tables)")
      ->check(OutputFile());
  cmd->add_flag("--bench", options->bench,
                "run the two built-in benchmark searches (530B on 5120 A100, 405B on 16384 H100) "
                "under --framework (default: megatron-core)");
  cmd->callback([cmd, options, exit_code] {
    for (const char* flag :
         {"--model", "--cluster", "--global-batch", "--tokens-per-step", "--seq", "--precision"})
      if (cmd->count(flag) > 0) options->setup_given = true;
    *exit_code = RunSearch(*options);
  });
}

}  // namespace meshplan
