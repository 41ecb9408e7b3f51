// The CI loop for step time without a GPU: calibrate this CPU (meshplan calibrate --quick),
// predict the step time of single-process plans of tiny-llama with the cost model on the
// calibrated hardware (Estimate, through ComparePlan), run them with the executor (RunRank,
// what `meshplan run --nproc 1` does per rank) and require the median step time after
// warm-up within 15% of the prediction.
//
// Timing on a shared machine: a reference (one block's forward + backward) is timed when
// calibrating, before every run and after each of its timed steps; a run during which the
// machine was markedly slower or faster than while calibrating (other processes took the
// cores, caches or memory bandwidth) says nothing about the model, so the machine is
// calibrated again and the run repeated (at most 5 attempts); the attempt with the
// steadiest reference is the one checked. The tolerance itself is never widened: a plan
// that misses it on a steady machine fails the test; one that misses it only while the
// machine drifted in every attempt is no verdict, and when no plan failed but such a plan
// remains, the test exits 77 (CTest: skipped) naming the drift. The [timing] tag makes
// CTest run it alone (tests/CMakeLists.txt, RUN_SERIAL); by hand:
//   build/tests/executor_tests "[loop]" -s  (-s prints each plan)
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "executor/calibration/calibrate.h"
#include "executor/calibration/micro_benchmarks.h"
#include "executor/calibration/timing.h"
#include "executor/comm/single_rank_communicator.h"
#include "executor/device/host_memory.h"
#include "executor/run_rank.h"
#include "planner/config/config_loader.h"
#include "planner/config/hardware_yaml.h"
#include "planner/measure/compare.h"
#include "planner/names.h"

namespace meshplan {
namespace {

constexpr double kTolerancePct = 15.0;
constexpr double kSteadyMachine = 0.10;  // reference op within 10% of its calibration time
// Runs of a plan (each after a new calibration) while the reference op drifts past
// kSteadyMachine; the steadiest decides. On a noisy host (drift 12-28% on 2026-11-24) three
// were not enough; a steady machine needs one.
constexpr int kAttempts = 5;

// One block's forward + backward at 1x64 (tiny-llama): a few milliseconds of the same op
// mix as a step, so it slows down with the step when other processes take the cores, the
// caches or the memory bandwidth.
double ReferenceSeconds(const ModelSpec& model) {
  BenchContext ctx;
  ctx.timing.min_total_s = 0.05;
  ctx.timing.min_repeats = 9;
  ctx.timing.flush_bytes = DefaultFlushBytes();
  double seconds = 0;
  for (const StepSample& s : BenchmarkBlock(model, {1, 64}, ctx)) seconds += s.sample.seconds;
  return seconds;
}

struct PlanCase {
  int64_t global_batch, seq, micro_batch;
  Recompute recompute;
};

PlanFile MakePlan(const ModelSpec& model, const ClusterSpec& cluster, const PlanCase& c) {
  PlanFile pf;
  pf.model = model;
  pf.cluster = cluster;
  pf.training.global_batch = c.global_batch;
  pf.training.seq_len = c.seq;
  pf.training.precision = Precision::kFp32;
  pf.training.steps = 6;
  pf.plan.micro_batch = c.micro_batch;
  pf.plan.recompute = c.recompute;
  return pf;
}

struct Attempt {
  Comparison comparison;
  double reference_drift = 0;  // max |reference / reference at calibration - 1|
};

Attempt RunAndCompare(const PlanFile& pf, double reference_s) {
  RunOptions options;
  options.steps = pf.training.steps;
  options.warmup_steps = 2;
  // The reference after every timed step (outside the step's timer): a burst of load in
  // the middle of the run shows up beside the step it slowed.
  std::vector<double> references = {ReferenceSeconds(pf.model)};
  options.after_step = [&](int64_t step) {
    if (step > options.warmup_steps) references.push_back(ReferenceSeconds(pf.model));
  };
  const DeviceMesh one(pf.plan, /*world_rank=*/0, nullptr);
  const RankMeasurement rank = RunRank(pf, options, one);
  Attempt a;
  a.comparison = ComparePlan(pf, CombineRankMeasurements(pf, options, {rank}), kTolerancePct);
  for (const double r : references)
    a.reference_drift = std::max(a.reference_drift, std::abs(r / reference_s - 1));
  return a;
}

const FigureComparison& StepTime(const Comparison& c) {
  for (const FigureComparison& f : c.figures)
    if (f.figure == "step time") return f;
  FAIL("no step time figure in the comparison");
  throw std::logic_error("unreachable");
}

// CTest runs the [timing] tests alone (tests/CMakeLists.txt, RUN_SERIAL): with other tests
// sharing the 2 cores the reference op was seen 21% slower during a run. By hand:
//   build/tests/executor_tests "[timing]" -s
// A calibration of this CPU (quick, one thread: what the runs use) taken while the
// machine's speed held still, as the cluster the plans are predicted on.
struct Calibrated {
  CalibrationResult result;
  ClusterSpec cluster;
  double reference_s = 0;  // the reference op right after calibrating
};

Calibrated Calibrate(const ModelSpec& model) {
  CalibrationOptions options;
  options.model = model;
  options.quick = true;
  options.threads = 1;
  options.base.name = "cpu-loop-test";
  Calibrated c;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const double before = ReferenceSeconds(model);
    c.result = RunCalibration(options);
    c.reference_s = ReferenceSeconds(model);
    if (std::abs(c.reference_s / before - 1) <= kSteadyMachine) break;
    WARN("the machine's speed changed while calibrating (reference op " << before * 1e3 << " -> "
                                                                          << c.reference_s * 1e3
                                                                          << " ms); again");
  }
  c.cluster.name = "cpu-loop-test-1x";
  c.cluster.gpu = c.result.gpu;
  c.cluster.intra_node = c.cluster.inter_node = {"loopback (unused: one rank)", 1e9, 1e-4};
  return c;
}

TEST_CASE("calibrate, predict, run, compare: CPU step time of 6 plans within 15%",
          "[executor][calibration][timing][loop]") {
  RetainFreedHostMemory();
  const ModelSpec model = LoadModel("tiny-llama");

  // 1. Calibrate.
  Calibrated calibrated = Calibrate(model);
  INFO("calibration: " << calibrated.result.gpu.source);
  CHECK(calibrated.result.seconds < 20);

  // 2. The hardware file round trip: what `meshplan calibrate --out` writes, LoadGpu reads.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("meshplan_calibration_loop_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path hw = dir / "cpu-loop-test.yaml";
  std::ofstream(hw) << GpuSpecToYaml(calibrated.result.gpu, {});
  const GpuSpec gpu = LoadGpu(hw.string());
  CHECK(gpu.name == "cpu-loop-test");
  CHECK(gpu.source == calibrated.result.gpu.source);
  CHECK(gpu.matmul_efficiency == Approx(calibrated.result.gpu.matmul_efficiency).epsilon(1e-3));
  CHECK(gpu.peak_flops_fp32 == Approx(calibrated.result.gpu.peak_flops_fp32).epsilon(1e-3));
  std::filesystem::remove_all(dir);

  // 3. Predict, run, compare: micro-batch, sequence and recompute varied (fp32, dp = 1).
  // When the machine's speed moved away from the calibration's during a run (reference op
  // drift above 10%), the machine is calibrated again before the next attempt: the loop
  // is "calibrate, predict, run", each prediction on the current calibration.
  const std::vector<PlanCase> cases = {
      {2, 64, 1, Recompute::kNone},       {4, 128, 2, Recompute::kSelective},
      {4, 128, 2, Recompute::kFull},      {2, 256, 1, Recompute::kNone},
      {4, 64, 4, Recompute::kSelective},  {2, 256, 1, Recompute::kFull},
  };
  std::vector<std::string> unjudged;  // missed while the machine drifted in every attempt
  bool failed = false;                 // missed on a steady machine
  for (const PlanCase& c : cases) {
    Attempt best;
    best.reference_drift = 1e9;
    for (int attempt = 0; attempt < kAttempts && best.reference_drift > kSteadyMachine; ++attempt) {
      if (attempt > 0) {
        WARN("reference op drift " << best.reference_drift * 100 << "% during the run: calibrating again");
        calibrated = Calibrate(model);
      }
      const PlanFile pf = MakePlan(model, calibrated.cluster, c);
      REQUIRE(Validate(pf.plan, pf.model, pf.training, 1).empty());
      Attempt a = RunAndCompare(pf, calibrated.reference_s);
      if (a.reference_drift < best.reference_drift) best = std::move(a);
    }
    const FigureComparison& step = StepTime(best.comparison);
    std::ostringstream line;
    line << "mbs=" << c.micro_batch << " recompute=" << ToString(c.recompute) << " gb="
         << c.global_batch << " seq=" << c.seq << ": predicted " << step.predicted * 1e3
         << " ms, measured " << step.measured * 1e3 << " ms (" << step.error_pct
         << "%); reference op drift " << best.reference_drift * 100 << "%";
    const bool within = step.status == FigureStatus::kWithin && std::abs(step.error_pct) <= kTolerancePct;
    if (!within && best.reference_drift > kSteadyMachine) {
      WARN("no verdict (the machine drifted in every attempt): " << line.str());
      unjudged.push_back(line.str());
      continue;
    }
    INFO(line.str());
    failed = failed || !within;
    CHECK(step.status == FigureStatus::kWithin);
    CHECK(std::abs(step.error_pct) <= kTolerancePct);
  }
  if (!failed && !unjudged.empty()) {
    std::cerr << "SKIPPED (exit 77): " << unjudged.size() << " of " << cases.size()
              << " plans missed 15% while the machine's speed drifted more than "
              << kSteadyMachine * 100 << "% in every attempt; no plan missed on a steady machine\n";
    for (const std::string& u : unjudged) std::cerr << "  " << u << "\n";
    std::exit(77);
  }
}

}  // namespace
}  // namespace meshplan
