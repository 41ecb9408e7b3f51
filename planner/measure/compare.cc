#include "planner/measure/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/attention_kernel.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/flops.h"
#include "planner/cost/memory_model.h"
#include "planner/figure_check.h"
#include "planner/input_error.h"
#include "planner/mesh_layout.h"
#include "planner/names.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

// Refuses a measurement of another plan: comparing it would be meaningless.
void CheckSamePlan(const PlanFile& p, const Measurement& m, const std::string& source) {
  const MeasurementEnvironment& e = m.environment;
  auto differ = [&](const char* field, const std::string& measured, const std::string& planned) {
    if (measured != planned)
      throw InputError({source}, std::string("environment.") + field,
                       "measured with " + measured + ", but the plan file has " + planned +
                           ": this is not a measurement of that plan");
  };
  differ("model", e.model, p.model.name);
  differ("plan", e.plan, ToPlanString(p.plan));
  differ("world_size", std::to_string(e.world_size), std::to_string(p.plan.world_size()));
  differ("global_batch", std::to_string(e.global_batch), std::to_string(p.training.global_batch));
  differ("seq_len", std::to_string(e.seq_len), std::to_string(p.training.seq_len));
  differ("precision", e.precision, ToString(p.training.precision));
  const size_t ranks = m.emulated_comm.empty() ? static_cast<size_t>(p.plan.world_size())
                                               : m.ranks.size();
  if (m.peak_memory_bytes.size() != ranks)
    throw InputError({source}, "peak_memory_bytes",
                     fmt::format("has {} ranks, the {} {}", m.peak_memory_bytes.size(),
                                 m.emulated_comm.empty() ? "plan" : "emulated ranks", ranks));
  for (const RankMeasurement& r : m.ranks)
    if (r.rank >= p.plan.world_size())
      throw InputError({source}, "ranks", fmt::format("rank {} is outside the plan's {} ranks",
                                                      r.rank, p.plan.world_size()));
}

// The world ranks whose peak memory m holds, in the order of m.peak_memory_bytes.
std::vector<int64_t> MeasuredRanks(const PlanFile& p, const Measurement& m) {
  std::vector<int64_t> out;
  if (!m.emulated_comm.empty()) {
    for (const RankMeasurement& r : m.ranks) out.push_back(r.rank);
  } else {
    for (int64_t rank = 0; rank < p.plan.world_size(); ++rank) out.push_back(rank);
  }
  return out;
}

// What rank `rank` measured in host memory (offload; 0: nothing, or an older file).
int64_t HostBytesOf(const Measurement& m, int64_t rank) {
  for (const RankMeasurement& r : m.ranks)
    if (r.rank == rank) return r.host_optimizer_bytes;
  return 0;
}

FigureComparison Checked(std::string figure, std::string unit, double predicted, double measured,
                         double tolerance_pct) {
  FigureComparison f;
  f.figure = std::move(figure);
  f.unit = std::move(unit);
  f.predicted = predicted;
  f.measured = measured;
  if (measured <= 0) {
    f.status = FigureStatus::kNoPrediction;
    f.note = "nothing measured";
    return f;
  }
  f.error_pct = (predicted - measured) / measured * 100.0;
  f.status = std::abs(f.error_pct) <= tolerance_pct ? FigureStatus::kWithin : FigureStatus::kOutside;
  return f;
}

FigureComparison Unpredicted(std::string figure, std::string unit, double measured,
                             std::string note) {
  FigureComparison f;
  f.figure = std::move(figure);
  f.unit = std::move(unit);
  f.measured = measured;
  f.status = FigureStatus::kNoPrediction;
  f.note = std::move(note);
  return f;
}

std::string Show(double value, const std::string& unit) {
  if (unit == "bytes") return value >= kBytesPerGiB ? FormatGiB(value, 3) : FormatMiB(value, 2);
  if (unit == "s") return value >= 1 ? FormatSeconds(value, 3) : FormatMs(value, 2);
  if (unit == "FLOP/s") return FormatTflops(value);  // in TFLOP/s, as the figure is named
  return fmt::format("{:.0f}", value);
}

// tokens/s per GPU and model TFLOP/s per GPU, predicted and measured: the measured step's
// rate per GPU (PerGpuRate, planner/cost/flops.h) from its tokens/s.
std::vector<FigureComparison> PerGpuFigures(const PlanFile& p, const PlanCost& cost,
                                            const Measurement& m, double tolerance_pct) {
  const int64_t gpus = p.plan.world_size();
  const double tokens = static_cast<double>(p.training.tokens_per_step());
  const double measured_s = m.tokens_per_s > 0 ? tokens / m.tokens_per_s : 0;
  std::vector<FigureComparison> out = {
      Checked("tokens/s per GPU", "tokens/s", cost.tokens_per_s_per_gpu,
              PerGpuRate(tokens, gpus, measured_s), tolerance_pct),
      Checked("model TFLOP/s per GPU", "FLOP/s", cost.model_flops_per_s_per_gpu,
              PerGpuRate(cost.model_flops_per_step, gpus, measured_s), tolerance_pct)};
  for (FigureComparison& f : out) {
    f.derived = true;
    f.note = fmt::format("per GPU: tokens/s over the {} ranks, never a failure of its own; {}",
                         gpus, kModelFlopsConvention);
  }
  return out;
}

// Emulated ranks (`meshplan run --emulate-rank`): their time is their own compute and
// optimizer, with the communication taking the cost model's time ("model") or none
// ("zero"), and no pipeline bubble (no peer's compute is waited for).
std::string EmulatedStepTimeFigure(const Measurement& m) {
  return m.emulated_comm == "model" ? "step time, emulated peers (communication modelled)"
                                    : "step time, emulated peers (no communication)";
}

FigureComparison EmulatedStepTime(const PlanCost& cost, const Measurement& m, double tolerance_pct) {
  const bool modelled = m.emulated_comm == "model";
  double predicted = cost.time.compute_s + cost.time.optimizer_s;
  if (modelled)
    for (double seconds : cost.time.exposed_comm_s.values) predicted += seconds;
  FigureComparison f = Checked(EmulatedStepTimeFigure(m), "s", predicted, m.median_step_s, tolerance_pct);
  f.note = modelled ? "emulated peers: the measured step's communication is the cost model's "
                      "time for each message, not measured; predicted: compute + optimizer + "
                      "exposed communication, without the pipeline bubble"
                    : "emulated peers, communication in zero time: predicted: compute + "
                      "optimizer, without communication and the pipeline bubble";
  return f;
}

// Step time and tokens/s (or the emulated ranks' step) against Estimate(), when the plan's
// hardware describes the device that ran; else listed without a prediction.
void AddTimeFigures(const PlanFile& p, const Measurement& m, double tolerance_pct, Comparison* c) {
  const bool emulated = !m.emulated_comm.empty();

  // Time: only against hardware that describes the device that ran.
  if (HardwareDescribesDevice(p.cluster.gpu, m.environment.device)) {
    const PlanCost cost = Estimate(p.model, p.cluster, p.training, p.plan);
    CheckFigures(cost, DescribeInputs(p));
    if (emulated) {
      c->figures.push_back(EmulatedStepTime(cost, m, tolerance_pct));
      return;
    }
    FigureComparison step = Checked("step time", "s", cost.time.total_s, m.median_step_s, tolerance_pct);
    if (const int threads = p.cluster.gpu.threads_per_rank;
        threads > 0 && m.environment.intra_op_threads != threads)
      step.note = fmt::format(
          "the ranks ran with {} intra-op thread(s) each, the profile's rates are those of {} "
          "(threads_per_rank): not the process that was predicted",
          m.environment.intra_op_threads, threads);
    c->figures.push_back(std::move(step));
    c->figures.push_back(
        Checked("tokens/s", "tokens/s", cost.tokens_per_s, m.tokens_per_s, tolerance_pct));
    for (FigureComparison& f : PerGpuFigures(p, cost, m, tolerance_pct))
      c->figures.push_back(std::move(f));
  } else {
    const std::string why =
        "the plan's hardware (" + p.cluster.gpu.name + ") does not describe the device that ran (" +
        m.environment.device + ")" +
        (Lower(m.environment.device) == "cpu" ? "; calibrate a CPU profile (meshplan calibrate)" : "");
    c->figures.push_back(Unpredicted(emulated ? EmulatedStepTimeFigure(m) : "step time", "s",
                                    m.median_step_s, why));
    if (!emulated) c->figures.push_back(Unpredicted("tokens/s", "tokens/s", m.tokens_per_s, why));
  }
}

// The fused core's kernel a run recorded (MeasurementEnvironment::attention_kernel) as the
// executor profile's: flash2, flash3 and cudnn have their rates; efficient, math and other
// (SDPA's kernels meshplan has no figure for) and "" keep the profile's.
void ApplyRecordedKernel(const std::string& recorded, const std::string& source,
                         FrameworkSpec* framework) {
  if (recorded.empty() || recorded == "efficient" || recorded == "math" || recorded == "other")
    return;
  if (!ParseAttentionKernel(recorded, &framework->attention_kernel))
    throw InputError({source}, "environment.attention_kernel",
                     "expected one of: " + AllowedSpellings(kAttentionKernelSpellings) +
                         ", efficient, math, other; got '" + recorded + "'");
}

}  // namespace

const char* ToString(FigureStatus status) {
  switch (status) {
    case FigureStatus::kWithin: return "within";
    case FigureStatus::kOutside: return "outside";
    case FigureStatus::kNoPrediction: return "no prediction";
  }
  return "?";
}

std::vector<std::string> Comparison::Failures() const {
  std::vector<std::string> out;
  for (const FigureComparison& f : figures)
    if (f.status == FigureStatus::kOutside && !f.derived)
      out.push_back(fmt::format("{}: error {:+.1f}% exceeds {:g}% (predicted {}, measured {})",
                                f.figure, f.error_pct, tolerance_pct, Show(f.predicted, f.unit),
                                Show(f.measured, f.unit)));
  return out;
}

bool HardwareDescribesDevice(const GpuSpec& gpu, const std::string& device) {
  const std::string name = Lower(gpu.name), dev = Lower(device);
  if (dev == "cpu") return name.rfind("cpu", 0) == 0;
  if (name.rfind("cpu", 0) == 0) return false;
  const std::string family = name.substr(0, name.find('-'));
  return !family.empty() && dev.find(family) != std::string::npos;
}

Comparison ComparePlan(const PlanFile& plan_file, const Measurement& m, double tolerance_pct,
                       const std::string& measured_source) {
  CheckSamePlan(plan_file, m, measured_source);
  // meshplan's executor ran it, whatever framework the plan was searched for, with the
  // attention kernel SDPA picked where the run recorded one (the time of a fused core).
  PlanFile p = plan_file;
  p.training.framework = LoadFramework(kExecutorFramework);
  ApplyRecordedKernel(m.environment.attention_kernel, measured_source, &p.training.framework);
  Comparison c;
  c.tolerance_pct = tolerance_pct;
  c.device = m.environment.device;
  c.hardware = p.cluster.gpu.name;

  // Memory: every rank against the detailed model of its pipeline stage, with the
  // attention core the run used (older measurements do not say: auto). Tensors only: the
  // measured peak is the allocator's allocated bytes (executor/device/memory_probe.h), which
  // hold no CUDA context, NCCL buffers or allocator overhead, so the runtime lines stay 0
  // (PyTorch's cuBLAS workspace, 8-32 MiB, is in them and is left out too).
  MemoryOptions memory;
  if (!m.environment.attention.empty() &&
      !ParseAttentionImpl(m.environment.attention, &memory.attention))
    throw InputError({measured_source}, "environment.attention",
                     "expected one of: auto, naive, fused; got '" + m.environment.attention + "'");
  if (!m.environment.adamw.empty() && m.environment.adamw != "fused" &&
      m.environment.adamw != "unfused")
    throw InputError({measured_source}, "environment.adamw",
                     "expected one of: fused, unfused; got '" + m.environment.adamw + "'");
  memory.fused_adamw = m.environment.adamw == "fused";  // no update workspace
  const std::vector<int64_t> ranks = MeasuredRanks(p, m);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int64_t stage = CoordsOfRank(p.plan, ranks[i])[MeshDim::kPp];
    const MemoryBreakdown predicted =
        EstimateStageMemory(p.model, p.training, p.plan, MemoryModel::kDetailed, stage, memory);
    c.figures.push_back(Checked(fmt::format("peak memory rank {} (stage {})", ranks[i], stage),
                                "bytes", predicted.total_bytes,
                                static_cast<double>(m.peak_memory_bytes[i]), tolerance_pct));
    if (predicted.host_total_bytes() > 0)
      c.figures.push_back(Checked(fmt::format("host memory rank {} (stage {})", ranks[i], stage),
                                  "bytes", predicted.host_total_bytes(),
                                  static_cast<double>(HostBytesOf(m, ranks[i])), tolerance_pct));
  }
  AddTimeFigures(p, m, tolerance_pct, &c);
  return c;
}

int64_t LoggedRankStage(const ParallelPlan& plan, int64_t rank) {
  return rank / (plan.world_size() / plan.pp);
}

Comparison CompareLoggedRun(const PlanFile& plan_file, const FrameworkSpec& framework,
                            const Measurement& m, double tolerance_pct,
                            const std::string& log_source) {
  PlanFile p = plan_file;
  p.training.framework = framework;
  Comparison c;
  c.tolerance_pct = tolerance_pct;
  c.device = m.environment.device;
  c.hardware = p.cluster.gpu.name;
  c.framework = FrameworkLabel(framework);
  MemoryOptions memory;
  memory.runtime = p.cluster.gpu.runtime_memory;
  for (const RankMeasurement& r : m.ranks) {
    if (r.rank >= p.plan.world_size())
      throw InputError({log_source}, "rank", fmt::format("rank {} is outside the plan's {} ranks",
                                                         r.rank, p.plan.world_size()));
    const int64_t stage = LoggedRankStage(p.plan, r.rank);
    const MemoryBreakdown b =
        EstimateStageMemory(p.model, p.training, p.plan, MemoryModel::kDetailed, stage, memory);
    // The caching allocator holds the tensors and the workspaces; its reserved memory adds
    // what no tensor holds. The CUDA context and NCCL's buffers are outside it.
    const double reserved = b.total_bytes - b.cuda_context_bytes - b.nccl_buffers_bytes;
    const double allocated = reserved - b.allocator_overhead_bytes;
    if (r.peak_memory_bytes > 0)
      c.figures.push_back(Checked(fmt::format("max allocated rank {} (stage {})", r.rank, stage),
                                  "bytes", allocated, static_cast<double>(r.peak_memory_bytes),
                                  tolerance_pct));
    if (r.peak_reserved_bytes > 0)
      c.figures.push_back(Checked(fmt::format("max reserved rank {} (stage {})", r.rank, stage),
                                  "bytes", reserved, static_cast<double>(r.peak_reserved_bytes),
                                  tolerance_pct));
  }
  AddTimeFigures(p, m, tolerance_pct, &c);
  return c;
}

nlohmann::json ComparisonToJson(const Comparison& c) {
  nlohmann::json figures = nlohmann::json::array();
  for (const FigureComparison& f : c.figures) {
    nlohmann::json j{{"figure", f.figure},
                     {"unit", f.unit},
                     {"measured", f.measured},
                     {"status", ToString(f.status)}};
    if (f.derived) j["derived"] = true;
    if (f.status == FigureStatus::kNoPrediction) {
      j["predicted"] = nullptr;
      j["error_pct"] = nullptr;
      j["note"] = f.note;
    } else {
      j["predicted"] = f.predicted;
      j["error_pct"] = f.error_pct;
      if (f.derived) j["note"] = f.note;
    }
    figures.push_back(std::move(j));
  }
  nlohmann::json out{{"tolerance_pct", c.tolerance_pct},
          {"device", c.device},
          {"hardware", c.hardware},
          {"figures", figures},
          {"failures", c.Failures()},
          {"within_tolerance", c.Failures().empty()}};
  if (!c.framework.empty()) out["framework"] = c.framework;
  return out;
}

std::string FormatComparisonTable(const Comparison& c) {
  size_t width = std::string("figure").size();
  for (const FigureComparison& f : c.figures) width = std::max(width, f.figure.size());
  std::string out = fmt::format("predicted ({}{}) vs measured ({}), tolerance {:g}%\n", c.hardware,
                                c.framework.empty() ? "" : ", " + c.framework, c.device,
                                c.tolerance_pct);
  out += fmt::format("{:<{}}  {:>12}  {:>12}  {:>8}  {}\n", "figure", width, "predicted",
                     "measured", "error", "status");
  std::vector<std::string> notes;
  for (const FigureComparison& f : c.figures) {
    const bool predicted = f.status != FigureStatus::kNoPrediction;
    out += fmt::format("{:<{}}  {:>12}  {:>12}  {:>8}  {}\n", f.figure, width,
                       predicted ? Show(f.predicted, f.unit) : "-", Show(f.measured, f.unit),
                       predicted ? fmt::format("{:+.1f}%", f.error_pct) : "-", ToString(f.status));
    if (!f.note.empty() && std::find(notes.begin(), notes.end(), f.note) == notes.end())
      notes.push_back(f.note);
  }
  for (const std::string& note : notes) out += "note: " + note + "\n";
  return out;
}

}  // namespace meshplan
