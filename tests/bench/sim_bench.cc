// Simulator benchmarks:
//  * one step of Llama 3.1 405B with tp=8, pp=16, dp=128, interleaved, 16 micro-batches
//    (goal: under 50 ms). Interleaving needs layers % (pp * vpp) == 0 and the model has
//    126 layers, so the benchmark uses 128 (Llama 3 itself trained 405B with pp=16 by
//    giving the first and last stage one layer less, which ParallelPlan does not
//    express). sp=1, zero=1, global batch 2048 x 8192 tokens, 16384 H100.
//  * re-ranking the best 100 plans of each plan-search benchmark by simulation
//    (`meshplan search --simulate-top 100`; goal: under 5 s).
//   build/tests/bench/meshplan_bench --benchmark_filter=Sim
#include <benchmark/benchmark.h>

#include "planner/config/config_loader.h"
#include "planner/search/search.h"
#include "planner/search/search_benchmarks.h"
#include "simulator/rerank.h"
#include "simulator/simulate.h"

namespace meshplan {
namespace {

struct Setup405B {
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  ParallelPlan plan;
};

Setup405B Load405B(int64_t vpp) {
  Setup405B s{LoadModel("llama3.1-405b"), LoadCluster("16384xh100-ib"), {}, {}};
  s.model.layers = 128;
  s.training.global_batch = 2048;
  s.training.seq_len = 8192;
  s.plan = ParsePlanString("dp=128,tp=8,pp=16,sp=1,zero=1,schedule=interleaved");
  s.plan.virtual_stages = vpp;
  return s;
}

// One simulated step; range(0) = vpp, range(1) = 1 to record the timeline.
void BM_SimStep405B(benchmark::State& state) {
  const Setup405B s = Load405B(state.range(0));
  const SimOptions options{.timeline = state.range(1) != 0};
  SimResult last;
  for (auto _ : state) {
    last = Simulate(s.model, s.cluster, s.training, s.plan, options);
    benchmark::DoNotOptimize(last.stages.data());  // (not a double: GCC mishandles "+m,r")
  }
  state.counters["ops"] = static_cast<double>(last.ops);
  state.counters["events"] = static_cast<double>(last.events);
  state.counters["microbatches"] =
      static_cast<double>(s.plan.num_microbatches(s.training.global_batch));
  state.counters["step_s"] = last.time.total_s;
}
BENCHMARK(BM_SimStep405B)
    ->ArgsProduct({{2, 4}, {0, 1}})
    ->ArgNames({"vpp", "timeline"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Re-ranking the best 100 plans of a search benchmark case (the search runs once,
// outside the timing); range(0) = case, range(1) = threads (0 = all cores).
void BM_SimRerankTop100(benchmark::State& state) {
  const SearchBenchmarkCase c = SearchBenchmarkCases()[state.range(0)];
  const ModelSpec model = LoadModel(c.model);
  const ClusterSpec cluster = LoadCluster(c.cluster);
  TrainingSpec training;
  training.global_batch = c.global_batch;
  training.seq_len = c.seq_len;
  SearchOptions search;
  search.top_k = 100;
  const SearchResult found = Search(model, cluster, training, search);
  const int threads = static_cast<int>(state.range(1));
  for (auto _ : state) {
    const std::vector<SimulatedPlan> ranked =
        RerankBySimulation(model, cluster, training, found.top, threads);
    benchmark::DoNotOptimize(ranked.data());
  }
  state.SetLabel(c.name);
  state.counters["plans"] = static_cast<double>(found.top.size());
}
BENCHMARK(BM_SimRerankTop100)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"case", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
}  // namespace meshplan
