#include "planner/search/search.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "planner/cost/cost_model.h"
#include "planner/cost/plan_evaluator.h"
#include "planner/input_error.h"
#include "planner/search/knob_variants.h"
#include "planner/worker_threads.h"

namespace meshplan {
namespace {

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Ranking order: more tokens/s first, then the lower grid ordinal, then the lower variant
// (planner/search/knob_variants.h).
bool Better(double tps_a, int64_t ordinal_a, int variant_a, double tps_b, int64_t ordinal_b,
            int variant_b) {
  if (tps_a != tps_b) return tps_a > tps_b;
  return ordinal_a != ordinal_b ? ordinal_a < ordinal_b : variant_a < variant_b;
}
bool Better(double tps_a, int64_t ordinal_a, double tps_b, int64_t ordinal_b) {
  return Better(tps_a, ordinal_a, 0, tps_b, ordinal_b, 0);
}
bool Better(const RankedPlan& a, const RankedPlan& b) {
  return Better(a.cost.tokens_per_s, a.ordinal, a.variant, b.cost.tokens_per_s, b.ordinal,
                b.variant);
}

// The smallest-plan order: less memory per GPU first, then the lower grid ordinal.
bool UsesLessMemory(double memory_bytes, int64_t ordinal, const RankedPlan& than) {
  const double other = than.cost.memory.total_bytes;
  return memory_bytes != other ? memory_bytes < other : ordinal < than.ordinal;
}
bool UsesLessMemory(const RankedPlan& a, const RankedPlan& b) {
  return UsesLessMemory(a.cost.memory.total_bytes, a.ordinal, b);
}

// The best K plans seen, as a heap whose front is the worst kept.
class TopK {
 public:
  explicit TopK(int k) : k_(std::max(k, 0)) {}
  void Offer(const ParallelPlan& plan, const PlanCost& cost, int64_t ordinal, int variant) {
    if (k_ == 0) return;
    auto worse_first = [](const RankedPlan& a, const RankedPlan& b) { return Better(a, b); };
    if (static_cast<int>(heap_.size()) == k_) {
      const RankedPlan& worst = heap_.front();
      if (!Better(cost.tokens_per_s, ordinal, variant, worst.cost.tokens_per_s, worst.ordinal,
                  worst.variant))
        return;
      std::pop_heap(heap_.begin(), heap_.end(), worse_first);
      heap_.back() = {plan, cost, ordinal, variant};
    } else {
      heap_.push_back({plan, cost, ordinal, variant});
    }
    std::push_heap(heap_.begin(), heap_.end(), worse_first);
  }
  std::vector<RankedPlan>& items() { return heap_; }

 private:
  int k_;
  std::vector<RankedPlan> heap_;
};

// What one worker thread accumulates; merged by MergeWorkers().
struct WorkerState {
  explicit WorkerState(int k) : top(k) {}
  int64_t valid = 0;
  int64_t variants = 0;
  int64_t fitting = 0;
  std::array<ConstraintTally, kNumPlanConstraints> constraints{};
  std::array<int64_t, kNumPlanConstraints> example_ordinal{};
  TopK top;
  ParetoFrontier pareto;
  std::optional<RankedPlan> smallest;
  int64_t better_than_probe = 0;
  KnobTally knobs;
  int64_t host_memory_exceeded = 0;  // evaluated candidates within GPU but not host memory
};

// The probe's place in the ranking order, when it is a fitting candidate.
struct ProbeKey {
  bool active = false;
  double tokens_per_s = 0;
  int64_t ordinal = 0;
};

// What every worker reads: the setup, the grid, how to estimate, and the probe's key.
struct Job {
  const ModelSpec& model;
  const ClusterSpec& cluster;
  const TrainingSpec& training;
  const PlanSpace& space;
  EstimateOptions estimate;
  ProbeKey probe;
  CandidateDump* dump = nullptr;  // SearchOptions::dump
  KnobSearch knobs() const { return {model, cluster, training, space, estimate}; }
};

// A block of `inner` candidates from `ordinal` on (they differ only in zero and recompute)
// that breaks the rules in `broken`: counted under each rule it breaks, and as removed
// by the first; `plan` becomes that rule's example if it has the lowest ordinal yet.
void CountRejected(PlanConstraintMask broken, const ParallelPlan& plan, int64_t ordinal,
                   int64_t inner, WorkerState& state) {
  for (PlanConstraintMask bits = broken; bits != 0; bits &= bits - 1)
    state.constraints[std::countr_zero(bits)].violated += inner;
  const int first = std::countr_zero(broken);
  ConstraintTally& tally = state.constraints[first];
  if (!tally.example || ordinal < state.example_ordinal[first]) {
    tally.example = plan;
    state.example_ordinal[first] = ordinal;
  }
  tally.removed += inner;
}

// One costed candidate (a grid point's variant) offered to the smallest plan, and when
// it fits to the top K, the Pareto frontier and the probe's rank.
void OfferCandidate(const Job& job, const ParallelPlan& plan, const PlanCost& cost,
                    int64_t ordinal, int variant, WorkerState& state, std::string* dump_rows) {
  if (variant > 0) ++state.variants;
  if (dump_rows) job.dump->FormatRow(plan, cost, ordinal, dump_rows);
  if (!state.smallest || UsesLessMemory(cost.memory.total_bytes, ordinal, *state.smallest))
    state.smallest = RankedPlan{plan, cost, ordinal, variant};
  if (!cost.fits) {
    if (!cost.fits_host && cost.memory.total_bytes <= UsableBytes(job.cluster.gpu, job.estimate.memory_headroom))
      ++state.host_memory_exceeded;
    return;
  }
  ++state.fitting;
  state.top.Offer(plan, cost, ordinal, variant);
  state.pareto.Offer(plan, cost, ordinal);  // copies only what it keeps
  if (job.probe.active &&
      Better(cost.tokens_per_s, ordinal, job.probe.tokens_per_s, job.probe.ordinal))
    ++state.better_than_probe;
}

// One valid grid point and its overlap / offload variants (planner/search/knob_variants.h),
// on this thread's evaluator.
void EvaluateCandidate(const Job& job, PlanEvaluator* evaluator, const ParallelPlan& plan,
                       int64_t ordinal, WorkerState& state, std::string* dump_rows) {
  struct Context {
    const Job& job;
    int64_t ordinal;
    WorkerState& state;
    std::string* dump_rows;
  } context{job, ordinal, state, dump_rows};
  ++state.valid;
  EvaluateKnobVariants(
      job.knobs(), evaluator, plan, &state.knobs,
      [](void* c, const ParallelPlan& p, const PlanCost& cost, int variant) {
        Context& x = *static_cast<Context*>(c);
        OfferCandidate(x.job, p, cost, x.ordinal, variant, x.state, x.dump_rows);
      },
      &context);
}

// Every candidate of one mesh, in ordinal order.
void SearchMesh(const Job& job, int64_t mesh_index, WorkerState& state) {
  const MeshShape& mesh = job.space.mesh(mesh_index);
  const MeshAxes axes = job.space.axes(mesh);
  const int64_t inner = axes.inner_size();
  const int64_t world = job.space.world_size();
  const int64_t tp_limit = job.space.tp_group_limit();
  int64_t ordinal = job.space.mesh_offset(mesh_index);
  std::string dump_rows;  // this mesh's rows, handed to the dump at the end
  std::string* rows = job.dump ? &dump_rows : nullptr;
  // One evaluator for the mesh: a grid point's ZeRO and recompute choices, walked in turn,
  // share its plan shape. Why a plan does not fit is written for the dump's rows, else
  // only for the smallest plan, the one such plan the result holds (Search).
  PlanEvaluator evaluator(job.model, job.cluster, job.training, job.estimate,
                          /*explain_no_fit=*/job.dump != nullptr);

  ParallelPlan plan;
  plan.dp = mesh.dp;
  plan.tp = mesh.tp;
  plan.pp = mesh.pp;
  plan.cp = mesh.cp;
  plan.ep = mesh.ep;
  job.space.SetBaseKnobs(&plan);
  // The framework's rules that a pinned knob makes depend on the inner axes: a pinned
  // activation offload on the recompute policy (offload_offered), a pinned prefetch depth
  // on the ZeRO stage (prefetch_offered). Without such a pin the check below covers them.
  const FrameworkSpec& framework = job.training.framework;
  const bool inner_rules =
      plan.offload_activations || !framework.prefetch.offers(plan.zero3_prefetch);
  for (bool sp : axes.sequence_parallel) {
    plan.sequence_parallel = sp;
    for (int64_t mbs : axes.micro_batch) {
      plan.micro_batch = mbs;
      for (const ScheduleChoice& schedule : axes.schedule) {
        plan.schedule = schedule.schedule;
        plan.virtual_stages = schedule.virtual_stages;
        SetStageSplit(&plan, schedule.split);
        // The zero and recompute axes hold only what the framework offers, so one check
        // covers the inner block, but for inner_rules, checked per candidate below.
        plan.zero_stage = axes.zero_stage.front();
        plan.recompute = axes.recompute.front();
        const PlanConstraintMask broken =
            CheckPlan(plan, job.model, job.training, world, tp_limit);
        if (broken != 0) {
          CountRejected(broken, plan, ordinal, inner, state);
          ordinal += inner;
          continue;
        }
        for (int zero : axes.zero_stage) {
          plan.zero_stage = zero;
          for (const RecomputePolicy& recompute : axes.recompute) {
            plan.recompute = recompute;
            if (inner_rules) {
              if (const PlanConstraintMask refused = FrameworkRefusals(plan, framework)) {
                CountRejected(refused, plan, ordinal++, 1, state);
                continue;
              }
            }
            EvaluateCandidate(job, &evaluator, plan, ordinal++, state, rows);
          }
        }
      }
    }
  }
  if (job.dump) job.dump->AddMesh(mesh_index, std::move(dump_rows));
}

int ThreadCount(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// The probe (SearchOptions::probe) judged on its own before the walk; when it is a
// fitting grid point, *key places it in the ranking order so the walk can rank it.
ProbeReport JudgeProbe(const Job& job, const ParallelPlan& plan, ProbeKey* key) {
  ProbeReport report;
  report.plan = plan;
  report.candidate = job.space.Canonical(plan);
  report.violations = Validate(report.candidate, job.model, job.training,
                               job.space.world_size(), job.space.tp_group_limit());
  const std::optional<int64_t> ordinal = job.space.OrdinalOf(report.candidate);
  report.in_space = ordinal.has_value();
  if (report.violations.empty()) {
    report.cost = Estimate(job.model, job.cluster, job.training, report.candidate, job.estimate);
    if (report.cost->fits && ordinal) *key = {true, report.cost->tokens_per_s, *ordinal};
  }
  return report;
}

// Every mesh walked by SearchMesh() on a pool of workers, one state each. Workers take
// the next mesh from a shared counter; with a progress callback worker 0 runs on its own
// thread too, and the calling thread reports about ten times a second.
std::vector<WorkerState> WalkMeshes(const Job& job, const SearchOptions& options) {
  const int64_t num_meshes = job.space.num_meshes();
  const int num_threads = static_cast<int>(
      std::clamp<int64_t>(ThreadCount(options.threads), 1, std::max<int64_t>(num_meshes, 1)));
  std::vector<WorkerState> states(num_threads, WorkerState(options.top_k));
  std::atomic<int64_t> next_mesh{0};
  std::atomic<int64_t> meshes_done{0};
  std::mutex mutex;
  std::condition_variable finished_cv;
  int finished = 0;

  auto worker = [&](int t) {
    for (int64_t m = next_mesh++; m < num_meshes; m = next_mesh++) {
      SearchMesh(job, m, states[t]);
      ++meshes_done;
    }
    std::lock_guard lock(mutex);
    ++finished;
    finished_cv.notify_one();
  };
  // Workers 1.. on threads, as many as the system starts (planner/worker_threads.h);
  // worker 0 on this thread, or on one more while this thread reports progress.
  std::vector<std::thread> threads;
  const int started = 1 + StartWorkers(threads, 1, num_threads - 1, worker);
  if (options.progress && StartWorkers(threads, 0, 1, worker) == 1) {
    std::unique_lock lock(mutex);
    while (!finished_cv.wait_for(lock, std::chrono::milliseconds(100),
                                 [&] { return finished == started; }))
      options.progress(meshes_done.load(), num_meshes);
    options.progress(num_meshes, num_meshes);
  } else {
    worker(0);
  }
  for (std::thread& thread : threads) thread.join();
  states.erase(states.begin() + started, states.end());  // workers never started hold nothing
  return states;
}

// One worker's rule tallies added to `into`; each rule's example is the lowest-ordinal
// one over the workers (example_ordinal: the ordinal of each example kept so far).
void MergeConstraints(const WorkerState& s, std::array<ConstraintTally, kNumPlanConstraints>& into,
                      std::array<int64_t, kNumPlanConstraints>& example_ordinal) {
  for (int c = 0; c < kNumPlanConstraints; ++c) {
    ConstraintTally& tally = into[c];
    tally.removed += s.constraints[c].removed;
    tally.violated += s.constraints[c].violated;
    if (s.constraints[c].example && (!tally.example || s.example_ordinal[c] < example_ordinal[c])) {
      tally.example = s.constraints[c].example;
      example_ordinal[c] = s.example_ordinal[c];
    }
  }
}

// The workers' states merged into `result` in thread order (every merge rule is
// order-independent): counts, rule tallies, the smallest plan, the top K and the
// Pareto frontier. Returns how many fitting plans rank above the probe.
int64_t MergeWorkers(std::vector<WorkerState>& states, int top_k, SearchResult& result) {
  std::vector<RankedPlan> top;
  ParetoFrontier pareto;
  std::array<int64_t, kNumPlanConstraints> example_ordinal{};
  int64_t better_than_probe = 0;
  for (WorkerState& s : states) {
    result.valid += s.valid;
    result.variants += s.variants;
    result.fitting += s.fitting;
    MergeConstraints(s, result.constraints, example_ordinal);
    if (s.smallest && (!result.smallest || UsesLessMemory(*s.smallest, *result.smallest)))
      result.smallest = s.smallest;
    top.insert(top.end(), s.top.items().begin(), s.top.items().end());
    pareto.Merge(s.pareto);
    better_than_probe += s.better_than_probe;
    result.knobs.Add(s.knobs);
    result.removed_by_host_memory += s.host_memory_exceeded;
  }
  std::sort(top.begin(), top.end(), [](const RankedPlan& a, const RankedPlan& b) {
    return Better(a, b);
  });
  if (static_cast<int>(top.size()) > top_k) top.resize(std::max(top_k, 0));
  result.top = std::move(top);
  result.pareto = pareto.points();
  result.removed_by_memory = result.valid + result.variants - result.fitting;
  return better_than_probe;
}

}  // namespace

// Judge the probe -> walk the meshes on the workers -> merge their states -> time it.
SearchResult Search(const ModelSpec& model, const ClusterSpec& cluster,
                    const TrainingSpec& training, const SearchOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = ProcessCpuSeconds();
  const PlanSpace space(model, training, cluster, options.space);
  EstimateOptions estimate;
  estimate.memory_model = options.memory_model;
  estimate.memory_headroom = options.memory_headroom;
  Job job{model, cluster, training, space, estimate, ProbeKey{}, options.dump};
  if (space.size() > options.max_candidates)
    throw InputError(
        {"<command line>"}, "search",
        fmt::format("the grid has {} candidate plans ({} dp x tp x pp x cp meshes x {} "
                    "micro-batch sizes x sp, schedule, ZeRO and recompute choices); expected at "
                    "most {} (kMaxSearchCandidates, docs/limits.md): pin keys with --only (e.g. "
                    "--only mbs=1 or --only tp=8,pp=1), or choose a --global-batch with fewer "
                    "divisors",
                    space.size(), space.num_meshes(), space.num_micro_batches(),
                    options.max_candidates));
  SearchResult result;
  result.candidates = space.size();

  if (options.probe) result.probe = JudgeProbe(job, *options.probe, &job.probe);
  std::vector<WorkerState> states = WalkMeshes(job, options);
  const int64_t better_than_probe = MergeWorkers(states, options.top_k, result);
  if (result.smallest) ExplainNoFit(cluster, estimate, &result.smallest->cost);
  if (job.probe.active) result.probe->rank = better_than_probe + 1;

  result.threads = static_cast<int>(states.size());
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.cpu_s = ProcessCpuSeconds() - cpu_start;
  result.evaluations_per_s =
      result.wall_s > 0 ? static_cast<double>(result.valid + result.variants) / result.wall_s : 0;
  return result;
}

std::string ExampleMessage(const SearchResult& result, PlanConstraint constraint,
                           const ModelSpec& model, const ClusterSpec& cluster,
                           const TrainingSpec& training, const SearchOptions& options) {
  const ConstraintTally& tally = result.constraints[static_cast<int>(constraint)];
  if (!tally.example) return "";
  const int64_t tp_limit = TpGroupLimit(cluster, options.space.allow_tp_across_nodes);
  for (const PlanViolation& v :
       Validate(*tally.example, model, training, cluster.world_size(), tp_limit))
    if (v.constraint == ConstraintId(constraint)) return v.message;
  return "";
}

std::string DescribeNoValidPlan(const SearchResult& result, const ModelSpec& model,
                                const ClusterSpec& cluster, const TrainingSpec& training,
                                const SearchOptions& options) {
  std::string out = "no valid plan splits " + std::to_string(cluster.world_size()) +
                    " GPUs (--cluster " + cluster.name + ") for " + model.name +
                    " with --global-batch " + std::to_string(training.global_batch) +
                    " and --seq " + std::to_string(training.seq_len);
  if (!options.space.pins.empty()) out += " and --only " + options.space.pins.ToString();
  if (result.candidates == 0) {
    return out + ": no dp*tp*pp*cp split of the world size matches the pinned values";
  }
  out += ": each of the " + std::to_string(result.candidates) + " candidates breaks a rule:";
  for (int c = 0; c < kNumPlanConstraints; ++c) {
    const ConstraintTally& tally = result.constraints[c];
    if (tally.removed == 0) continue;
    const auto constraint = static_cast<PlanConstraint>(c);
    out += "\n  " + std::string(ConstraintId(constraint)) + ": " + std::to_string(tally.removed) +
           " (e.g. " + ExampleMessage(result, constraint, model, cluster, training, options) +
           ")";
  }
  return out;
}

}  // namespace meshplan
