// `meshplan calibrate`: time the executor's ops on this machine's CPU or GPU, fit the
// cost model's efficiencies (and, on a CPU, its peaks) and write a hardware file that
// estimate, search, simulate and compare load like any other (executor/calibration/).
//
//   meshplan calibrate --device cpu --quick --out configs/hardware/cpu-ci.yaml
//   meshplan calibrate --device cuda --precision bf16 --model llama-1b
//       --base h100-sxm --out configs/hardware/h100-calibrated.yaml
//
// Without --out the YAML goes to stdout and the report to stderr. Exit codes: 0 written;
// 2 bad input (flags, unknown model or base hardware); 1 a failure while measuring
// (no CUDA device, a fit that the samples cannot determine).

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "executor/calibration/calibrate.h"
#include "executor/calibration/collective_benchmarks.h"
#include "executor/device/cuda_device.h"
#include "executor/device/host_memory.h"
#include "executor/run_rank.h"
#include "planner/atomic_file.h"
#include "planner/config/config_loader.h"
#include "planner/config/hardware_yaml.h"
#include "planner/input_error.h"
#include "planner/limits.h"
#include "planner/names.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

struct CalibrateCommandOptions {
  std::string out;          // "" : stdout
  std::string device = "cpu";
  bool quick = false;
  std::string model;        // "" : tiny-llama (cpu), llama-1b (cuda)
  std::string shapes;       // "1x64,2x128" ("" : the defaults)
  std::string precision;    // "" : fp32 (cpu), bf16 (cuda)
  std::string base;         // "" : cpu: none; cuda: from the device name
  std::string name;         // "" : the --out file stem, else cpu-calibrated / <base>-calibrated
  int threads = 0;
  int collective_ranks = 0;
  std::string collective_bytes;   // "4096,65536" ("" : the defaults)
  std::string collective_chunks;  // "128,256" ("" : the defaults)
  std::string report;       // JSON report path ("" : none)
};

const InputLocation kFlags{"<command line>"};

std::vector<BenchShape> ParseShapes(const std::string& text) {
  std::vector<BenchShape> shapes;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    BenchShape s;
    char x = 0;
    std::stringstream one(item);
    if (!(one >> s.batch >> x >> s.seq) || x != 'x' || s.batch < 1 || s.seq < 2 || !one.eof() ||
        s.batch > kMaxGlobalBatch || s.seq > kMaxSeqLen)
      throw InputError(kFlags, "--shapes",
                       "expected a comma-separated list of BxS (micro-batch x sequence, e.g. "
                       "1x64,2x128); got '" + item + "'");
    shapes.push_back(s);
  }
  return shapes;
}

// Each shape's largest tensors, fp32 logits (B x S x V) beside the attention scores
// (B x H x S x S) and the FFN's activations (B x S x 4F), must fit the device: a shape past
// it would fail inside LibTorch (or overflow its sizes), not in the calibration.
void CheckShapesFit(const std::vector<BenchShape>& shapes, const ModelSpec& m, bool cuda) {
  const int64_t memory = cuda ? CudaTotalMemoryBytes(0) : AvailableHostMemoryBytes();
  for (const BenchShape& s : shapes) {
    const double B = static_cast<double>(s.batch), S = static_cast<double>(s.seq);
    const double bytes = 4.0 * B * S *
                         (static_cast<double>(m.vocab_size) + static_cast<double>(m.heads) * S +
                          4.0 * static_cast<double>(m.ffn_hidden));
    if (memory > 0 && bytes > static_cast<double>(memory))
      throw InputError(kFlags, "--shapes",
                       fmt::format("{}: its logits, attention scores and FFN activations alone "
                                   "take {:.3g} GiB, more than the {:.3g} GiB {}; expected "
                                   "smaller shapes", s.ToString(), ToGiB(bytes),
                                   ToGiB(static_cast<double>(memory)),
                                   cuda ? "of the GPU" : "available on this host"));
  }
}

// A comma-separated list of integers in [low, high] for `flag`.
std::vector<int64_t> ParseIntList(const std::string& text, const std::string& flag, int64_t low,
                                  int64_t high, const std::string& what) {
  std::vector<int64_t> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    int64_t v = 0;
    std::stringstream one(item);
    if (!(one >> v) || !one.eof() || v < low || v > high)
      throw InputError(kFlags, flag,
                       fmt::format("expected a comma-separated list of {} from {} to {}; got '{}'",
                                   what, low, high, item));
    values.push_back(v);
  }
  if (values.empty())
    throw InputError(kFlags, flag, fmt::format("expected a comma-separated list of {}; got ''", what));
  return values;
}

// The collective benchmark the ranks run: the defaults with the flags' overrides. Checked in
// the command itself before any rank starts; the ranks, started with the same command line,
// build the same plan.
CollectiveBenchmarkPlan CollectivePlan(const CalibrateCommandOptions& o) {
  CollectiveBenchmarkPlan plan = DefaultCollectiveBenchmark(o.quick);
  if ((!o.collective_bytes.empty() || !o.collective_chunks.empty()) && o.collective_ranks < 2)
    throw InputError(kFlags, !o.collective_bytes.empty() ? "--collective-bytes" : "--collective-chunks",
                     "only with --collective-ranks 2 or more (the collective benchmark)");
  if (!o.collective_bytes.empty()) {
    // Up to 64 MiB: on CPU ranks a larger collective takes seconds, times repeats and rounds.
    plan.buffer_bytes = ParseIntList(o.collective_bytes, "--collective-bytes", 64, int64_t{1} << 26,
                                     "buffer sizes in bytes");
    const auto [lo, hi] = std::minmax_element(plan.buffer_bytes.begin(), plan.buffer_bytes.end());
    if (*lo == *hi)  // one size cannot tell latency from bandwidth (FitNetworkTier)
      throw InputError(kFlags, "--collective-bytes",
                       "expected at least two different sizes: one size cannot tell the latency "
                       "from the bandwidth; got '" + o.collective_bytes + "'");
  }
  if (!o.collective_chunks.empty())
    // Up to 1024: a 1024^3 fp32 matmul is about 20 ms on one core (the default's largest,
    // 512, about 2.4 ms); the benchmark runs it hundreds of times.
    plan.chunk_sides = ParseIntList(o.collective_chunks, "--collective-chunks", 1, 1024,
                                    "matmul sides");
  return plan;
}

// The data-sheet file of a CUDA device, from its name ("NVIDIA H100 80GB HBM3" -> h100-sxm).
std::string BaseForDevice(const std::string& device_name) {
  const std::string lower = Lower(device_name);
  if (lower.find("h200") != std::string::npos) return "h200";
  if (lower.find("h100") != std::string::npos)
    return lower.find("pcie") != std::string::npos ? "h100-pcie" : "h100-sxm";
  if (lower.find("a100") != std::string::npos)
    return lower.find("40gb") != std::string::npos ? "a100-40gb" : "a100-80gb";
  if (lower.find("a40") != std::string::npos) return "a40";
  if (lower.find("b200") != std::string::npos) return "b200";
  throw InputError(kFlags, "--base",
                   "no hardware file is known for the device '" + device_name +
                       "'; name the data-sheet file to calibrate against with --base");
}

std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  size_t start = 0;
  bool first = true;
  for (size_t nul; (nul = all.find('\0', start)) != std::string::npos; start = nul + 1) {
    std::string arg = all.substr(start, nul - start);
    if (first) arg = std::filesystem::path(arg).filename().string();
    out += (first ? "" : " ") + arg;
    first = false;
  }
  return out;
}

std::string FormatReport(const CalibrationResult& r) {
  std::string out = fmt::format("meshplan calibrate: {} on {} ({:.1f} s)\n", r.device_name, r.host,
                                r.seconds);
  out += fmt::format("{:<34} {:>12} {:>12} {:>8}\n", "sample", "measured_us", "fitted_us", "error");
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const double m = r.samples[i].seconds, p = r.fit.predicted_s[i];
    out += fmt::format("{:<34} {:>12.1f} {:>12.1f} {:>+7.1f}%\n", r.samples[i].name, m * 1e6,
                       p * 1e6, (p - m) / m * 100);
  }
  out += fmt::format(
      "fit: {:.1f}% error weighted by share of a step; per sample rms {:.1f}%, max {:.1f}% "
      "over {} samples (op samples inside a segment fit loosely: they only tell the kernel "
      "classes apart)\n",
      r.fit.weighted_error * 100, r.fit.rms_relative_error * 100, r.fit.max_relative_error * 100,
      r.samples.size());
  for (size_t i = 0; i < r.checks.size(); ++i) {
    const double m = r.checks[i].seconds, p = r.check_predicted_s[i];
    out += fmt::format("check {:<28} {:>12.1f} {:>12.1f} {:>+7.1f}%  (not fitted)\n",
                       r.checks[i].name, m * 1e6, p * 1e6, (p - m) / m * 100);
  }
  const ComputeRates& rates = r.fit.rates;
  out += fmt::format(
      "rates: matmul {:.2f} TFLOP/s, attention {:.2f} TFLOP/s, memory {:.1f} GB/s, "
      "overhead {:.2f} us per kernel\n",
      rates.matmul_flops_per_s / 1e12, rates.attention_flops_per_s / 1e12, rates.memory_Bps / 1e9,
      rates.kernel_overhead_s * 1e6);
  if (r.peaks.flops > 0)
    out += fmt::format("measured peaks: {:.2f} TFLOP/s (GEMM), {:.1f} GB/s (copy)\n",
                       r.peaks.flops / 1e12, r.peaks.bandwidth_Bps / 1e9);
  const GpuSpec& g = r.gpu;
  out += fmt::format("efficiency: matmul {:.3f}, attention {:.3f}, memory bandwidth {:.3f}\n",
                     g.matmul_efficiency, g.attention_efficiency, g.memory_bandwidth_efficiency);
  if (r.network) {
    out += fmt::format("network: {:.2f} GB/s per rank, {:.1f} us per ring step", r.network->bandwidth_Bps / 1e9,
                       r.network->latency_s * 1e6);
    if (r.network->has_allreduce())
      out += fmt::format("; all-reduce {:.2f} GB/s, {:.1f} us per step",
                         r.network->allreduce_bandwidth_Bps / 1e9, r.network->allreduce_latency_s * 1e6);
    out += " (" + r.network->name + ")\n";
  }
  for (const CollectiveSample& c : r.collective_samples) {
    const auto [lo, hi] = std::minmax_element(c.round_seconds.begin(), c.round_seconds.end());
    out += fmt::format("collective {:<15} {:>10.0f} B x{}: {:>9.1f} us", ToString(c.kind), c.bytes,
                       c.group_size, c.seconds * 1e6);
    if (r.network)
      out += fmt::format(" (fitted {:.1f} us)",
                         RingTime(c.kind, c.bytes, c.group_size, *r.network) * 1e6);
    if (lo != c.round_seconds.end())
      out += fmt::format(", rounds {:.1f}-{:.1f} us", *lo * 1e6, *hi * 1e6);
    out += "\n";
  }
  for (const std::string& w : r.warnings) out += "warning: " + w + "\n";
  return out;
}

nlohmann::json ReportJson(const CalibrationResult& r) {
  nlohmann::json samples = nlohmann::json::array();
  const auto sample = [](const CalibrationSample& s, double predicted) {
    return nlohmann::json{{"name", s.name},
                          {"matmul_flops", s.work.matmul_flops},
                          {"attention_flops", s.work.attention_flops},
                          {"memory_bytes", s.work.memory_bytes},
                          {"kernels", s.work.kernels},
                          {"measured_s", s.seconds},
                          {"predicted_s", predicted}};
  };
  for (size_t i = 0; i < r.samples.size(); ++i) samples.push_back(sample(r.samples[i], r.fit.predicted_s[i]));
  nlohmann::json checks = nlohmann::json::array();
  for (size_t i = 0; i < r.checks.size(); ++i) checks.push_back(sample(r.checks[i], r.check_predicted_s[i]));
  nlohmann::json collectives = nlohmann::json::array();
  for (const CollectiveSample& c : r.collective_samples) {
    const double predicted = r.network ? RingTime(c.kind, c.bytes, c.group_size, *r.network) : 0;
    collectives.push_back({{"kind", ToString(c.kind)},
                           {"bytes", c.bytes},
                           {"group_size", c.group_size},
                           {"measured_s", c.seconds},
                           {"round_s", c.round_seconds},
                           {"predicted_s", predicted}});
  }
  return {{"host", r.host},
          {"date", r.date},
          {"device", r.device_name},
          {"threads", r.threads},
          {"seconds", r.seconds},
          {"rates",
           {{"matmul_flops_per_s", r.fit.rates.matmul_flops_per_s},
            {"attention_flops_per_s", r.fit.rates.attention_flops_per_s},
            {"memory_Bps", r.fit.rates.memory_Bps},
            {"kernel_overhead_s", r.fit.rates.kernel_overhead_s}}},
          {"peaks", {{"flops", r.peaks.flops}, {"bandwidth_Bps", r.peaks.bandwidth_Bps}}},
          {"weighted_error", r.fit.weighted_error},
          {"rms_relative_error", r.fit.rms_relative_error},
          {"max_relative_error", r.fit.max_relative_error},
          {"samples", samples},
          {"checks", checks},
          {"collectives", collectives},
          {"warnings", r.warnings}};
}

void WriteFile(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  try {
    WriteFileAtomically(path, text);
  } catch (const std::runtime_error& e) {
    throw InputError({path}, "", e.what());
  }
}

int RunCalibrate(const CalibrateCommandOptions& o) {
  // A copy of this command started by --collective-ranks: one rank of the benchmark.
  const CollectiveBenchmarkPlan collective_plan = CollectivePlan(o);
  if (IsCollectiveBenchmarkRank()) {
    RunCollectiveBenchmarkRank(collective_plan, std::chrono::seconds(120));
    return 0;
  }
  const bool cuda = o.device == "cuda";
  CalibrationOptions options;
  options.device = o.device;
  options.quick = o.quick;
  options.threads = o.threads;
  options.collective_ranks = o.collective_ranks;
  options.model = LoadModel(o.model.empty() ? (cuda ? "llama-1b" : "tiny-llama") : o.model);
  for (const std::string& reason : ModelLimitations(options.model))
    throw InputError(kFlags, "--model", reason);
  if (options.model.moe.enabled())  // executor/calibration/micro_benchmarks.cc: dense blocks
    throw InputError(kFlags, "--model",
                     "model.moe: the calibration benchmarks time dense llama blocks; calibrate on "
                     "a dense model (the step's expert GEMMs use the same kernel table)");
  if (options.model.attention_head_dim > 0)  // executor/calibration/micro_benchmarks.cc
    throw InputError(kFlags, "--model",
                     "model.head_dim: the calibration benchmarks shape q and the output "
                     "projection hidden wide (head_dim = hidden / heads); calibrate on a model "
                     "without a head_dim of its own");
  if (cuda && CudaDeviceCount() == 0)
    throw InputError(kFlags, "--device", "cuda: no CUDA device is visible; expected cpu");
  if (!o.shapes.empty()) options.shapes = ParseShapes(o.shapes);
  CheckShapesFit(options.shapes, options.model, cuda);
  const std::string precision = o.precision.empty() ? (cuda ? "bf16" : "fp32") : o.precision;
  if (!ParsePrecision(precision, &options.precision))
    throw InputError(kFlags, "--precision",
                     "expected one of: " + std::string(AllowedPrecisions()) + "; got '" + precision + "'");
  if (options.precision == Precision::kFp8)
    throw InputError(kFlags, "--precision",
                     "fp8: the executor has no FP8 kernels to time; expected bf16 or mixed on cuda "
                     "(the FP8 rate comes from the hardware file's peak_TFLOPs.fp8)");
  if (cuda == (options.precision == Precision::kFp32))
    throw InputError(kFlags, "--precision",
                     cuda ? "expected bf16 or mixed on cuda (the precision the plans train in)"
                          : "expected fp32 on cpu (the CPU executor trains in fp32)");

  std::optional<ClusterSpec> network;
  std::string base_name = o.base;
  if (cuda && base_name.empty()) {
    base_name = BaseForDevice(CudaDeviceName(0));
  }
  if (!base_name.empty()) {
    options.base = LoadGpu(base_name);
    network = LoadGpuNetwork(base_name);
  }
  const std::string stem = o.out.empty() ? "" : std::filesystem::path(o.out).stem().string();
  options.base.name = !o.name.empty() ? o.name
                      : !stem.empty() ? stem
                      : base_name.empty() ? "cpu-calibrated" : options.base.name + "-calibrated";
  if (!cuda) {  // a CPU profile: everything measured, nothing from a data sheet
    options.base.peak_flops_tf32 = 0;
    options.base.peak_flops_fp8 = 0;
  }

  const CalibrationResult result = RunCalibration(options);
  HardwareYamlOptions yaml;
  if (result.network) {  // ranks sharing this CPU: one "node" of them, over loopback
    ClusterSpec node;
    node.gpus_per_node = 1;
    node.intra_node = *result.network;
    node.inter_node = *result.network;
    yaml.network = node;
  } else {
    yaml.network = network;
  }
  yaml.header = fmt::format(
      "{} profile written by `{}`.\n"
      "Efficiencies are fitted to micro-benchmarks of the executor's own ops (matmuls, attention,\n"
      "memory-bound ops, optimizer) with the cost model's work counts; kernel_overhead_us is the\n"
      "fitted fixed cost per op the cost model counts. See executor/calibration/calibrate.h.",
      cuda ? "GPU" : "CPU", CommandLine());
  if (!cuda)
    yaml.header += fmt::format(
        "\nCPU: one process with {} intra-op threads (threads_per_rank: meshplan run gives each\n"
        "rank as many); peaks are the best measured GEMM and copy rates (bf16 = fp32: a CPU runs\n"
        "16-bit matmuls no faster); memory_MiB is the host's RAM.\n"
        "Ranks sharing this CPU: calibrate with --threads cores/N for N ranks.",
        result.threads);
  const std::string text = GpuSpecToYaml(result.gpu, yaml);

  const std::string report = FormatReport(result);
  if (o.out.empty()) {
    std::cerr << report;
    std::cout << text;
  } else {
    WriteFile(o.out, text);
    std::cout << report << "wrote " << o.out << "\n";
  }
  if (!o.report.empty()) WriteFile(o.report, ReportJson(result).dump(2) + "\n");
  return 0;
}

}  // namespace

void AddCalibrateCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<CalibrateCommandOptions>();
  CLI::App* command = app.add_subcommand("calibrate", kCalibrateSummary);
  command->add_option("--out", options->out, "the hardware YAML to write (default: stdout)")
      ->check(OutputFile());
  command->add_option("--device", options->device, "cpu | cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  command->add_flag("--quick", options->quick, "fewer shapes and repeats (a few seconds on CPU)");
  command->add_option("--model", options->model,
                      "the model whose shapes are benchmarked (default: tiny-llama on cpu, "
                      "llama-1b on cuda)");
  command->add_option("--shapes", options->shapes,
                      "micro-batch shapes BxS, comma-separated (default: per device, e.g. "
                      "1x64,2x128,2x256 on cpu --quick)")
      ->check(NonEmptyText("micro-batch shapes BxS"));
  command->add_option("--precision", options->precision,
                      "fp32 (cpu) | bf16 | mixed (cuda; both run bf16 matmuls)");
  command->add_option("--base", options->base,
                      "hardware file whose data-sheet peaks, memory and network to keep "
                      "(default on cuda: from the device name)");
  command->add_option("--name", options->name, "the profile's name (default: the --out file stem)");
  command->add_option("--threads", options->threads,
                      "CPU intra-op threads (default: LibTorch's, one per core)")
      ->check(IntegerInRange(1, kMaxIntraOpThreads, "threads"));
  command->add_option("--collective-ranks", options->collective_ranks,
                      "CPU: also time Gloo collectives between this many rank processes, each "
                      "computing between its collectives as a run does, and fit the network "
                      "block (0: no network block)")
      ->check(IntegerInRange(0, 64, "rank processes; 0: no network block"))
      ->capture_default_str();
  command->add_option("--collective-bytes", options->collective_bytes,
                      "with --collective-ranks: the collectives' full buffer sizes in bytes, "
                      "comma-separated, at least two different (default: 4096 to 16777216; "
                      "--quick: 16384,1048576,8388608)");
  command->add_option("--collective-chunks", options->collective_chunks,
                      "with --collective-ranks: sides of the square matmuls each rank computes "
                      "before each collective, in turn (default: 128,192,256,384,512, about "
                      "0.04 to 2.4 ms on one core): what a collective costs depends on the "
                      "compute before it (docs/validation/cpu_ranks.md)");
  command->add_option("--report", options->report,
                      "also write every sample (measured and fitted) as JSON")
      ->check(OutputFile());
  command->callback([options, exit_code] {
    try {
      *exit_code = RunCalibrate(*options);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      std::cerr << "meshplan calibrate: error: " << e.what() << "\n";
      *exit_code = 1;
    }
  });
}

}  // namespace meshplan

