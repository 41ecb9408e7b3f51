// The plan search: exhaustive (checked against a naive brute-force count), every
// returned plan valid and within memory, deterministic across thread counts, sensible
// winners, the documents' 7.2B-on-A40 story, explanations and advice.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/input_error.h"
#include "planner/search/search.h"
#include "planner/search/search_advice.h"
#include "planner/stage_layers.h"

namespace meshplan {
namespace {

TrainingSpec Training(int64_t global_batch, int64_t seq, Precision precision = Precision::kMixed) {
  TrainingSpec t;
  t.global_batch = global_batch;
  t.seq_len = seq;
  t.precision = precision;
  return t;
}

ModelSpec SmallLlama() {
  ModelSpec m;
  m.name = "small-llama";
  m.vocab_size = 1000;
  m.hidden = 256;
  m.layers = 4;
  m.heads = 8;
  m.kv_heads = 4;
  m.ffn_hidden = 768;
  return m;
}

ModelSpec SmallGpt() {
  ModelSpec m;
  m.name = "small-gpt";
  m.block = BlockKind::kGpt;
  m.vocab_size = 5000;
  m.hidden = 768;
  m.layers = 6;
  m.heads = 12;
  m.kv_heads = 12;
  m.ffn_hidden = 3072;
  m.max_seq = 1024;
  return m;
}

// `nodes` x `per_node` H100s with the H100 shorthand's network.
ClusterSpec H100s(int64_t nodes, int64_t per_node) {
  ClusterSpec c = LoadCluster("8xH100");
  c.name = std::to_string(nodes * per_node) + " test H100s";
  c.nodes = nodes;
  c.gpus_per_node = per_node;
  return c;
}

// GPUs with the median memory need of all valid plans, so that about half fit
// (exercises the memory filter and the Pareto frontier).
ClusterSpec MedianGpus(int64_t nodes, int64_t per_node, const ModelSpec& model,
                       const TrainingSpec& training, const SearchOptions& options) {
  ClusterSpec c = H100s(nodes, per_node);
  SearchOptions all = options;
  all.top_k = 1 << 20;
  all.memory_headroom = 0;
  const SearchResult r = Search(model, c, training, all);
  REQUIRE(r.fitting == r.valid);  // on a real H100 everything fits
  std::vector<double> need;
  for (const RankedPlan& p : r.top) need.push_back(p.cost.memory.total_bytes);
  std::nth_element(need.begin(), need.begin() + need.size() / 2, need.end());
  c.gpu.memory_bytes = static_cast<int64_t>(need[need.size() / 2]);
  return c;
}

struct BruteForce {
  int64_t valid = 0;
  int64_t fitting = 0;
  double best_tokens_per_s = 0;
  std::vector<RankedPlan> fitting_plans;
  std::vector<ParallelPlan> valid_plans;  // keep_valid
};

// The stage splits the grid tries: even, and (uneven_stages) the lighter ends: 1f1b with
// vpp 1 on that split, interleaved on the split that chunks into vpp, for the smallest and
// the largest vpp that divide the middle stages' count and have such a split (the pinned
// vpp alone when pinned).
std::vector<StageSplit> SplitsTried(const ModelSpec& model, const ParallelPlan& p,
                                    PipelineSchedule schedule, const SearchOptions& options) {
  std::vector<StageSplit> splits = {StageSplit{}};
  if (!options.space.uneven_stages) return splits;
  const auto lighter = UnevenSplitWorthTrying(model, p.pp);
  if (!lighter) return splits;
  if (schedule == PipelineSchedule::k1F1B && p.virtual_stages == 1) splits.push_back(*lighter);
  if (schedule == PipelineSchedule::kInterleaved && p.virtual_stages >= 2) {
    ParallelPlan stages;
    stages.pp = p.pp;
    SetStageSplit(&stages, *lighter);
    const int64_t middle = SplitLayers(model.layers, stages).middle;
    std::vector<int64_t> vpps;
    for (int64_t v = 2; v <= middle; ++v)
      if (middle % v == 0 && LighterEndsSplit(model.layers, p.pp, v)) vpps.push_back(v);
    const std::optional<int64_t> pinned_vpp = options.space.pins[PlanField::kVpp];
    const bool tried = pinned_vpp
                           ? *pinned_vpp == p.virtual_stages
                           : !vpps.empty() && (p.virtual_stages == vpps.front() ||
                                               p.virtual_stages == vpps.back());
    if (tried && std::find(vpps.begin(), vpps.end(), p.virtual_stages) != vpps.end())
      splits.push_back(*LighterEndsSplit(model.layers, p.pp, p.virtual_stages));
  }
  return splits;
}

// Naive: every tuple of every field over generous ranges, filtered with Validate() and
// the grid's two duplicate rules, written out independently of PlanSpace (the stage split
// takes the grid's two values: an arbitrary split is valid wherever it adds up).
BruteForce CountNaively(const ModelSpec& model, const ClusterSpec& cluster,
                        const TrainingSpec& training, const SearchOptions& options,
                        bool keep_plans, bool keep_valid = false) {
  BruteForce out;
  const int64_t world = cluster.world_size();
  const int64_t placement = options.space.allow_tp_across_nodes ? 0 : cluster.gpus_per_node;
  const PlanPins& pins = options.space.pins;
  // A pinned field other than `p`'s value of it.
  const auto off_pin = [&pins](PlanField field, int64_t value) {
    return pins[field] && *pins[field] != value;
  };
  const PlanSpace space(model, training, cluster, options.space);  // only for ordinals
  EstimateOptions estimate;
  estimate.memory_headroom = options.memory_headroom;
  estimate.memory_model = options.memory_model;
  const PipelineSchedule schedules[] = {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B,
                                        PipelineSchedule::kInterleaved,
                                        PipelineSchedule::kZeroBubbleH1};
  // The policies the framework offers (the search tries nothing else).
  const std::vector<RecomputePolicy> recomputes =
      OfferedRecomputePolicies(training.framework.recompute);
  ParallelPlan p;
  for (p.dp = 1; p.dp <= world; ++p.dp)
    for (p.tp = 1; p.tp <= world; ++p.tp)
      for (p.pp = 1; p.pp <= world; ++p.pp)
        for (p.cp = 1; p.cp <= world; ++p.cp) {
          if (p.dp * p.tp * p.pp * p.cp != world) continue;
          if (off_pin(PlanField::kDp, p.dp) || off_pin(PlanField::kTp, p.tp) ||
              off_pin(PlanField::kPp, p.pp) || off_pin(PlanField::kCp, p.cp))
            continue;
          for (int sp = 0; sp <= 1; ++sp)
            for (p.micro_batch = 1; p.micro_batch <= training.global_batch; ++p.micro_batch)
              for (PipelineSchedule schedule : schedules)
                for (p.virtual_stages = 1; p.virtual_stages <= model.layers; ++p.virtual_stages)
                  for (const StageSplit& split : SplitsTried(model, p, schedule, options))
                  for (p.zero_stage = 0; p.zero_stage <= 3; ++p.zero_stage)
                    for (const RecomputePolicy& recompute : recomputes) {
                      SetStageSplit(&p, split);
                      p.sequence_parallel = sp == 1;
                      p.schedule = schedule;
                      p.recompute = recompute;
                      // The grid's duplicates: one schedule for a single stage, one
                      // ZeRO stage when nothing is data-parallel.
                      if (p.pp == 1 && (schedule != PipelineSchedule::k1F1B || p.virtual_stages != 1))
                        continue;
                      if (p.dp * p.cp == 1 && p.zero_stage != 0 && !pins[PlanField::kZero]) continue;
                      if (off_pin(PlanField::kZero, p.zero_stage) ||
                          off_pin(PlanField::kRecompute, RecomputeCode(recompute)) ||
                          off_pin(PlanField::kMbs, p.micro_batch) ||
                          off_pin(PlanField::kSp, p.sequence_parallel))
                        continue;
                      if (!Validate(p, model, training, world, placement).empty()) continue;
                      ++out.valid;
                      if (keep_valid) out.valid_plans.push_back(p);
                      const PlanCost cost = Estimate(model, cluster, training, p, estimate);
                      if (!cost.fits) continue;
                      ++out.fitting;
                      out.best_tokens_per_s = std::max(out.best_tokens_per_s, cost.tokens_per_s);
                      if (keep_plans) {
                        const auto ordinal = space.OrdinalOf(p);
                        REQUIRE(ordinal.has_value());
                        out.fitting_plans.push_back({p, cost, *ordinal});
                      }
                    }
        }
  return out;
}

struct Case {
  const char* name;
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  SearchOptions options;
  bool tight = false;  // GPUs sized so that about half the plans fit
};

std::vector<Case> SmallCasesWithKnobs();

// The grid alone: the overlap and offload choices pinned to their defaults, so the search
// evaluates grid points only (their variants: the knob test below).
constexpr const char* kGridOnly = "tp_overlap=0,offload_opt=0,offload_act=0,prefetch=1";

std::vector<Case> SmallCases() {
  std::vector<Case> cases = SmallCasesWithKnobs();
  for (Case& c : cases) {
    const std::string pins = c.options.space.pins.ToString();
    c.options.space.pins = ParsePlanPins((pins.empty() ? "" : pins + ",") + kGridOnly);
  }
  return cases;
}

std::vector<Case> SmallCasesWithKnobs() {
  std::vector<Case> cases;
  cases.push_back({"llama, 2 nodes of 4", SmallLlama(), H100s(2, 4), Training(8, 128), {}});
  cases.push_back({"gpt, 3 nodes of 4", SmallGpt(), H100s(3, 4), Training(12, 96), {}});
  Case across{"gpt, tp across nodes", SmallGpt(), H100s(3, 4), Training(12, 96), {}};
  across.options.space.allow_tp_across_nodes = true;
  cases.push_back(across);
  Case even{"gpt, even stages only", SmallGpt(), H100s(3, 4), Training(12, 96), {}};
  even.options.space.uneven_stages = false;
  cases.push_back(even);
  Case pinned{"llama, pinned tp and recompute", SmallLlama(), H100s(2, 4), Training(8, 128), {}};
  pinned.options.space.pins = ParsePlanPins("tp=2,recompute=full");
  cases.push_back(pinned);
  Case tight{"llama on small GPUs, seed memory", SmallLlama(), H100s(2, 4), Training(16, 256), {}};
  tight.options.memory_model = MemoryModel::kSeed;
  tight.cluster = MedianGpus(2, 4, tight.model, tight.training, tight.options);
  tight.tight = true;
  cases.push_back(tight);
  Case detailed{"gpt on small GPUs, detailed memory", SmallGpt(), H100s(2, 4), Training(8, 64), {}};
  detailed.cluster = MedianGpus(2, 4, detailed.model, detailed.training, detailed.options);
  detailed.tight = true;
  cases.push_back(detailed);
  return cases;
}

TEST_CASE("search evaluates exactly the plans a brute-force count finds valid",
          "[planner][search]") {
  for (const Case& c : SmallCases()) {
    SECTION(c.name) {
      const SearchResult r = Search(c.model, c.cluster, c.training, c.options);
      const BruteForce naive = CountNaively(c.model, c.cluster, c.training, c.options, false);
      CHECK(naive.valid > 0);
      CHECK(r.valid == naive.valid);
      CHECK(r.fitting == naive.fitting);
      if (naive.fitting > 0) {
        REQUIRE_FALSE(r.top.empty());
        CHECK(r.top.front().cost.tokens_per_s == naive.best_tokens_per_s);
      }
      // The funnel: every rejected candidate is counted once, under its first broken rule.
      int64_t removed = 0;
      for (const ConstraintTally& t : r.constraints) {
        removed += t.removed;
        CHECK(t.violated >= t.removed);
      }
      CHECK(r.candidates == r.valid + removed);
      CHECK(r.removed_by_memory == r.valid - r.fitting);
    }
  }
}

// The best plan over every overlap and offload choice of every valid grid point, naively:
// what the search's pruned variants (planner/search/knob_variants.h) must still find.
double NaiveBestWithKnobs(const Case& c) {
  SearchOptions grid = c.options;
  grid.space.pins = ParsePlanPins(kGridOnly);
  const BruteForce points = CountNaively(c.model, c.cluster, c.training, grid, false, true);
  EstimateOptions estimate;
  estimate.memory_headroom = c.options.memory_headroom;
  estimate.memory_model = c.options.memory_model;
  double best = 0;
  for (ParallelPlan p : points.valid_plans) {
    for (int tp_overlap = 0; tp_overlap <= (p.tp > 1 ? 1 : 0); ++tp_overlap)
      for (int prefetch = 0; prefetch <= 1; ++prefetch)
        for (int offload = 0; offload < 8; ++offload) {
          p.tp_comm_overlap = tp_overlap == 1;
          p.zero3_prefetch = prefetch;
          p.offload_optimizer = offload & 1;
          p.offload_activations = offload & 2;
          p.offload_params = offload & 4;
          if (!Validate(p, c.model, c.training, c.cluster.world_size()).empty()) continue;
          if (p.offloads() && !c.cluster.host.known()) continue;
          const PlanCost cost = Estimate(c.model, c.cluster, c.training, p, estimate);
          if (cost.fits) best = std::max(best, cost.tokens_per_s);
        }
  }
  return best;
}

TEST_CASE("the overlap and offload variants find the best plan a naive search over them finds",
          "[planner][search][offload]") {
  for (Case c : SmallCasesWithKnobs()) {
    if (!c.tight) continue;
    SECTION(c.name) {
      c.cluster.host.memory_bytes_per_node = 1'000'000'000'000;
      c.cluster.host.link = {"pcie", 1e9, 1e-5, 1.0};  // slow: offload has a real cost
      c.cluster.host.optimizer_Bps = 1e9;
      c.cluster.gpu.comm_overlap_slowdown = 0.1;
      const SearchResult r = Search(c.model, c.cluster, c.training, c.options);
      const double best = NaiveBestWithKnobs(c);
      REQUIRE(best > 0);
      REQUIRE_FALSE(r.top.empty());
      CHECK(r.top.front().cost.tokens_per_s == best);
      CHECK(r.removed_by_memory == r.valid + r.variants - r.fitting);
    }
  }
}

TEST_CASE("the memory filter is exercised: some plans fit and some do not", "[planner][search]") {
  for (const Case& c : SmallCases()) {
    if (!c.tight) continue;
    INFO(c.name);
    const SearchResult r = Search(c.model, c.cluster, c.training, c.options);
    CHECK(r.fitting > 0);
    CHECK(r.removed_by_memory > 0);
  }
}

void ParetoMatchesNaive(const Case& c) {
  INFO(c.name);
  const SearchResult r = Search(c.model, c.cluster, c.training, c.options);
  const BruteForce naive = CountNaively(c.model, c.cluster, c.training, c.options, true);
  std::set<int64_t> expected;
  for (const RankedPlan& a : naive.fitting_plans) {
    bool dominated = false;
    for (const RankedPlan& b : naive.fitting_plans) dominated = dominated || Dominates(b, a);
    if (!dominated) expected.insert(a.ordinal);
  }
  std::set<int64_t> got;
  for (const RankedPlan& p : r.pareto) got.insert(p.ordinal);
  CHECK(got == expected);
  REQUIRE(r.pareto.size() >= 1);
  for (size_t i = 1; i < r.pareto.size(); ++i) {
    CHECK(r.pareto[i].cost.memory.total_bytes > r.pareto[i - 1].cost.memory.total_bytes);
    CHECK(r.pareto[i].cost.tokens_per_s > r.pareto[i - 1].cost.tokens_per_s);
  }
  CHECK(r.pareto.back().cost.tokens_per_s == r.top.front().cost.tokens_per_s);
}

TEST_CASE("the Pareto frontier equals a naive O(n^2) frontier", "[planner][search]") {
  for (const Case& c : SmallCases()) {
    if (c.tight) ParetoMatchesNaive(c);
  }
}

TEST_CASE("every returned plan is valid and within the memory limit", "[planner][search]") {
  const ModelSpec model = LoadModel("llama2-7b");
  const ClusterSpec cluster = LoadCluster("16xH100");
  const TrainingSpec training = Training(128, 4096);
  SearchOptions options;
  options.top_k = 200;
  options.memory_headroom = GENERATE(0.0, 0.1, 0.3);
  const SearchResult r = Search(model, cluster, training, options);
  REQUIRE(r.top.size() == 200);
  const double limit = static_cast<double>(cluster.gpu.memory_bytes) * (1 - options.memory_headroom);
  std::vector<const RankedPlan*> returned;
  for (const RankedPlan& p : r.top) returned.push_back(&p);
  for (const RankedPlan& p : r.pareto) returned.push_back(&p);
  for (const RankedPlan* p : returned) {
    INFO(ToPlanString(p->plan));
    CHECK(p->cost.memory.total_bytes <= limit);
    CHECK(Validate(p->plan, model, training, cluster.world_size(), cluster.gpus_per_node).empty());
    CHECK(p->plan.world_size() == cluster.world_size());
    // What the search reports is what Estimate says for that plan.
    EstimateOptions e;
    e.memory_headroom = options.memory_headroom;
    CHECK(Estimate(model, cluster, training, p->plan, e).tokens_per_s == p->cost.tokens_per_s);
  }
  for (size_t i = 1; i < r.top.size(); ++i)
    CHECK(r.top[i].cost.tokens_per_s <= r.top[i - 1].cost.tokens_per_s);
}

TEST_CASE("the result does not depend on the number of threads", "[planner][search]") {
  const ModelSpec model = LoadModel("llama3-8b");
  const ClusterSpec cluster = LoadCluster("64xH100");
  const TrainingSpec training = Training(256, 8192);
  SearchOptions options;
  options.top_k = 25;
  options.threads = 1;
  const SearchResult one = Search(model, cluster, training, options);
  for (int threads : {2, 3, 7}) {
    options.threads = threads;
    const SearchResult many = Search(model, cluster, training, options);
    INFO("threads " << threads);
    CHECK(many.threads == threads);
    CHECK(many.candidates == one.candidates);
    CHECK(many.valid == one.valid);
    CHECK(many.fitting == one.fitting);
    REQUIRE(many.top.size() == one.top.size());
    for (size_t i = 0; i < one.top.size(); ++i) {
      CHECK(many.top[i].plan == one.top[i].plan);
      CHECK(many.top[i].ordinal == one.top[i].ordinal);
    }
    REQUIRE(many.pareto.size() == one.pareto.size());
    for (size_t i = 0; i < one.pareto.size(); ++i) CHECK(many.pareto[i].plan == one.pareto[i].plan);
    for (int c = 0; c < kNumPlanConstraints; ++c) {
      CHECK(many.constraints[c].removed == one.constraints[c].removed);
      CHECK(many.constraints[c].violated == one.constraints[c].violated);
      CHECK(many.constraints[c].example == one.constraints[c].example);
    }
    REQUIRE(many.smallest);
    CHECK(many.smallest->plan == one.smallest->plan);
  }
}

TEST_CASE("a model that fits easily prefers plain data parallel", "[planner][search]") {
  const SearchResult r = Search(LoadModel("spec-194m-tied"), LoadCluster("8xH100"),
                                Training(64, 4096), {});
  REQUIRE_FALSE(r.top.empty());
  const ParallelPlan& best = r.top.front().plan;
  INFO(ToPlanString(best));
  CHECK(best.dp == 8);
  CHECK(best.tp == 1);
  CHECK(best.pp == 1);
  CHECK(best.cp == 1);
}

TEST_CASE("a model that does not fit replicated gets sharded", "[planner][search]") {
  // Llama 2 13B in mixed precision: 16 bytes x 13B = 208 GB of model state per replica.
  const ModelSpec model = LoadModel("llama2-13b");
  const ClusterSpec cluster = LoadCluster("8xH100");
  const TrainingSpec training = Training(64, 4096);
  SearchOptions replicated;
  // Without offload (which would hold the optimizer states on the host).
  replicated.space.pins = ParsePlanPins("tp=1,pp=1,cp=1,zero=0,offload_opt=0,offload_act=0");
  const SearchResult none = Search(model, cluster, training, replicated);
  CHECK(none.valid > 0);
  CHECK(none.fitting == 0);
  const SearchResult r = Search(model, cluster, training, {});
  REQUIRE_FALSE(r.top.empty());
  const ParallelPlan& best = r.top.front().plan;
  INFO(ToPlanString(best));
  // Sharded parameters: ZeRO-3, or layers split by tensor or pipeline parallelism.
  CHECK((best.zero_stage == 3 || best.tp > 1 || best.pp > 1));
}

TEST_CASE("the documents' story: 7.2B does not fit one A40 and fits two with sharding",
          "[planner][search][spec]") {
  // docs/cost_model.md 2(a): pure bf16, B=1, C=256 on one 46 GB card; B=2 (one sequence per
  // card) on two.
  const ModelSpec model = LoadModel("spec-7b");
  const SearchResult one =
      Search(model, LoadCluster("1xA40"), Training(1, 256, Precision::kBf16), {});
  CHECK(one.valid > 0);
  CHECK(one.fitting == 0);
  REQUIRE(one.smallest);
  CHECK(one.smallest->cost.memory.total_bytes > 46e9);
  // The search writes why only for the plans it reports (ExplainNoFit): as Estimate does.
  EstimateOptions e;
  e.memory_headroom = SearchOptions{}.memory_headroom;
  const PlanCost smallest = Estimate(model, LoadCluster("1xA40"), Training(1, 256, Precision::kBf16),
                                     one.smallest->plan, e);
  CHECK_FALSE(one.smallest->cost.reason.empty());
  CHECK(one.smallest->cost.reason == smallest.reason);

  const ClusterSpec two = LoadCluster("2xa40-pcie");
  const TrainingSpec training = Training(2, 256, Precision::kBf16);
  CHECK(Search(model, two, training, {}).fitting > 0);

  // Data parallel only, as in the blog: replicated (zero 0) does not fit, full sharding does,
  // and the winner shards.
  SearchOptions dp_only;
  dp_only.space.pins = ParsePlanPins("tp=1,pp=1,cp=1");
  dp_only.probe = ParsePlanString("dp=2,zero=0");
  const SearchResult r0 = Search(model, two, training, dp_only);
  REQUIRE(r0.probe);
  REQUIRE(r0.probe->cost);
  CHECK_FALSE(r0.probe->cost->fits);
  dp_only.probe = ParsePlanString("dp=2,zero=3");
  const SearchResult r3 = Search(model, two, training, dp_only);
  REQUIRE(r3.probe->cost);
  CHECK(r3.probe->cost->fits);
  CHECK(r3.probe->rank.has_value());
  REQUIRE_FALSE(r3.top.empty());
  CHECK(r3.top.front().plan.zero_stage >= 1);
  // With ZeRO pinned to 3 (FSDP full shard) the search still finds its plan.
  SearchOptions fsdp = dp_only;
  fsdp.probe.reset();
  fsdp.space.pins = ParsePlanPins("tp=1,pp=1,cp=1,zero=3");
  const SearchResult full = Search(model, two, training, fsdp);
  REQUIRE_FALSE(full.top.empty());
  CHECK(full.top.front().plan.zero_stage == 3);
  CHECK(full.top.front().plan.dp == 2);
}

TEST_CASE("explain-plan: a plan's violations, stand-in, fit and rank", "[planner][search]") {
  const ModelSpec model = LoadModel("llama2-7b");
  const ClusterSpec cluster = LoadCluster("8xH100");
  const TrainingSpec training = Training(64, 4096);
  SearchOptions options;
  options.top_k = 5;
  const SearchResult r = Search(model, cluster, training, options);
  REQUIRE(r.top.size() == 5);
  for (int k = 0; k < 5; ++k) {
    options.probe = r.top[k].plan;
    const SearchResult p = Search(model, cluster, training, options);
    REQUIRE(p.probe);
    CHECK(p.probe->violations.empty());
    CHECK(p.probe->rank == k + 1);
  }
  options.probe = ParsePlanString("dp=2,tp=16");
  const SearchResult bad = Search(model, cluster, training, options);
  std::set<std::string> broken;
  for (const PlanViolation& v : bad.probe->violations) broken.insert(v.constraint);
  CHECK(broken == std::set<std::string>{"world_size", "tp_within_node"});
  CHECK_FALSE(bad.probe->rank);
  // A single stage with another schedule is the 1f1b candidate; ZeRO over one rank is zero 0.
  options.probe = ParsePlanString("tp=8,zero=2,schedule=gpipe");
  const SearchResult same = Search(model, cluster, training, options);
  CHECK(same.probe->candidate == ParsePlanString("tp=8"));
  CHECK(same.probe->in_space);
  CHECK(same.probe->rank.has_value());
}

TEST_CASE("plan space ordinals locate the plans the search returns", "[planner][search]") {
  const ModelSpec model = LoadModel("llama2-7b");
  const ClusterSpec cluster = LoadCluster("16xH100");
  const TrainingSpec training = Training(64, 4096);
  SearchOptions options;
  options.top_k = 50;
  const SearchResult r = Search(model, cluster, training, options);
  const PlanSpace space(model, training, cluster, options.space);
  CHECK(space.size() == r.candidates);
  for (const RankedPlan& p : r.top) CHECK(space.OrdinalOf(p.plan) == p.ordinal);
  // The overlap and offload choices are variants of a grid point (knob_variants.h): the same
  // ordinal, unless a pin fixes them otherwise.
  CHECK(space.OrdinalOf(ParsePlanString("dp=16,tp_overlap=1,offload_act=1")) ==
        space.OrdinalOf(ParsePlanString("dp=16")));
  PlanSpaceOptions pinned;
  pinned.pins = ParsePlanPins("tp_overlap=0");
  CHECK_FALSE(PlanSpace(model, training, cluster, pinned)
                  .OrdinalOf(ParsePlanString("dp=16,tp_overlap=1"))
                  .has_value());
}

TEST_CASE("no valid plan: an empty result and a message naming each rule", "[planner][search]") {
  // 3 GPUs for a 32-head, 32-layer model, batch 64, seq 4096: no factor of 3 works on even
  // stages (uneven ones split the layers 11 + 11 + 10 on pp=3).
  const ModelSpec model = LoadModel("llama2-7b");
  const ClusterSpec cluster = LoadCluster("3xH100");
  const TrainingSpec training = Training(64, 4096);
  CHECK(Search(model, cluster, training, {}).valid > 0);
  SearchOptions even;
  even.space.uneven_stages = false;
  const SearchResult r = Search(model, cluster, training, even);
  CHECK(r.candidates > 0);
  CHECK(r.valid == 0);
  CHECK(r.top.empty());
  const std::string message = DescribeNoValidPlan(r, model, cluster, training, even);
  for (const char* text : {"no valid plan", "tp_divides_heads", "pp_divides_layers",
                           "cp_divides_seq", "batch_divides", "global_batch=64"})
    CHECK_THAT(message, Catch::Contains(text));
}

TEST_CASE("pins: parsing and errors", "[planner][search]") {
  const PlanPins pins = ParsePlanPins("tp=2,zero=3,recompute=full,schedule=zb_h1");
  CHECK(pins[PlanField::kTp] == 2);
  CHECK(pins.Get<int>(PlanField::kZero) == 3);
  CHECK(pins.Get<Recompute>(PlanField::kRecompute) == Recompute::kFull);
  CHECK(pins.Get<PipelineSchedule>(PlanField::kSchedule) == PipelineSchedule::kZeroBubbleH1);
  CHECK(pins.ToString() == "tp=2,zero=3,recompute=full,schedule=zb_h1");
  CHECK(pins.Without("zero").ToString() == "tp=2,recompute=full,schedule=zb_h1");
  CHECK(ParsePlanPins("").empty());
  CHECK_THROWS_AS(ParsePlanPins("zero=4"), InputError);
  CHECK_THROWS_AS(ParsePlanPins("tp=0"), InputError);
  // The knobs the grid does not vary (tp_overlap) or varies by its own rule (the stage split).
  const PlanPins knobs = ParsePlanPins("pp=4,tp_overlap=1,first_stage_layers=7,last_stage_layers=5");
  CHECK(knobs.Get<bool>(PlanField::kTpOverlap) == true);
  CHECK(knobs[PlanField::kFirstStageLayers] == 7);
  CHECK(knobs[PlanField::kLastStageLayers] == 5);
  CHECK(knobs.ToString() == "pp=4,tp_overlap=1,first_stage_layers=7,last_stage_layers=5");
  CHECK(knobs.Without("tp_overlap").Without("last_stage_layers").ToString() ==
        "pp=4,first_stage_layers=7");
  CHECK_THROWS_AS(ParsePlanPins("first_stage_layers=0"), InputError);
  CHECK_THROWS_WITH(ParsePlanPins("foo=1"), Catch::Contains("unknown key"));
}

// Every plan the search lists has every pinned value, on every mesh: a schedule, vpp or
// stage-split pin is not dropped on single-stage meshes (--only vpp=2 once listed pp=1 plans
// with vpp=1 there).
TEST_CASE("pins: every listed plan has the pinned values", "[planner][search]") {
  const ModelSpec model = SmallLlama();  // 4 layers
  const ClusterSpec cluster = H100s(1, 4);
  const TrainingSpec training = Training(8, 128);
  for (const char* only : {"vpp=2", "schedule=interleaved", "schedule=gpipe",
                           "first_stage_layers=1", "schedule=interleaved,vpp=2", "pp=1,vpp=1"}) {
    INFO("--only " << only);
    SearchOptions options;
    options.top_k = 100000;
    options.threads = 2;
    options.space.pins = ParsePlanPins(only);
    const SearchResult r = Search(model, cluster, training, options);
    REQUIRE_FALSE(r.top.empty());
    for (const RankedPlan& ranked : r.top)
      for (const PlanFieldSpec& f : PlanFields())
        if (const std::optional<int64_t> pin = options.space.pins[f.id]) {
          INFO(ToShortPlanString(ranked.plan));
          CHECK(f.get(ranked.plan) == *pin);
        }
  }
}

TEST_CASE("no plan fits: the advice is found by searching again", "[planner][search]") {
  // Llama 2 70B on one 8-GPU node: 1.1 TB of mixed-precision model state.
  const ModelSpec model = LoadModel("llama2-70b");
  const ClusterSpec cluster = LoadCluster("8xH100");
  const TrainingSpec training = Training(64, 4096);
  SearchOptions options;
  // Without offload: ZeRO-Offload with activation offload fits it (knob_search_test.cc).
  options.space.pins = ParsePlanPins("pp=1,offload_opt=0,offload_act=0");
  const SearchResult r = Search(model, cluster, training, options);
  REQUIRE(r.valid > 0);
  REQUIRE(r.fitting == 0);
  const FitAdvice advice = AdviseFit(model, cluster, training, options, r);
  REQUIRE(advice.smallest);
  CHECK(advice.smallest->cost.memory.total_bytes > advice.usable_bytes);
  bool more_gpus = false, unpin = false;
  for (const FitSuggestion& f : advice.suggestions) {
    INFO(f.change << ": " << f.why);
    CHECK(f.best.cost.fits);
    CHECK(f.search.fitting > 0);
    if (f.change.rfind("--cluster ", 0) == 0) {
      more_gpus = true;
      // The suggested cluster really fits the suggested plan.
      const ClusterSpec bigger = LoadCluster(f.change.substr(10));
      CHECK(bigger.world_size() > cluster.world_size());
      EstimateOptions e;
      e.memory_headroom = options.memory_headroom;
      CHECK(Estimate(model, bigger, training, f.best.plan, e).fits);
    }
    if (f.change == "--only offload_opt=0,offload_act=0") unpin = true;  // pp dropped
  }
  CHECK(more_gpus);
  SearchOptions any_pp;
  any_pp.space.pins = ParsePlanPins("offload_opt=0,offload_act=0");
  CHECK(unpin == (Search(model, cluster, training, any_pp).fitting > 0));
}

}  // namespace
}  // namespace meshplan
