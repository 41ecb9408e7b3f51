// Plan-search benchmarks: the two exhaustive searches of
// planner/search/search_benchmarks.h, plus the per-candidate costs they are made of
// (CheckPlan on every grid point, Estimate on every valid one).
//   build/tests/bench/meshplan_bench --benchmark_filter=Search
#include <benchmark/benchmark.h>

#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/search/search.h"
#include "planner/search/search_benchmarks.h"

namespace meshplan {
namespace {

struct BenchSetup {
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
};

BenchSetup Load(const SearchBenchmarkCase& c) {
  BenchSetup s{LoadModel(c.model), LoadCluster(c.cluster), {}};
  s.training.global_batch = c.global_batch;
  s.training.seq_len = c.seq_len;
  return s;
}

// One exhaustive search on all cores (threads = 0) or on `state.range(1)` threads.
void BM_SearchCase(benchmark::State& state) {
  const SearchBenchmarkCase c = SearchBenchmarkCases()[state.range(0)];
  const BenchSetup s = Load(c);
  SearchOptions options;
  options.threads = static_cast<int>(state.range(1));
  SearchResult last;
  for (auto _ : state) {
    last = Search(s.model, s.cluster, s.training, options);
    benchmark::DoNotOptimize(last.top.data());
  }
  state.SetLabel(c.name);
  state.counters["candidates"] = static_cast<double>(last.candidates);
  state.counters["evaluated"] = static_cast<double>(last.valid);
  state.counters["fitting"] = static_cast<double>(last.fitting);
  state.counters["threads"] = last.threads;
  state.counters["evals/s"] = benchmark::Counter(static_cast<double>(last.valid) * state.iterations(),
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SearchCase)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"case", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Estimate() of the 530B case's best plan (what the search calls per valid candidate).
void BM_SearchEstimate530B(benchmark::State& state) {
  const BenchSetup s = Load(SearchBenchmarkCases()[0]);
  const ParallelPlan plan = ParsePlanString(
      "dp=128,tp=8,pp=5,zero=1,sp=1,recompute=selective,schedule=interleaved,vpp=21");
  EstimateOptions options;
  options.memory_headroom = 0.05;
  for (auto _ : state) benchmark::DoNotOptimize(Estimate(s.model, s.cluster, s.training, plan, options));
}
BENCHMARK(BM_SearchEstimate530B);

// CheckPlan() of one grid point (what the search calls per sp x mbs x schedule block).
void BM_SearchCheckPlan(benchmark::State& state) {
  const BenchSetup s = Load(SearchBenchmarkCases()[0]);
  const ParallelPlan plan = ParsePlanString("dp=64,tp=8,pp=10,sp=1,mbs=2,schedule=1f1b");
  for (auto _ : state)
    benchmark::DoNotOptimize(CheckPlan(plan, s.model, s.training, s.cluster.world_size(),
                                       TpGroupLimit(s.cluster, /*allow_tp_across_nodes=*/false)));
}
BENCHMARK(BM_SearchCheckPlan);

}  // namespace
}  // namespace meshplan
