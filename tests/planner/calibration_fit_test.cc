// The calibration fit (planner/measure/calibration_fit.h) on synthetic samples made with known
// rates, and the hardware YAML writer (planner/config/hardware_yaml.h) against LoadGpu.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "planner/config/config_loader.h"
#include "planner/config/hardware_yaml.h"
#include "planner/cost/collective_time.h"
#include "planner/measure/calibration_fit.h"

namespace meshplan {
namespace {

// A ComputeWork of nominal FLOPs, bytes and kernels (no GEMM shapes: timed at the rates).
ComputeWork Work(double matmul_flops, double attention_flops, double memory_bytes, int64_t kernels) {
  ComputeWork w;
  w.matmul_flops = matmul_flops;
  w.attention_flops = attention_flops;
  w.memory_bytes = memory_bytes;
  w.kernels = kernels;
  return w;
}


namespace fs = std::filesystem;

// A CPU-like machine: 100 GFLOP/s matmuls, 40 GFLOP/s attention, 20 GB/s, 5 us per kernel.
ComputeRates TrueRates() {
  ComputeRates r;
  r.matmul_flops_per_s = 100e9;
  r.attention_flops_per_s = 40e9;
  r.memory_Bps = 20e9;
  r.kernel_overhead_s = 5e-6;
  return r;
}

// Matmul, attention and memory samples over three orders of magnitude, timed by the
// model itself (times multiplied by `noise` factors when given).
std::vector<CalibrationSample> Samples(const ComputeRates& rates, double noise = 0) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
  std::vector<CalibrationSample> out;
  for (double scale : {1e6, 1e7, 1e8, 1e9}) {
    const std::vector<std::pair<std::string, ComputeWork>> works = {
        {"matmul", Work(scale, 0, 0, 1)},
        {"matmul_bwd", Work(2 * scale, 0, 0, 2)},
        {"attention", Work(0, scale / 2, 0, 2)},
        {"memory", Work(0, 0, scale / 20, 6)},
    };
    for (const auto& [name, work] : works) {
      CalibrationSample s;
      s.name = name;
      s.work = work;
      s.seconds = TimeOf(work, rates).total() * (noise > 0 ? jitter(rng) : 1.0);
      out.push_back(s);
    }
  }
  return out;
}

TEST_CASE("calibration fit: recovers the rates that made exact samples", "[planner][calibration]") {
  const CalibrationFit fit = FitComputeRates(Samples(TrueRates()));
  CHECK(fit.rates.matmul_flops_per_s == Approx(100e9).epsilon(1e-9));
  CHECK(fit.rates.attention_flops_per_s == Approx(40e9).epsilon(1e-9));
  CHECK(fit.rates.memory_Bps == Approx(20e9).epsilon(1e-9));
  CHECK(fit.rates.kernel_overhead_s == Approx(5e-6).epsilon(1e-9));
  CHECK(fit.max_relative_error < 1e-9);
  CHECK(fit.weighted_error < 1e-9);
  REQUIRE(fit.predicted_s.size() == 16);
}

TEST_CASE("calibration fit: 5% timing noise moves the rates by a few percent",
          "[planner][calibration]") {
  const CalibrationFit fit = FitComputeRates(Samples(TrueRates(), 0.05));
  CHECK(fit.rates.matmul_flops_per_s == Approx(100e9).epsilon(0.05));
  CHECK(fit.rates.attention_flops_per_s == Approx(40e9).epsilon(0.05));
  CHECK(fit.rates.memory_Bps == Approx(20e9).epsilon(0.05));
  CHECK(fit.rms_relative_error < 0.05);
  CHECK(fit.rms_relative_error > 0.005);
}

TEST_CASE("calibration fit: weights choose which errors count", "[planner][calibration]") {
  // Two matmul samples that disagree by 2x: the heavily weighted one wins.
  std::vector<CalibrationSample> s(2);
  s[0].name = "small";
  s[0].work = Work(1e9, 0, 0, 1);
  s[0].seconds = 0.01;  // 100 GFLOP/s
  s[0].weight = 1e3;
  s[1].name = "large";
  s[1].work = Work(1e9, 0, 0, 1);
  s[1].seconds = 0.02;  // 50 GFLOP/s
  s[1].weight = 1;
  const CalibrationFit fit = FitComputeRates(s);
  CHECK(fit.rates.matmul_flops_per_s == Approx(100e9).epsilon(0.01));
  CHECK(fit.weighted_error < 0.01);       // the heavy sample is fitted...
  CHECK(fit.max_relative_error > 0.45);   // ...the light one is 2x off
}

TEST_CASE("calibration fit: a negative overhead is fixed at zero", "[planner][calibration]") {
  // Small kernels FASTER per FLOP than large ones would need c < 0: not allowed.
  std::vector<CalibrationSample> s;
  for (double flops : {1e6, 1e7, 1e8}) {
    CalibrationSample x;
    x.name = "matmul";
    x.work = Work(flops, 0, 0, 1);
    x.seconds = flops / 100e9 - 2e-6;  // sub-linear: an intercept below zero
    s.push_back(x);
  }
  const CalibrationFit fit = FitComputeRates(s);
  CHECK(fit.rates.kernel_overhead_s == 0);
  CHECK(fit.rates.matmul_flops_per_s > 0);
  CHECK(fit.rates.attention_flops_per_s == 0);  // no attention sample: not fitted
}

TEST_CASE("calibration fit: bad samples are rejected", "[planner][calibration]") {
  CHECK_THROWS_AS(FitComputeRates({}), std::invalid_argument);
  CalibrationSample zero_time;
  zero_time.name = "x";
  zero_time.work = Work(1e9, 0, 0, 1);
  CHECK_THROWS_AS(FitComputeRates({zero_time}), std::invalid_argument);
  CalibrationSample no_work;
  no_work.name = "y";
  no_work.seconds = 1;
  CHECK_THROWS_AS(FitComputeRates({no_work}), std::invalid_argument);
  // Memory work that explains none of the time: no memory rate can be fitted.
  std::vector<CalibrationSample> s = Samples(TrueRates());
  for (CalibrationSample& x : s)
    if (x.name == "memory") x.seconds = TimeOf(Work(0, 0, 0, x.work.kernels), TrueRates()).total();
  CHECK_THROWS_AS(FitComputeRates(s), std::runtime_error);
}

TEST_CASE("calibration: a CPU profile takes its measured peaks", "[planner][calibration]") {
  CalibrationFit fit;
  fit.rates = TrueRates();
  GpuSpec base;
  base.name = "cpu-test";
  base.memory_bytes = 1 << 30;
  MeasuredPeaks peaks{120e9, 30e9};
  std::vector<std::string> warnings;
  const GpuSpec g = ApplyCalibration(base, fit, peaks, Precision::kFp32, &warnings);
  CHECK(g.peak_flops_fp32 == 120e9);
  CHECK(g.peak_flops_bf16 == 120e9);
  CHECK(g.memory_bandwidth_Bps == 30e9);
  CHECK(g.matmul_efficiency == Approx(100.0 / 120));
  CHECK(g.attention_efficiency == Approx(40.0 / 120));
  CHECK(g.memory_bandwidth_efficiency == Approx(20.0 / 30));
  CHECK(g.kernel_overhead_s == 5e-6);
  CHECK(warnings.empty());
  // The cost model's rates from the calibrated spec are the fitted ones.
  const ComputeRates back = RatesFor(g, Precision::kFp32);
  CHECK(back.matmul_flops_per_s == Approx(100e9));
  CHECK(back.memory_Bps == Approx(20e9));
}

TEST_CASE("calibration: a GPU keeps its data-sheet peaks, efficiency capped at 1",
          "[planner][calibration]") {
  CalibrationFit fit;
  fit.rates.matmul_flops_per_s = 700e12;
  fit.rates.attention_flops_per_s = 1200e12;  // above the peak: impossible
  fit.rates.memory_Bps = 2.8e12;
  GpuSpec base = LoadGpu("h100-sxm");
  std::vector<std::string> warnings;
  const GpuSpec g = ApplyCalibration(base, fit, {}, Precision::kBf16, &warnings);
  CHECK(g.peak_flops_bf16 == base.peak_flops_bf16);
  CHECK(g.matmul_efficiency == Approx(700 / 989.4));
  CHECK(base.matmul_ceiling_efficiency > 0);  // the data sheet's public sweep (MAMF)...
  CHECK(g.matmul_ceiling_efficiency == 0);    // ...gives way to this machine's measured GEMMs
  CHECK(g.attention_efficiency == 1.0);
  CHECK(g.memory_bandwidth_efficiency == Approx(2.8 / 3.35));
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("attention") && Catch::Contains("capped"));
}

TEST_CASE("network fit: recovers latency and bandwidth of ring collectives",
          "[planner][calibration]") {
  NetworkTier truth{"t", 2e9, 50e-6};
  ClusterSpec cluster;
  cluster.gpus_per_node = 4;
  cluster.intra_node = truth;
  cluster.inter_node = truth;
  std::vector<CollectiveSample> samples;
  for (int64_t n : {2, 4})
    for (CollectiveKind kind :
         {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather})
      for (double bytes : {1e4, 1e6, 1e8}) {
        CommGroup group;
        group.inner = {1, n};
        samples.push_back({kind, bytes, n, CollectiveTime(kind, bytes, group, cluster), {}});
      }
  const NetworkTier fit = FitNetworkTier(samples, "fitted");
  CHECK(fit.name == "fitted");
  CHECK(fit.bandwidth_Bps == Approx(2e9).epsilon(1e-6));
  CHECK(fit.latency_s == Approx(50e-6).epsilon(1e-6));
  CHECK_THROWS_AS(FitNetworkTier({{CollectiveKind::kAllReduce, 1e6, 1, 1.0, {}}}, "x"),
                  std::invalid_argument);
}

TEST_CASE("network fit: an all-reduce of the backend's own gets its own figures, which time "
          "all-reduces only and survive both writers",
          "[planner][calibration][config]") {
  // Gloo-like: reduce-scatter and all-gather rings at 2 GB/s and 50 us per step, an
  // all-reduce three times slower per step and at 1 GB/s.
  NetworkTier truth{"t", 2e9, 50e-6};
  truth.allreduce_latency_s = 150e-6;
  truth.allreduce_bandwidth_Bps = 1e9;
  std::vector<CollectiveSample> samples;
  for (CollectiveKind kind :
       {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather})
    for (double bytes : {1e4, 1e6, 1e8}) {
      CollectiveSample s{kind, bytes, 2, 0, {}};
      s.seconds = RingTime(kind, bytes, 2, truth);
      samples.push_back(s);
    }
  // By hand: a 1e6-byte all-reduce over 2 ranks sends 1e6 bytes in 2 steps.
  CHECK(samples[1].seconds == Approx(2 * 150e-6 + 1e6 / 1e9));
  CHECK(samples[4].seconds == Approx(1 * 50e-6 + 0.5e6 / 2e9));  // reduce-scatter, 1e6
  const NetworkTier fit = FitNetworkTier(samples, "fitted");
  CHECK(fit.latency_s == Approx(50e-6).epsilon(1e-6));
  CHECK(fit.bandwidth_Bps == Approx(2e9).epsilon(1e-6));
  CHECK(fit.allreduce_latency_s == Approx(150e-6).epsilon(1e-6));
  CHECK(fit.allreduce_bandwidth_Bps == Approx(1e9).epsilon(1e-6));
  // Only all-reduce samples: they are the tier itself.
  const std::vector<CollectiveSample> only(samples.begin(), samples.begin() + 3);
  const NetworkTier alone = FitNetworkTier(only, "ar");
  CHECK_FALSE(alone.has_allreduce());
  CHECK(alone.latency_s == Approx(150e-6).epsilon(1e-6));

  // The cost model times a dp all-reduce on them, a reduce-scatter on the tier.
  ClusterSpec cluster;
  cluster.gpus_per_node = 2;
  cluster.intra_node = cluster.inter_node = fit;
  CommGroup pair;
  pair.inner = {1, 2};
  CHECK(CollectiveTime(CollectiveKind::kAllReduce, 1e6, pair, cluster) == Approx(samples[1].seconds));
  CHECK(CollectiveTime(CollectiveKind::kReduceScatter, 1e6, pair, cluster) == Approx(samples[4].seconds));

  // Both writers keep the figures: the hardware file's network block and a plan file.
  const fs::path dir = fs::temp_directory_path() / ("meshplan_allreduce_tier_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  HardwareYamlOptions yaml;
  yaml.network = cluster;
  std::ofstream(dir / "hw.yaml") << GpuSpecToYaml(LoadGpu("cpu-ci"), yaml);
  const std::optional<ClusterSpec> back = LoadGpuNetwork((dir / "hw.yaml").string());
  REQUIRE(back);
  CHECK(back->intra_node.allreduce_latency_s == Approx(150e-6).epsilon(1e-3));
  CHECK(back->intra_node.allreduce_bandwidth_Bps == Approx(1e9).epsilon(1e-3));
  PlanFile p;
  p.model = LoadModel("tiny-llama");
  p.cluster = LoadCluster("2xa40-pcie");
  p.cluster.intra_node = fit;
  p.cluster.gpu.threads_per_rank = 2;
  p.plan = ParsePlanString("dp=2");
  p.training.global_batch = 4;
  p.training.seq_len = 64;
  SavePlanFile((dir / "plan.yaml").string(), p);
  const NetworkTier planned = LoadPlanFile((dir / "plan.yaml").string()).cluster.intra_node;
  CHECK(planned.allreduce_latency_s == Approx(fit.allreduce_latency_s).epsilon(1e-9));
  CHECK(planned.allreduce_bandwidth_Bps == Approx(fit.allreduce_bandwidth_Bps).epsilon(1e-9));
  CHECK(LoadPlanFile((dir / "plan.yaml").string()).cluster.gpu.threads_per_rank == 2);
  fs::remove_all(dir);
}

TEST_CASE("hardware YAML: what calibrate writes, LoadGpu reads", "[planner][calibration]") {
  GpuSpec g;
  g.name = "cpu-roundtrip";
  g.source = "calibrated on host 2026-01-01 by meshplan calibrate";
  g.memory_bytes = int64_t{24} << 30;
  g.peak_flops_fp32 = g.peak_flops_bf16 = 108.93e9;
  g.memory_bandwidth_Bps = 44.31e9;
  g.matmul_efficiency = 0.87371;
  g.attention_efficiency = 0.456;
  g.memory_bandwidth_efficiency = 0.41572;
  g.kernel_overhead_s = 1.5523e-6;
  g.threads_per_rank = 3;
  HardwareYamlOptions options;
  options.header = "a test profile\nsecond line";
  ClusterSpec node;
  node.gpus_per_node = 2;
  node.intra_node = {"loopback", 1.85e9, 82.66e-6};
  node.inter_node = {"none", 1e9, 1e-4};
  options.network = node;
  const std::string text = GpuSpecToYaml(g, options);
  CHECK_THAT(text, Catch::StartsWith("# a test profile\n# second line\n"));

  const auto path = std::filesystem::temp_directory_path() /
                    ("meshplan_hw_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << text;
  const GpuSpec back = LoadGpu(path.string());
  const std::optional<ClusterSpec> net = LoadGpuNetwork(path.string());
  std::filesystem::remove(path);
  CHECK(back.name == g.name);
  CHECK(back.source == g.source);
  CHECK(back.memory_bytes == g.memory_bytes);
  CHECK(back.peak_flops_fp32 == Approx(g.peak_flops_fp32).epsilon(5e-4));  // 4 digits
  CHECK(back.peak_flops_tf32 == 0);
  CHECK(back.memory_bandwidth_Bps == Approx(g.memory_bandwidth_Bps).epsilon(5e-4));
  CHECK(back.matmul_efficiency == Approx(0.8737));  // 4 significant digits
  CHECK(back.memory_bandwidth_efficiency == Approx(0.4157));
  CHECK(back.kernel_overhead_s == Approx(1.552e-6));
  CHECK(back.threads_per_rank == 3);  // what `meshplan run` gives each rank
  REQUIRE(net.has_value());
  CHECK(net->gpus_per_node == 2);
  CHECK(net->intra_node.name == "loopback");
  CHECK(net->intra_node.bandwidth_Bps == Approx(1.85e9));
  CHECK(net->intra_node.latency_s == Approx(82.66e-6));
}

TEST_CASE("the committed CPU profile and cluster load", "[planner][calibration]") {
  const GpuSpec cpu = LoadGpu("cpu-ci");
  CHECK_THAT(cpu.source, Catch::StartsWith("calibrated on ") &&
                             Catch::Contains("by meshplan calibrate"));
  CHECK(cpu.peak_flops_fp32 > 0);
  const ClusterSpec cluster = LoadCluster("cpu-1x");
  CHECK(cluster.gpu == cpu);
  CHECK(cluster.world_size() == 1);
}

}  // namespace
}  // namespace meshplan
