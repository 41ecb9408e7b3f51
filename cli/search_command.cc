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
#include "cli/setup_options.h"
#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/cost_report.h"
#include "planner/cost/offload.h"
#include "planner/input_error.h"
#include "planner/limits.h"
#include "planner/names.h"
#include "planner/search/search.h"
#include "planner/search/search_advice.h"
#include "planner/search/search_benchmarks.h"
#include "planner/units_format.h"
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
  double headroom = 0.05;
  std::string memory_model = "detailed";
  int threads = 0;
  bool bench = false;
  bool allow_tp_across_nodes = false;
  bool even_stages = false;  // no uneven first / last pipeline stages
  std::string only;
  std::string dump;          // every evaluated candidate to this .csv / .jsonl file
  bool setup_given = false;  // any of --model, --cluster, --global-batch, --seq, --precision
  int simulate_top = 0;      // re-rank the best K by simulation (cli/search_simulate.h)
};

// ---------------------------------------------------------------------------
// Formatting helpers

// A step-time cell of the plan table: a bare "0" for nothing, so empty columns read as empty.
std::string TimeCell(double s) { return s == 0 ? "0" : FormatSeconds(s); }

double StatesBytes(const MemoryBreakdown& m) {
  return m.params_bytes + m.grads_bytes + m.optimizer_bytes;
}
double OtherBytes(const MemoryBreakdown& m) {
  return m.logits_bytes + m.comm_buffer_bytes + m.gathered_params_bytes + m.transient_bytes +
         m.runtime_bytes();
}

std::string SetupLine(const TrainingSetup& s, const SearchOptions& options) {
  std::string line = fmt::format(
      "{} on {} ({} x {}, {} each), global batch {} x {} tokens, {} precision", s.model.name,
      s.cluster.name, s.cluster.world_size(), s.cluster.gpu.name,
      FormatGB(static_cast<double>(s.cluster.gpu.memory_bytes), 1), s.training.global_batch,
      s.training.seq_len, ToString(s.training.precision));
  if (!options.space.pins.empty()) line += ", only " + options.space.pins.ToString();
  return line;
}

// The ranked plans as a table: memory with its main parts, the step time split, speed.
void PrintPlanTable(const std::vector<RankedPlan>& plans, const ClusterSpec& cluster,
                    const char* first_column, bool number_rows) {
  size_t plan_width = 4;
  for (const RankedPlan& r : plans) plan_width = std::max(plan_width, ToShortPlanString(r.plan).size());
  const double capacity = static_cast<double>(cluster.gpu.memory_bytes);
  fmt::print("{:>4}  {:<{}}  {:>16}  {:>8}  {:>8}  {:>8}  {:>8}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  "
             "{:>9}  {:>9}  {:>11}  {:>5}\n",
             first_column, "plan", plan_width, "memory/GPU", "states", "activ.", "other", "host",
             "compute", "exp.comm", "bubble", "optim.", "offload", "slowdown", "step", "tokens/s",
             "MFU");
  int row = 0;
  for (const RankedPlan& r : plans) {
    ++row;
    const MemoryBreakdown& m = r.cost.memory;
    const StepTimeBreakdown& t = r.cost.time;
    const std::string memory =
        fmt::format("{} {:>3.0f}%", FormatGB(m.total_bytes, 1), PercentOf(m.total_bytes, capacity));
    const double host = m.host_total_bytes();
    fmt::print(
        "{:>4}  {:<{}}  {:>16}  {:>8}  {:>8}  {:>8}  {:>8}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  "
        "{:>9}  {:>11}  {:>4.1f}%\n",
        number_rows ? std::to_string(row) : std::string(""), ToShortPlanString(r.plan), plan_width,
        memory, FormatGB(StatesBytes(m), 1), FormatGB(m.activations_bytes, 1),
        FormatGB(OtherBytes(m), 1), host > 0 ? FormatGB(host, 1) : std::string("0"),
        TimeCell(t.compute_s), TimeCell(t.exposed_comm_s.sum()), TimeCell(t.bubble_s),
        TimeCell(t.optimizer_s), TimeCell(t.offload_s), TimeCell(t.overlap_slowdown_s),
        TimeCell(t.total_s), GroupDigits(static_cast<int64_t>(r.cost.tokens_per_s)),
        100 * r.cost.mfu);
  }
}

// How the overlap and offload choices went (planner/search/knob_variants.h).
void PrintKnobExplain(const KnobTally& k, const TrainingSetup& s, const SearchOptions& options) {
  const PlanPins& pins = options.space.pins;
  fmt::print("\nOverlap and offload choices, tried on every valid plan ({} step timings in all):\n",
             GroupDigits(k.timings));
  if (pins.tp_comm_overlap)
    fmt::print("  tp_overlap   pinned to {}\n", *pins.tp_comm_overlap ? 1 : 0);
  else
    fmt::print("  tp_overlap   1 on {} plans with tp > 1, 0 on {} (the {:.0f}% compute slowdown "
               "of overlapping costs more than the TP time it hides)\n",
               GroupDigits(k.tp_overlap_on), GroupDigits(k.tp_overlap_off),
               100 * s.cluster.gpu.comm_overlap_slowdown);
  if (pins.dp_comm_overlap)
    fmt::print("  dp_overlap   pinned to {}\n", *pins.dp_comm_overlap ? 1 : 0);
  else
    fmt::print("  dp_overlap   1 on all {} plans with dp*cp > 1: 0 only exposes the gradient sync "
               "(same memory, never faster: dominated, not timed)\n",
               GroupDigits(k.dp_overlap_dominated));
  if (pins.zero3_prefetch)
    fmt::print("  prefetch     pinned to {}\n", *pins.zero3_prefetch);
  else
    fmt::print("  prefetch     1; 0 tried on {} zero=3 plans that did not fit, {} then fit "
               "(depths >= 2 time as 1 with more memory: pin them with --only prefetch=N)\n",
               GroupDigits(k.prefetch0_tried), GroupDigits(k.prefetch0_fit));
  if (!s.cluster.host.known()) {
    fmt::print("  offload      not tried: cluster {} has no host: block (host memory, link, CPU "
               "optimizer rate)\n", s.cluster.name);
    return;
  }
  fmt::print("  offload      tried on plans that did not fit: {} variants evaluated, {} fit, {} "
             "within GPU memory but {};\n               skipped: {} combinations that could not "
             "save enough, {} holding a smaller one that fits (dominated)\n",
             GroupDigits(k.offload_tried), GroupDigits(k.offload_fit),
             GroupDigits(k.host_memory_exceeded), kHostMemoryExceeded,
             GroupDigits(k.offload_pruned), GroupDigits(k.offload_dominated));
}

void PrintExplain(const SearchResult& r, const TrainingSetup& s, const SearchOptions& options) {
  fmt::print("\nWhy candidates were removed (each counted under the first rule it breaks, in "
             "check order;\n'in all' counts every candidate that breaks the rule):\n");
  fmt::print("  {:<26} {:>14}\n", "candidates", GroupDigits(r.candidates));
  for (int c = 0; c < kNumPlanConstraints; ++c) {
    const ConstraintTally& tally = r.constraints[c];
    if (tally.violated == 0) continue;
    const auto constraint = static_cast<PlanConstraint>(c);
    fmt::print("  {:<26} {:>14}  ({} in all){}\n", ConstraintId(constraint),
               "-" + GroupDigits(tally.removed), GroupDigits(tally.violated),
               tally.removed > 0
                   ? "  e.g. " + ExampleMessage(r, constraint, s.model, s.cluster, s.training, options)
                   : std::string());
  }
  fmt::print("  {:<26} {:>14}  (each evaluated with the cost model)\n", "valid",
             GroupDigits(r.valid));
  if (r.variants > 0)
    fmt::print("  {:<26} {:>14}  (prefetch / offload variants of plans that did not fit)\n",
               "variants", "+" + GroupDigits(r.variants));
  fmt::print("  {:<26} {:>14}  (peak memory above {} usable{})\n", "memory_limit",
             "-" + GroupDigits(r.removed_by_memory - r.removed_by_host_memory),
             FormatGB(UsableBytes(s.cluster.gpu, options.memory_headroom), 1),
             r.removed_by_host_memory > 0 ? "" : "");
  if (r.removed_by_host_memory > 0)
    fmt::print("  {:<26} {:>14}  (offloaded bytes above the node's {} of host memory)\n",
               kHostMemoryExceeded, "-" + GroupDigits(r.removed_by_host_memory),
               FormatGB(static_cast<double>(s.cluster.host.memory_bytes_per_node), 0));
  fmt::print("  {:<26} {:>14}\n", "fitting", GroupDigits(r.fitting));
  PrintKnobExplain(r.knobs, s, options);
}

void PrintProbe(const ProbeReport& p, const SearchResult& r, const TrainingSetup& s,
                const SearchOptions& options) {
  fmt::print("\nPlan {}:\n", ToShortPlanString(p.plan));
  if (!(p.candidate == p.plan))
    fmt::print("  the search counts it as {} (the same plan: a single stage has no schedule; "
               "ZeRO over one rank shards nothing)\n",
               ToShortPlanString(p.candidate));
  if (!p.violations.empty()) {
    fmt::print("  rejected: it breaks {} rule{}:\n", p.violations.size(),
               p.violations.size() == 1 ? "" : "s");
    for (const PlanViolation& v : p.violations)
      fmt::print("    {}: {}\n", v.constraint, v.message);
    return;
  }
  if (!p.in_space)
    fmt::print("  valid, but outside the searched space (--only {})\n",
               options.space.pins.ToString());
  const PlanCost& cost = *p.cost;
  if (!cost.fits && !cost.fits_host &&
      cost.memory.total_bytes <= UsableBytes(s.cluster.gpu, options.memory_headroom)) {
    fmt::print("  does not fit: {}\n", cost.reason);  // host_memory_exceeded: ...
    return;
  }
  if (!cost.fits) {
    const MemoryBreakdown& m = cost.memory;
    fmt::print("  does not fit: needs {}, has {} ({} minus {:.0f}% headroom)\n",
               FormatGB(m.total_bytes, 1),
               FormatGB(UsableBytes(s.cluster.gpu, options.memory_headroom), 1),
               FormatGB(static_cast<double>(s.cluster.gpu.memory_bytes), 1),
               100 * options.memory_headroom);
    fmt::print(
        "  memory: states {} (params {}, grads {}, optimizer {}), activations {}, other {}"
        " (peak in {})\n",
        FormatGB(StatesBytes(m), 1), FormatGB(m.params_bytes, 1), FormatGB(m.grads_bytes, 1),
        FormatGB(m.optimizer_bytes, 1), FormatGB(m.activations_bytes, 1),
        FormatGB(OtherBytes(m), 1), m.peak_phase);
    return;
  }
  if (p.rank) {
    fmt::print("  fits ({} of {} usable); rank {} of {} fitting plans: {} tokens/s, MFU {:.1f}%\n",
               FormatGB(cost.memory.total_bytes, 1),
               FormatGB(UsableBytes(s.cluster.gpu, options.memory_headroom), 1),
               GroupDigits(*p.rank), GroupDigits(r.fitting),
               GroupDigits(static_cast<int64_t>(cost.tokens_per_s)), 100 * cost.mfu);
  } else {
    fmt::print("  fits ({}): {} tokens/s, MFU {:.1f}%\n", FormatGB(cost.memory.total_bytes, 1),
               GroupDigits(static_cast<int64_t>(cost.tokens_per_s)), 100 * cost.mfu);
  }
  if (!r.top.empty() && !(r.top.front().plan == p.candidate))
    fmt::print("  the best plan {} reaches {} tokens/s ({:.2f}x)\n",
               ToShortPlanString(r.top.front().plan),
               GroupDigits(static_cast<int64_t>(r.top.front().cost.tokens_per_s)),
               r.top.front().cost.tokens_per_s / cost.tokens_per_s);
}

void PrintNoFit(const FitAdvice& advice, const SearchResult& r, const TrainingSetup& s,
                const SearchOptions& options) {
  fmt::print(
      "\nNo plan fits: all {} valid plans need more than the {} usable per GPU ({} "
      "minus {:.0f}% headroom).\n",
      GroupDigits(r.valid), FormatGB(advice.usable_bytes, 1),
      FormatGB(static_cast<double>(s.cluster.gpu.memory_bytes), 1), 100 * options.memory_headroom);
  if (advice.smallest) {
    const MemoryBreakdown& m = advice.smallest->cost.memory;
    fmt::print("The smallest is {}: {} per GPU (states {}, activations {}, other {})",
               ToShortPlanString(advice.smallest->plan), FormatGB(m.total_bytes, 1),
               FormatGB(StatesBytes(m), 1), FormatGB(m.activations_bytes, 1),
               FormatGB(OtherBytes(m), 1));
    if (!advice.levers.empty()) {
      std::string levers;
      for (const std::string& l : advice.levers) levers += (levers.empty() ? "" : ", ") + l;
      fmt::print(",\nalready using {}", levers);
    }
    fmt::print(".\n");
  }
  const std::string skipped =
      advice.skipped_searches == 0
          ? ""
          : fmt::format("{} larger search{} not run (kMaxSearchCandidates, kMaxAdviceCandidates: "
                        "docs/limits.md).\n",
                        advice.skipped_searches, advice.skipped_searches == 1 ? " was" : "es were");
  if (advice.suggestions.empty()) {
    fmt::print("Nothing tried makes a plan fit (up to 64x the GPUs, 1/64 of the sequence, bf16, "
               "no headroom).\n{}",
               skipped);
    return;
  }
  fmt::print("{}", skipped);
  fmt::print("What would make one fit (each found by searching again with one change):\n");
  for (const FitSuggestion& f : advice.suggestions)
    fmt::print("  {:<28} {}\n", f.change, f.why);
}

// ---------------------------------------------------------------------------
// JSON

nlohmann::json PlanFieldsToJson(const ParallelPlan& p) {
  return {{"dp", p.dp},
          {"tp", p.tp},
          {"pp", p.pp},
          {"cp", p.cp},
          {"ep", p.ep},
          {"zero", p.zero_stage},
          {"sp", p.sequence_parallel},
          {"mbs", p.micro_batch},
          {"recompute", ToString(p.recompute)},
          {"schedule", ToString(p.schedule)},
          {"vpp", p.virtual_stages},
          {"first_stage_layers", p.first_stage_layers},
          {"last_stage_layers", p.last_stage_layers}};
}

nlohmann::json RankedToJson(const RankedPlan& r) {
  return {{"plan", ToPlanString(r.plan)},
          {"plan_short", ToShortPlanString(r.plan)},
          {"fields", PlanFieldsToJson(r.plan)},
          {"cost", CostToJson(r.cost)}};
}

nlohmann::json ResultToJson(const SearchResult& r, const TrainingSetup& s, const SearchOptions& options) {
  nlohmann::json j;
  j["setup"] = {{"model", s.model.name},
                {"cluster", s.cluster.name},
                {"gpu", s.cluster.gpu.name},
                {"gpus", s.cluster.world_size()},
                {"gpu_memory_bytes", s.cluster.gpu.memory_bytes},
                {"global_batch", s.training.global_batch},
                {"seq", s.training.seq_len},
                {"precision", ToString(s.training.precision)},
                {"memory_model", options.memory_model == MemoryModel::kSeed ? "seed" : "detailed"},
                {"headroom", options.memory_headroom},
                {"usable_bytes", UsableBytes(s.cluster.gpu, options.memory_headroom)},
                {"allow_tp_across_nodes", options.space.allow_tp_across_nodes},
                {"uneven_stages", options.space.uneven_stages},
                {"only", options.space.pins.ToString()}};
  j["candidates"] = r.candidates;
  j["valid"] = r.valid;
  j["variants"] = r.variants;
  j["evaluated"] = r.valid + r.variants;
  j["fitting"] = r.fitting;
  j["wall_s"] = r.wall_s;
  j["cpu_s"] = r.cpu_s;
  j["evaluations_per_s"] = r.evaluations_per_s;
  j["threads"] = r.threads;
  nlohmann::json constraints = nlohmann::json::array();
  for (int c = 0; c < kNumPlanConstraints; ++c) {
    const ConstraintTally& t = r.constraints[c];
    const auto constraint = static_cast<PlanConstraint>(c);
    nlohmann::json e = {{"id", ConstraintId(constraint)},
                        {"removed", t.removed},
                        {"violated", t.violated}};
    if (t.example) {
      e["example_plan"] = ToShortPlanString(*t.example);
      e["example"] = ExampleMessage(r, constraint, s.model, s.cluster, s.training, options);
    }
    constraints.push_back(std::move(e));
  }
  const KnobTally& k = r.knobs;
  j["explain"] = {{"constraints", std::move(constraints)},
                  {"memory_limit", r.removed_by_memory - r.removed_by_host_memory},
                  {kHostMemoryExceeded, r.removed_by_host_memory},
                  {"knobs",
                   {{"timings", k.timings},
                    {"tp_overlap_on", k.tp_overlap_on},
                    {"tp_overlap_off", k.tp_overlap_off},
                    {"dp_overlap_dominated", k.dp_overlap_dominated},
                    {"prefetch0_tried", k.prefetch0_tried},
                    {"prefetch0_fit", k.prefetch0_fit},
                    {"offload_tried", k.offload_tried},
                    {"offload_fit", k.offload_fit},
                    {"offload_pruned", k.offload_pruned},
                    {"offload_dominated", k.offload_dominated},
                    {"host_memory_exceeded", k.host_memory_exceeded}}}};
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < r.top.size(); ++i) {
    nlohmann::json e = RankedToJson(r.top[i]);
    e["rank"] = i + 1;
    top.push_back(std::move(e));
  }
  j["top"] = std::move(top);
  nlohmann::json pareto = nlohmann::json::array();
  for (const RankedPlan& p : r.pareto)
    pareto.push_back({{"plan", ToPlanString(p.plan)},
                      {"plan_short", ToShortPlanString(p.plan)},
                      {"memory_bytes", p.cost.memory.total_bytes},
                      {"tokens_per_s", p.cost.tokens_per_s},
                      {"mfu", p.cost.mfu}});
  j["pareto"] = std::move(pareto);
  if (r.smallest) j["smallest"] = RankedToJson(*r.smallest);
  if (r.probe) {
    const ProbeReport& p = *r.probe;
    nlohmann::json violations = nlohmann::json::array();
    for (const PlanViolation& v : p.violations)
      violations.push_back({{"constraint", v.constraint}, {"message", v.message}});
    j["probe"] = {{"plan", ToPlanString(p.plan)},
                  {"candidate", ToPlanString(p.candidate)},
                  {"valid", p.violations.empty()},
                  {"violations", std::move(violations)},
                  {"in_space", p.in_space}};
    if (p.cost) {
      j["probe"]["fits"] = p.cost->fits;
      j["probe"]["cost"] = CostToJson(*p.cost);
    }
    if (p.rank) j["probe"]["rank"] = *p.rank;
  }
  return j;
}

nlohmann::json AdviceToJson(const FitAdvice& advice) {
  nlohmann::json suggestions = nlohmann::json::array();
  for (const FitSuggestion& f : advice.suggestions)
    suggestions.push_back({{"change", f.change},
                           {"why", f.why},
                           {"best", RankedToJson(f.best)},
                           {"fitting", f.search.fitting}});
  nlohmann::json j = {{"usable_bytes", advice.usable_bytes},
                      {"levers_used", advice.levers},
                      {"skipped_searches", advice.skipped_searches},
                      {"suggestions", std::move(suggestions)}};
  if (advice.smallest) j["smallest"] = RankedToJson(*advice.smallest);
  return j;
}

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
    fmt::print("{}: {} ({} GPUs), global batch {} x {} tokens\n", c.name, c.model,
               s.cluster.world_size(), c.global_batch, c.seq_len);
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
                 100 * r.top.front().cost.mfu, FormatGB(r.top.front().cost.memory.total_bytes, 1));
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
  SearchOptions options;
  options.top_k = std::max(o.top, o.simulate_top);  // --simulate-top K keeps K plans
  options.memory_headroom = o.headroom;
  options.memory_model = o.memory_model == "seed" ? MemoryModel::kSeed : MemoryModel::kDetailed;
  options.threads = o.threads;
  options.space.allow_tp_across_nodes = o.allow_tp_across_nodes;
  options.space.uneven_stages = !o.even_stages;
  options.space.pins = ParsePlanPins(o.only, "--only");
  if (!o.explain_plan.empty()) options.probe = ParsePlanString(o.explain_plan, "--explain-plan");
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
  if (dump) {
    dump->Commit();
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
  if (o.simulate_top > 0) j["simulated"] = SimulatedRankingToJson(out.simulated);
  if (!o.out.empty() && !r.top.empty()) j["out"] = o.out;
  if (!o.dump.empty()) j["dump"] = {{"path", o.dump}, {"rows", out.dump_rows}};
  std::cout << ToJsonText(j) << "\n";
}

// The setup line, the counts, the ranked plans and what --simulate-top, --pareto,
// --explain and --explain-plan asked for.
void PrintSearchTables(const SearchCommandOptions& o, const TrainingSetup& s,
                       const SearchOptions& options, const SearchOutcome& out) {
  const SearchResult& r = out.result;
  fmt::print("meshplan search: {}\n", SetupLine(s, options));
  fmt::print("{} candidates, {} valid{}, {} fit in {} per GPU; {:.3f} s on {} thread{} ({} plans/s)\n",
             GroupDigits(r.candidates), GroupDigits(r.valid),
             r.variants > 0 ? " + " + GroupDigits(r.variants) + " prefetch / offload variants" : "",
             GroupDigits(r.fitting),
             FormatGB(UsableBytes(s.cluster.gpu, options.memory_headroom), 1), r.wall_s, r.threads,
             r.threads == 1 ? "" : "s", GroupDigits(static_cast<int64_t>(r.evaluations_per_s)));
  if (!r.top.empty()) {
    fmt::print("\n");
    // --simulate-top K may have kept more than --top plans: print --top of them.
    const std::vector<RankedPlan> shown(
        r.top.begin(), r.top.begin() + std::min<size_t>(r.top.size(), static_cast<size_t>(o.top)));
    PrintPlanTable(shown, s.cluster, "rank", true);
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
void PrintNextSteps(const SearchCommandOptions& o) {
  if (!o.out.empty())
    fmt::print("\nWrote the best plan to {} (meshplan run / compare / estimate read it).\n", o.out);
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
  if (o.bench && !o.dump.empty())
    throw InputError({"<command line>"}, "--dump",
                     "cannot be combined with --bench (the benchmark times the search alone)");
  if (o.bench) return RunBench(o, options);
  const TrainingSetup s = ResolveSetup(o.setup);
  ParallelPlan pinned_offload;  // offload pinned on: the cluster must say what its host has
  options.space.pins.SetKnobs(&pinned_offload);
  RequireHostData(s.cluster, pinned_offload, {"--cluster " + o.setup.cluster});
  const bool json = o.format == "json";
  if (!json && isatty(STDERR_FILENO)) options.progress = PrintProgress;
  const SearchOutcome out = SearchSetup(o, s, options);
  if (!o.out.empty() && !out.result.top.empty())
    SavePlanFile(o.out, PlanFile{s.model, s.cluster, s.training, out.result.top.front().plan});
  if (json) {
    PrintSearchJson(o, s, options, out);
  } else {
    PrintSearchTables(o, s, options, out);
    if (!o.dump.empty())
      fmt::print("\nWrote all {} evaluated candidates to {} (grid order).\n",
                 GroupDigits(out.dump_rows), o.dump);
    if (out.advice) PrintNoFit(*out.advice, out.result, s, options);
    else PrintNextSteps(o);
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
                  "write the best plan (with model, cluster, training) to this YAML plan file");
  cmd->add_flag("--explain", options->explain,
                "print how many candidates each rule and the memory limit removed");
  cmd->add_option("--explain-plan", options->explain_plan,
                  "say why this plan (a plan string, e.g. \"dp=2,tp=4\") was rejected, or its rank");
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
                "last stage, first_stage_layers / last_stage_layers)");
  cmd->add_option("--only", options->only,
                  "pin plan keys, search the rest (e.g. \"tp=1,pp=1\" or \"zero=3\"; any plan-string "
                  "key: dp, tp, pp, cp, ep, zero, sp, mbs, recompute, schedule, vpp, tp_overlap, "
                  "first_stage_layers, last_stage_layers)");
  cmd->add_option("--dump", options->dump,
                  "write every evaluated candidate (plan, memory and time columns, fits, reason) "
                  "to this file as it is searched, in grid order: .csv (with a header) or .jsonl "
                  "(JSON Lines); written whole or not at all");
  cmd->add_flag("--bench", options->bench,
                "run the two built-in benchmark searches (530B on 5120 A100, 405B on 16384 H100)");
  cmd->callback([cmd, options, exit_code] {
    for (const char* flag : {"--model", "--cluster", "--global-batch", "--seq", "--precision"})
      if (cmd->count(flag) > 0) options->setup_given = true;
    *exit_code = RunSearch(*options);
  });
}

}  // namespace meshplan
