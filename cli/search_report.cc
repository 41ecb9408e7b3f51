#include "cli/search_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_difference.h"
#include "planner/cost/cost_report.h"
#include "planner/cost/offload.h"
#include "planner/limits.h"
#include "planner/names.h"
#include "planner/plan_fields.h"
#include "planner/units_format.h"

namespace meshplan {

// ---------------------------------------------------------------------------
// Formatting helpers

namespace {

// A step-time cell of the plan table: a bare "0" for nothing, so empty columns read as empty.
std::string TimeCell(double s) { return s == 0 ? "0" : FormatSeconds(s); }

double StatesBytes(const MemoryBreakdown& m) {
  return m.params_bytes + m.grads_bytes + m.optimizer_bytes;
}
double OtherBytes(const MemoryBreakdown& m) {
  return m.logits_bytes + m.comm_buffer_bytes + m.gathered_params_bytes + m.transient_bytes +
         m.runtime_bytes();
}

}  // namespace

std::string SetupLine(const TrainingSetup& s, const SearchOptions& options) {
  std::string line = fmt::format("{} on {}, global batch {} x {} tokens, {} precision, {}",
                                 s.model.name, s.cluster.name, s.training.global_batch,
                                 s.training.seq_len, ToString(s.training.precision),
                                 FrameworkLabel(s.training.framework));
  if (!options.space.pins.empty()) line += ", only " + options.space.pins.ToString();
  return line + "\ncluster: " + DescribeCluster(s.cluster);
}

// The ranked plans as a table: memory with its main parts, the step time split, speed.
void PrintPlanTable(const std::vector<RankedPlan>& plans, const ClusterSpec& cluster,
                    const char* first_column, bool number_rows) {
  size_t plan_width = 4;
  for (const RankedPlan& r : plans) plan_width = std::max(plan_width, ToShortPlanString(r.plan).size());
  const double capacity = static_cast<double>(cluster.gpu.memory_bytes);
  fmt::print("{:>4}  {:<{}}  {:>16}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  "
             "{:>9}  {:>9}  {:>11}  {:>10}  {:>11}  {:>5}\n",
             first_column, "plan", plan_width, "memory/GPU", "states", "activ.", "other", "host",
             "compute", "exp.comm", "bubble", "optim.", "offload", "slowdown", "step", "tokens/s",
             "tok/s/GPU", "TFLOP/s/GPU", "MFU");
  int row = 0;
  for (const RankedPlan& r : plans) {
    ++row;
    const MemoryBreakdown& m = r.cost.memory;
    const StepTimeBreakdown& t = r.cost.time;
    const std::string memory =
        fmt::format("{} {:>3.0f}%", FormatGiB(m.total_bytes, 1), PercentOf(m.total_bytes, capacity));
    const double host = m.host_total_bytes();
    fmt::print(
        "{:>4}  {:<{}}  {:>16}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  "
        "{:>9}  {:>11}  {:>10}  {:>11}  {:>4.1f}%\n",
        number_rows ? std::to_string(row) : std::string(""), ToShortPlanString(r.plan), plan_width,
        memory, FormatGiB(StatesBytes(m), 1), FormatGiB(m.activations_bytes, 1),
        FormatGiB(OtherBytes(m), 1), host > 0 ? FormatGiB(host, 1) : std::string("0"),
        TimeCell(t.compute_s), TimeCell(t.exposed_comm_s.sum()), TimeCell(t.bubble_s),
        TimeCell(t.optimizer_s), TimeCell(t.offload_s), TimeCell(t.overlap_slowdown_s),
        TimeCell(t.total_s), GroupDigits(static_cast<int64_t>(r.cost.tokens_per_s)),
        GroupDigits(static_cast<int64_t>(r.cost.tokens_per_s_per_gpu)),
        FormatTflops(r.cost.model_flops_per_s_per_gpu), 100 * r.cost.mfu);
  }
}

namespace {

// How the overlap and offload choices went (planner/search/knob_variants.h).
void PrintKnobExplain(const KnobTally& k, const TrainingSetup& s, const SearchOptions& options) {
  const PlanPins& pins = options.space.pins;
  fmt::print("\nOverlap and offload choices, tried on every valid plan ({} step timings in all):\n",
             GroupDigits(k.timings));
  if (const std::optional<int64_t> pin = pins[PlanField::kTpOverlap])
    fmt::print("  tp_overlap   pinned to {}\n", *pin);
  else
    fmt::print("  tp_overlap   1 on {} plans with tp > 1, 0 on {} (the {:.0f}% compute slowdown "
               "of overlapping costs more than the TP time it hides)\n",
               GroupDigits(k.tp_overlap_on), GroupDigits(k.tp_overlap_off),
               100 * s.cluster.gpu.comm_overlap_slowdown);
  if (const std::optional<int64_t> pin = pins[PlanField::kDpOverlap])
    fmt::print("  dp_overlap   pinned to {}\n", *pin);
  else
    fmt::print("  dp_overlap   1 on all {} plans with dp*cp > 1: 0 only exposes the gradient sync "
               "(same memory, never faster: dominated, not timed)\n",
               GroupDigits(k.dp_overlap_dominated));
  if (const std::optional<int64_t> pin = pins[PlanField::kPpOverlap])
    fmt::print("  pp_overlap   pinned to {}\n", *pin);
  else if (s.training.framework.pp_overlap != PpOverlapOffer::kNone)
    fmt::print("  pp_overlap   1 on all {} interleaved plans: 0 only exposes the pipeline sends "
               "(same memory, never faster: dominated, not timed)\n",
               GroupDigits(k.pp_overlap_on));
  const PrefetchOffer& prefetch = s.training.framework.prefetch;
  if (const std::optional<int64_t> pin = pins[PlanField::kPrefetch])
    fmt::print("  prefetch     pinned to {}\n", *pin);
  else if (!prefetch.offers(0))
    fmt::print("  prefetch     1; 0 not tried: {} runs ZeRO-3 with prefetch={}\n",
               FrameworkLabel(s.training.framework), OfferedPrefetchText(prefetch));
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

}  // namespace

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
             FormatGiB(UsableBytes(s.cluster.gpu, options.memory_headroom), 1),
             r.removed_by_host_memory > 0 ? "" : "");
  if (r.removed_by_host_memory > 0)
    fmt::print("  {:<26} {:>14}  (offloaded bytes above the node's {} of host memory)\n",
               kHostMemoryExceeded, "-" + GroupDigits(r.removed_by_host_memory),
               FormatGiB(static_cast<double>(s.cluster.host.memory_bytes_per_node), 0));
  fmt::print("  {:<26} {:>14}\n", "fitting", GroupDigits(r.fitting));
  PrintKnobExplain(r.knobs, s, options);
}

namespace {

// The probe beside the best plan, term by term; nullopt when it has no cost (a rule removed
// it), nothing fits, or it is the best plan.
std::optional<CostDifference> VersusBest(const ProbeReport& p, const SearchResult& r,
                                         const TrainingSetup& s) {
  if (!p.cost || r.top.empty() || r.top.front().plan == p.candidate) return std::nullopt;
  return DiffCosts(RankedPlan{p.candidate, *p.cost}, r.top.front(), s.model);
}

// Where the probe went: removed by a rule, did not fit, or its rank.
void PrintProbeFate(const ProbeReport& p, const SearchResult& r, const TrainingSetup& s,
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
    fmt::print("  {}: needs {}, has {} ({} minus {:.0f}% headroom){}\n",
               FitIsTight(cost) ? "tight, left out" : "does not fit", FormatGiB(m.total_bytes, 1),
               FormatGiB(UsableBytes(s.cluster.gpu, options.memory_headroom), 1),
               FormatGiB(static_cast<double>(s.cluster.gpu.memory_bytes), 1),
               100 * options.memory_headroom, TightNote(cost));
    fmt::print(
        "  memory: states {} (params {}, grads {}, optimizer {}), activations {}, other {}"
        " (peak in {})\n",
        FormatGiB(StatesBytes(m), 1), FormatGiB(m.params_bytes, 1), FormatGiB(m.grads_bytes, 1),
        FormatGiB(m.optimizer_bytes, 1), FormatGiB(m.activations_bytes, 1),
        FormatGiB(OtherBytes(m), 1), m.peak_phase);
    return;
  }
  if (p.rank) {
    fmt::print("  fits ({} of {} usable); rank {} of {} fitting plans: {} tokens/s, MFU {:.1f}%\n",
               FormatGiB(cost.memory.total_bytes, 1),
               FormatGiB(UsableBytes(s.cluster.gpu, options.memory_headroom), 1),
               GroupDigits(*p.rank), GroupDigits(r.fitting),
               GroupDigits(static_cast<int64_t>(cost.tokens_per_s)), 100 * cost.mfu);
  } else {
    fmt::print("  fits ({}): {} tokens/s, MFU {:.1f}%\n", FormatGiB(cost.memory.total_bytes, 1),
               GroupDigits(static_cast<int64_t>(cost.tokens_per_s)), 100 * cost.mfu);
  }
  if (!r.top.empty() && !(r.top.front().plan == p.candidate))
    fmt::print("  the best plan {} reaches {} tokens/s ({:.2f}x)\n",
               ToShortPlanString(r.top.front().plan),
               GroupDigits(static_cast<int64_t>(r.top.front().cost.tokens_per_s)),
               r.top.front().cost.tokens_per_s / cost.tokens_per_s);
}

}  // namespace

void PrintProbe(const ProbeReport& p, const SearchResult& r, const TrainingSetup& s,
                const SearchOptions& options) {
  PrintProbeFate(p, r, s, options);
  if (const std::optional<CostDifference> d = VersusBest(p, r, s)) {
    fmt::print("  beside the best plan {}:\n", d->other);
    fmt::print("{}", FormatCostDifference(*d, "  "));
  }
}

void PrintNoFit(const FitAdvice& advice, const SearchResult& r, const TrainingSetup& s,
                const SearchOptions& options) {
  fmt::print(
      "\nNo plan fits: all {} valid plans need more than the {} usable per GPU ({} "
      "minus {:.0f}% headroom).\n",
      GroupDigits(r.valid), FormatGiB(advice.usable_bytes, 1),
      FormatGiB(static_cast<double>(s.cluster.gpu.memory_bytes), 1), 100 * options.memory_headroom);
  if (advice.smallest) {
    const MemoryBreakdown& m = advice.smallest->cost.memory;
    fmt::print("The smallest is {}: {} per GPU (states {}, activations {}, other {}){}",
               ToShortPlanString(advice.smallest->plan), FormatGiB(m.total_bytes, 1),
               FormatGiB(StatesBytes(m), 1), FormatGiB(m.activations_bytes, 1),
               FormatGiB(OtherBytes(m), 1), TightNote(advice.smallest->cost));
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

namespace {

// The grid axes of the plan (planner/plan_fields.h), each in its kind's JSON type.
nlohmann::json PlanFieldsToJson(const ParallelPlan& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const PlanFieldSpec& f : PlanFields()) {
    if (f.role != PlanFieldRole::kAxis) continue;
    const int64_t v = f.get(p);
    switch (f.kind) {
      case PlanFieldKind::kInt: j[f.key] = v; break;
      case PlanFieldKind::kBool: j[f.key] = v != 0; break;
      case PlanFieldKind::kEnum: j[f.key] = f.name(v); break;
    }
  }
  return j;
}

}  // namespace

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
                {"framework", s.training.framework.name},
                {"framework_version", s.training.framework.version},
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
                    {"pp_overlap_on", k.pp_overlap_on},
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
                      {"tokens_per_s_per_gpu", p.cost.tokens_per_s_per_gpu},
                      {"model_flops_per_s_per_gpu", p.cost.model_flops_per_s_per_gpu},
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
    if (const std::optional<CostDifference> d = VersusBest(p, r, s))
      j["probe"]["versus_best"] = CostDifferenceToJson(*d);
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

}  // namespace meshplan
