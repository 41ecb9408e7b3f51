// The calibration run (see calibrate.h).
#include "executor/calibration/calibrate.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cmath>
#include <map>
#include <ctime>
#include <stdexcept>

#include "executor/calibration/collective_benchmarks.h"
#include "executor/device/cuda_device.h"
#include "executor/device/host_memory.h"
#include "executor/steady_clock.h"
#include "planner/names.h"

namespace meshplan {
namespace {

std::string HostName() {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "unknown-host";
  return host;
}

std::string TodayUtc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

int64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}


// Weights each sample by its share of a training step of its shape. A micro-batch of shape
// s runs the segments (L blocks, the head) and the embedding ops per_microbatch times each,
// plus the optimizer once (one micro-batch per step: the optimizer's largest share):
//   T_s = sum over segments i of per_microbatch_i * t_i + t_optimizer,
// so weight_i = per_microbatch_i / T_s, and the optimizer, part of every shape's step,
// sqrt(sum_s 1 / T_s^2). The op samples inside the segments (`detail`) get kDetailWeight
// times their own share: enough to tell the kernel classes apart, while the segments,
// timed as they run in a step, set the level.
constexpr double kDetailWeight = 0.3;

void WeightByStepShare(std::vector<StepSample>* samples) {
  double optimizer_s = 0;
  for (const StepSample& s : *samples)
    if (s.per_microbatch == 0) optimizer_s += s.sample.seconds;
  std::map<std::string, double> step_s;
  for (const StepSample& s : *samples)
    if (s.per_microbatch > 0 && !s.detail) step_s[s.shape] += s.per_microbatch * s.sample.seconds;
  double optimizer_weight_sq = 0;
  for (auto& [shape, total] : step_s) {
    total += optimizer_s;
    optimizer_weight_sq += 1.0 / (total * total);
  }
  for (StepSample& s : *samples) {
    if (s.per_microbatch == 0) {
      s.sample.weight = std::sqrt(optimizer_weight_sq);
      continue;
    }
    const auto total = step_s.find(s.shape);
    if (total == step_s.end()) throw std::logic_error("calibration: a sample without its step");
    s.sample.weight = s.per_microbatch / total->second * (s.detail ? kDetailWeight : 1.0);
  }
}

}  // namespace

std::vector<BenchShape> DefaultCalibrationShapes(const std::string& device, const ModelSpec& model,
                                                 bool quick) {
  std::vector<BenchShape> shapes;
  if (device == "cuda") {
    shapes = quick ? std::vector<BenchShape>{{1, 512}, {1, 2048}, {1, 8192}}
                   : std::vector<BenchShape>{{1, 512}, {4, 512}, {1, 2048}, {2, 2048},
                                             {1, 4096}, {1, 8192}};
  } else {
    // The CPU executor's range: micro-batches of 64 to 1024 tokens.
    shapes = quick ? std::vector<BenchShape>{{1, 64}, {2, 64}, {2, 128}, {2, 256}}
                   : std::vector<BenchShape>{{1, 64}, {2, 64}, {2, 128}, {1, 256}, {2, 256},
                                             {4, 256}};
  }
  std::vector<BenchShape> out;
  for (const BenchShape& s : shapes)
    if (model.max_seq == 0 || s.seq <= model.max_seq) out.push_back(s);
  return out;
}

namespace {

// The device, dtype and timing of the benchmarks, checked against the precision asked for;
// fills result->threads and result->device_name.
BenchContext MakeBenchContext(const CalibrationOptions& options, CalibrationResult* result) {
  BenchContext ctx;
  ctx.precision = options.precision;
  if (options.device == "cuda") {
    if (!torch::cuda::is_available())
      throw std::runtime_error(
          "calibrate --device cuda: this LibTorch has no CUDA or no GPU is visible "
          "(torch::cuda::is_available() is false); use --device cpu");
    if (options.precision == Precision::kFp32)
      throw std::runtime_error("calibrate --device cuda: calibrate the precision the plans "
                               "train in: --precision bf16 or mixed (bf16 matmuls)");
    ctx.device = at::Device(at::kCUDA, 0);
    ctx.dtype = at::kBFloat16;
  } else if (options.device == "cpu") {
    RetainFreedHostMemory();  // as meshplan run's ranks: no page faults in steady state
    if (options.precision != Precision::kFp32)
      throw std::runtime_error("calibrate --device cpu: the CPU executor trains in fp32; use "
                               "--precision fp32");
    if (options.threads > 0) at::set_num_threads(options.threads);
  } else {
    throw std::runtime_error("calibrate: unknown device '" + options.device +
                             "'; expected cpu or cuda");
  }
  result->threads = at::get_num_threads();
  result->device_name = ctx.device.is_cuda() ? CudaDeviceName(0)
                                             : fmt::format("cpu ({} threads)", result->threads);
  ctx.timing.min_total_s = options.quick ? 0.04 : 0.1;
  ctx.timing.min_repeats = 5;
  if (!ctx.device.is_cuda()) ctx.timing.flush_bytes = DefaultFlushBytes();  // step-like caches
  return ctx;
}

// Every fitted micro-benchmark (ops, whole blocks and the head, the optimizer), weighted
// by its share of a step, then the fit of the compute rates.
void MeasureAndFit(const CalibrationOptions& options, const GpuSpec& base,
                   const std::vector<BenchShape>& shapes, const BenchContext& ctx,
                   CalibrationResult* result) {
  std::vector<StepSample> step_samples;
  for (auto* bench : {&BenchmarkMatmuls, &BenchmarkAttention, &BenchmarkMemoryOps})
    for (StepSample& s : (*bench)(options.model, shapes, ctx)) step_samples.push_back(std::move(s));
  for (const BenchShape& s : shapes)
    for (auto* segment : {&BenchmarkBlock, &BenchmarkHead})
      for (StepSample& sample : (*segment)(options.model, s, ctx)) step_samples.push_back(std::move(sample));
  if (ctx.device.is_cuda())  // ZeroEngine keeps its state on the CPU until the CUDA path lands
    result->warnings.push_back("no optimizer sample on cuda: ZeroEngine has no device state yet");
  else
    step_samples.push_back(BenchmarkOptimizer(options.model, ctx));
  WeightByStepShare(&step_samples);
  for (StepSample& s : step_samples) result->samples.push_back(std::move(s.sample));
  result->fit = FitComputeRates(result->samples, RatesFor(base, options.precision));
}

// Collective benchmarks over Gloo between rank processes on this CPU, fitted to one tier.
void MeasureCollectives(const CalibrationOptions& options, const BenchContext& ctx,
                        CalibrationResult* result) {
  if (options.collective_ranks < 2) return;
  if (ctx.device.is_cuda()) {
    result->warnings.push_back("collective benchmarks on CUDA need one process per GPU "
                               "(meshplan run); skipped");
    return;
  }
  const auto samples = BenchmarkCollectivesInRanks(options.collective_ranks, std::chrono::seconds(120));
  result->network = FitNetworkTier(samples, "Gloo over loopback TCP (rank processes sharing the CPU)");
  result->collective_samples = samples;
}

}  // namespace

CalibrationResult RunCalibration(const CalibrationOptions& options) {
  const double start = SteadySeconds();
  CalibrationResult result;
  result.host = HostName();
  result.date = TodayUtc();
  const BenchContext ctx = MakeBenchContext(options, &result);
  const std::vector<BenchShape> shapes =
      options.shapes.empty() ? DefaultCalibrationShapes(options.device, options.model, options.quick)
                             : options.shapes;
  if (shapes.empty())
    throw std::runtime_error("calibrate: no shape fits the model's max_seq " +
                             std::to_string(options.model.max_seq));

  // A CPU profile: the host's RAM as its memory, and GEMMs that stream their operands on
  // top of their compute (planner/hardware_spec.h KernelShape::gemm_streams_operands).
  GpuSpec base = options.base;
  if (!ctx.device.is_cuda()) {
    if (base.memory_bytes == 0) base.memory_bytes = PhysicalMemoryBytes();
    base.kernel_shape.gemm_streams_operands = true;
    base.comm_overlaps_compute = false;  // Gloo's threads run on the ranks' own cores
    base.threads_per_rank = result.threads;  // what `meshplan run` gives each rank
  }

  // Peaks first (a CPU profile's reference), then the fitted samples.
  if (!ctx.device.is_cuda()) {
    result.peaks.flops = MeasureMatmulFlops(options.quick ? 512 : 1024, ctx);
    result.peaks.bandwidth_Bps = MeasureCopyBandwidth(int64_t{64} << 20, ctx);
  }
  MeasureAndFit(options, base, shapes, ctx, &result);

  // Checks (not fitted): the attention forward that recompute replays, at the smallest and
  // the largest shape.
  for (const BenchShape& s : {shapes.front(), shapes.back()})
    result.checks.push_back(BenchmarkAttentionForward(options.model, s, ctx));
  for (const CalibrationSample& c : result.checks)
    result.check_predicted_s.push_back(TimeOf(c.work, result.fit.rates).total());

  result.gpu = ApplyCalibration(base, result.fit, result.peaks, options.precision, &result.warnings);
  result.gpu.source = fmt::format(
      "calibrated on {} {} by meshplan calibrate ({}, {}, {} shapes of {}{})", result.host,
      result.date, result.device_name, ToString(options.precision), shapes.size(),
      options.model.name, options.quick ? ", quick" : "");
  MeasureCollectives(options, ctx, &result);
  result.seconds = SteadySeconds() - start;
  return result;
}

}  // namespace meshplan
