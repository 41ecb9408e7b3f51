// Call rate of the analytic cost model: the search evaluates Estimate() per candidate.
// Run: build/tests/bench/meshplan_bench --benchmark_filter=Estimate|StepWork|StepTime
#include <benchmark/benchmark.h>

#include <vector>

#include "planner/cost/cost_model.h"
#include "planner/cost/plan_shape.h"
#include "planner/cost/step_time.h"
#include "planner/cost/step_work.h"

namespace meshplan {
namespace {

// A Llama-2-7B-shaped model on 8 nodes of 8 H100-like GPUs (specs in code: no config files).
struct Setup {
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  std::vector<ParallelPlan> plans;
};

Setup MakeSetup() {
  Setup s;
  s.model.name = "llama2-7b";
  s.model.vocab_size = 32000;
  s.model.hidden = 4096;
  s.model.layers = 32;
  s.model.heads = s.model.kv_heads = 32;
  s.model.ffn_hidden = 11008;
  s.cluster.gpu.memory_bytes = 80'000'000'000;
  s.cluster.gpu.peak_flops_bf16 = 989e12;
  s.cluster.gpu.peak_flops_fp32 = 67e12;
  s.cluster.gpu.memory_bandwidth_Bps = 3.35e12;
  s.cluster.gpu.kernel_overhead_s = 4e-6;
  s.cluster.nodes = 8;
  s.cluster.gpus_per_node = 8;
  s.cluster.intra_node = {"nvlink", 450e9, 3e-6};
  s.cluster.inter_node = {"ib", 50e9, 6e-6};
  s.training.global_batch = 512;
  s.training.seq_len = 4096;
  // A spread of valid plans: DP/ZeRO, TP+SP, PP schedules, CP, recompute.
  auto plan = [](int64_t dp, int64_t tp, int64_t pp, int64_t cp, int zero, bool sp,
                 Recompute r, PipelineSchedule schedule, int64_t vpp) {
    ParallelPlan p;
    p.dp = dp, p.tp = tp, p.pp = pp, p.cp = cp, p.zero_stage = zero, p.sequence_parallel = sp;
    p.recompute = r, p.schedule = schedule, p.virtual_stages = vpp;
    return p;
  };
  using R = Recompute;
  using S = PipelineSchedule;
  s.plans = {plan(64, 1, 1, 1, 1, false, R::kNone, S::k1F1B, 1),
             plan(8, 8, 1, 1, 1, true, R::kSelective, S::k1F1B, 1),
             plan(4, 4, 4, 1, 1, true, R::kNone, S::k1F1B, 1),
             plan(2, 8, 4, 1, 0, true, R::kFull, S::kInterleaved, 2),
             plan(16, 2, 1, 2, 3, true, R::kNone, S::k1F1B, 1),
             plan(8, 2, 4, 1, 2, false, R::kSelective, S::kZeroBubbleH1, 1)};
  return s;
}

void BM_Estimate(benchmark::State& state) {
  const Setup s = MakeSetup();
  EstimateOptions options;
  options.memory_model = state.range(0) == 0 ? MemoryModel::kSeed : MemoryModel::kDetailed;
  size_t i = 0;
  for (auto _ : state) {
    const PlanCost cost = Estimate(s.model, s.cluster, s.training, s.plans[i], options);
    benchmark::DoNotOptimize(cost.tokens_per_s);
    i = (i + 1) % s.plans.size();
  }
  state.SetLabel(state.range(0) == 0 ? "seed memory" : "detailed memory");
}
BENCHMARK(BM_Estimate)->Arg(0)->Arg(1);

void BM_BuildStepWork(benchmark::State& state) {
  const Setup s = MakeSetup();
  size_t i = 0;
  for (auto _ : state) {
    const StepWork w = BuildStepWork(s.model, s.training, s.plans[i]);
    benchmark::DoNotOptimize(w.block.forward.matmul_flops);
    i = (i + 1) % s.plans.size();
  }
}
BENCHMARK(BM_BuildStepWork);

// The same from each plan's shape, derived beforehand: what the search pays per ZeRO,
// recompute and overlap / offload variant of a grid point (planner/cost/plan_evaluator.h).
void BM_BuildStepWorkFromShape(benchmark::State& state) {
  const Setup s = MakeSetup();
  std::vector<PlanShape> shapes;
  for (const ParallelPlan& p : s.plans) shapes.push_back(MakePlanShape(s.model, s.training, p));
  size_t i = 0;
  for (auto _ : state) {
    StepWork w;
    BuildStepWork(s.model, s.training, s.plans[i], shapes[i], &w);
    benchmark::DoNotOptimize(w.block.forward.matmul_flops);
    i = (i + 1) % s.plans.size();
  }
}
BENCHMARK(BM_BuildStepWorkFromShape);

void BM_AnalyticStepTime(benchmark::State& state) {
  const Setup s = MakeSetup();
  std::vector<StepWork> works;
  for (const ParallelPlan& p : s.plans) works.push_back(BuildStepWork(s.model, s.training, p));
  size_t i = 0;
  for (auto _ : state) {
    const StepTimeBreakdown t = AnalyticStepTime(works[i], s.cluster, s.training.precision);
    benchmark::DoNotOptimize(t.total_s);
    i = (i + 1) % works.size();
  }
}
BENCHMARK(BM_AnalyticStepTime);

}  // namespace
}  // namespace meshplan
