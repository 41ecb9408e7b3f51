// One rank of `meshplan run` (see run_rank.h).
#include "executor/run_rank.h"

#include <ATen/Parallel.h>
#include <torch/version.h>  // TORCH_VERSION only (a tiny header)
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "executor/data.h"
#include "executor/device/host_memory.h"
#include "executor/device/memory_probe.h"
#include "executor/device/training_device.h"
#include "executor/model/adamw.h"
#include "executor/model/fused_attention.h"
#include "executor/snapshot.h"
#include "executor/trainer.h"
#include "planner/input_error.h"
#include "planner/names.h"
#include "planner/plan_fields.h"

namespace meshplan {

namespace {

std::unique_ptr<TokenSource> MakeTokenSource(const PlanFile& pf, const RunOptions& options) {
  if (options.data == "synthetic")
    return MakeSyntheticTokens(options.seed, pf.model.vocab_size, pf.training.seq_len);
  return OpenTokenFile(options.data, ParseTokenDtype(options.data_dtype), pf.model.vocab_size,
                       pf.training.seq_len, pf.training.global_batch);
}

// Why this rank stops at a step whose loss is not finite.
std::string NonFiniteLossReason(const StepLog& log, const DeviceMesh& mesh) {
  std::string why = fmt::format("step {}: the loss is {}", log.step, log.loss);
  if (log.first_nonfinite_microbatch >= 0)
    why += fmt::format("; rank {}: micro-batch {} gave the first non-finite loss",
                       mesh.world_rank(), log.first_nonfinite_microbatch);
  return why;
}

void MergePhasePeaks(std::vector<PhasePeak>& into, const std::vector<PhasePeak>& step) {
  for (const PhasePeak& p : step) {
    auto it = std::find_if(into.begin(), into.end(),
                           [&](const PhasePeak& q) { return q.phase == p.phase; });
    if (it == into.end()) into.push_back(p);
    else it->peak_bytes = std::max(it->peak_bytes, p.peak_bytes);
  }
}

// Optimizer offload: the host side apart from the device's (planner/measure/measurement.h).
// On a CPU rank the probe counted the offloaded tensors too, alive from before the first
// figure to the end: they come off every figure.
void ReportHostOptimizer(const ZeroEngine& engine, const at::Device& device, RankMeasurement& out) {
  out.host_optimizer_bytes = engine.host_optimizer_bytes();
  if (device.is_cuda() || out.host_optimizer_bytes == 0) return;
  out.resident_bytes -= out.host_optimizer_bytes;
  if (out.peak_memory_bytes > 0) out.peak_memory_bytes -= out.host_optimizer_bytes;
  for (PhasePeak& p : out.phase_peaks) p.peak_bytes -= out.host_optimizer_bytes;
}

}  // namespace

RankMeasurement RunRank(const PlanFile& pf, const RunOptions& options, const DeviceMesh& mesh) {
  const std::vector<std::string> limits = ExecutorLimitations(pf);
  if (!limits.empty()) throw InputError({"<plan>"}, "plan", limits.front());
  if (ToPlanString(mesh.plan()) != ToPlanString(pf.plan))
    throw std::invalid_argument("RunRank: the mesh was built for " + ToPlanString(mesh.plan()) +
                                ", the plan file says " + ToPlanString(pf.plan));
  const at::Device device = options.device;
  MakeCurrentDevice(device);  // CUDA: this thread's device, before anything is allocated
  MemoryProbe* probe = nullptr;
  if (device.is_cuda()) {
    probe = CudaMemoryProbe(device.index());
    if (probe == nullptr) throw std::runtime_error("RunRank: this LibTorch has no CUDA allocator");
  } else {
    // Freed activations stay in the process: no page faults every step (host_memory.h).
    RetainFreedHostMemory();
    // The probe first: what is allocated before it is invisible to it.
    probe = &CpuMemoryProbe();
  }
  const std::unique_ptr<TokenSource> data = MakeTokenSource(pf, options);
  Trainer trainer(pf.model, pf.training, mesh, *data, options.seed, probe, device);
  if (!options.resume_dir.empty()) {
    const int64_t resumed_at = LoadSnapshot(options.resume_dir, trainer);
    // A run that would time no step after its warm-up measures nothing: refused, not 0 tokens/s.
    if (options.steps - resumed_at <= options.warmup_steps)
      throw InputError({options.resume_dir}, "--steps",
                       fmt::format("the snapshot is at step {}, so --steps {} leaves {} step(s) "
                                   "to train, with {} of warm-up; expected --steps above {} (the "
                                   "steps count from the start of the run)",
                                   resumed_at, options.steps,
                                   std::max<int64_t>(0, options.steps - resumed_at),
                                   options.warmup_steps, resumed_at + options.warmup_steps));
  }
  const auto milestone = [&options] {
    if (options.milestone) options.milestone();
  };
  milestone();  // the state is ready

  RankMeasurement out;
  out.rank = mesh.world_rank();
  out.first_step = trainer.step();
  out.resident_bytes = probe->live_bytes();
  while (trainer.step() < options.steps) {
    milestone();
    const StepLog log = trainer.Step();
    if (!std::isfinite(log.loss)) {  // the same loss on every rank: all stop here
      out.stop_reason = NonFiniteLossReason(log, mesh);
      break;
    }
    out.losses.push_back(log.loss);
    out.peak_memory_bytes = std::max(out.peak_memory_bytes, log.peak_bytes);
    out.peak_reserved_bytes = std::max(out.peak_reserved_bytes, log.peak_reserved_bytes);
    MergePhasePeaks(out.phase_peaks, log.phase_peaks);
    if (options.save_every > 0 && log.step % options.save_every == 0)
      SaveSnapshot(options.snapshot_dir, trainer);
    milestone();
    if (options.after_step) options.after_step(log.step);
    if (options.tamper) options.tamper(log.step, trainer);
  }
  ReportHostOptimizer(trainer.engine(), device, out);
  out.step_times_s = trainer.timer().times_s();
  out.step_times_s.resize(out.losses.size());  // not the step whose loss was not finite
  return out;
}

MeasurementEnvironment CurrentEnvironment(const PlanFile& pf, const at::Device& device) {
  MeasurementEnvironment e = EnvironmentOfPlan(pf);
  e.device = TrainingDeviceName(device);
  // What the block's attention core is (context parallelism runs ring attention, which
  // the memory model knows from cp).
  e.attention = ToString(ExecutorAttention(device, pf.training.precision));
  // The kernel SDPA picks for it (context parallelism runs the executor's ring kernel).
  if (pf.plan.cp == 1) {
    const ModelSpec& m = pf.model;
    e.attention_kernel = SdpaKernel(
        device, pf.training.precision,
        {pf.plan.micro_batch, m.heads / pf.plan.tp, m.kv_heads / pf.plan.tp, pf.training.seq_len,
         m.head_dim(), m.v_head_dim()});
  }
  // The AdamW kernel where the update runs (offload_opt: on the host).
  e.adamw = FusedAdamWBuiltIn(pf.plan.offload_optimizer ? at::Device(at::kCPU) : device)
                ? "fused"
                : "unfused";
  e.libtorch_version = TORCH_VERSION;
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) == 0) e.hostname = host;
  e.intra_op_threads = at::get_num_threads();
  return e;
}

Measurement CombineRankMeasurements(const PlanFile& pf, const RunOptions& options,
                                    const std::vector<RankMeasurement>& ranks) {
  Measurement m = CombineRanks(CurrentEnvironment(pf, options.device), options.warmup_steps,
                               pf.training.tokens_per_step(), ranks);
  // Every rank stopped at the same step; the ranks that saw the first non-finite
  // micro-batch loss say so after "; ".
  std::string where;
  for (const RankMeasurement& r : ranks) {
    if (r.stop_reason.empty()) continue;
    if (m.stop_reason.empty()) m.stop_reason = r.stop_reason.substr(0, r.stop_reason.find("; "));
    if (const size_t at = r.stop_reason.find("; "); at != std::string::npos)
      where += (where.empty() ? "" : ", ") + r.stop_reason.substr(at + 2);
  }
  if (!m.stop_reason.empty())
    m.stop_reason += where.empty() ? " (every micro-batch loss was finite: the sum overflowed)"
                                   : " (" + where + ")";
  return m;
}

}  // namespace meshplan
