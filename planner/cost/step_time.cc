#include "planner/cost/step_time.h"

#include <algorithm>
#include <initializer_list>

#include "planner/cost/collective_time.h"
#include "planner/cost/offload.h"

namespace meshplan {

// ---------------------------------------------------------------------------
// Overlap of one communication stream with compute

void OverlapClock::Prefetch(int64_t n, double compute, double comm) {
  if (n <= 0) return;
  const double k = comm, w = compute, dn = static_cast<double>(n);
  // Chunk j's compute starts at max(previous compute end, comm_end + j*k); over j = 1..n
  // the latest start is at an end point of the run.
  compute_end = std::max({compute_end + dn * w, comm_end + k + dn * w, comm_end + dn * k + w});
  comm_end += dn * k;
  compute_sum += dn * w;
}

void OverlapClock::Drain(int64_t n, double compute, double comm) {
  if (n <= 0) return;
  const double k = comm, w = compute, dn = static_cast<double>(n);
  // Chunk j's communication starts at max(previous comm end, compute_end + j*w).
  comm_end = std::max({comm_end + dn * k, compute_end + w + dn * k, compute_end + dn * w + k});
  compute_end += dn * w;
  compute_sum += dn * w;
}

double OverlapClock::exposed() const { return std::max(compute_end, comm_end) - compute_sum; }

double StageBubble(PipelineSchedule schedule, int64_t vpp, double f, double b, double w) {
  switch (schedule) {
    case PipelineSchedule::kGpipe:
    case PipelineSchedule::k1F1B:
      return f + b + w;
    case PipelineSchedule::kInterleaved:
      return (f + b + w) / static_cast<double>(std::max<int64_t>(vpp, 1));
    case PipelineSchedule::kZeroBubbleH1:
      return std::max(0.0, f + b - w);
  }
  return f + b + w;
}

double PipelineBubble(PipelineSchedule schedule, int64_t pp, int64_t vpp, double f, double b,
                      double w) {
  if (pp <= 1) return 0;
  return static_cast<double>(pp - 1) * StageBubble(schedule, vpp, f, b, w);
}

double OverlapStretch(const StepWork& work, const PartWork& part, StepPhase phase,
                      const GpuSpec& gpu) {
  if (!work.tp_comm_overlap) return 1;
  for (const Collective& c : part.collectives)
    if (c.dim == MeshDim::kTp && c.phase == phase && c.overlappable && c.group.size() > 1)
      return 1 + gpu.comm_overlap_slowdown;
  return 1;
}

double ColumnGemmSeconds(const ComputeWork& work, const ComputeTime& time) {
  return work.matmul_flops > 0 ? time.matmul_s * work.column_matmul_flops / work.matmul_flops : 0.0;
}

bool RunsBehindGemms(const Collective& c, const StepWork& work) {
  return c.dim == MeshDim::kTp && c.behind_gemms && c.overlappable && !work.tp_comm_overlap;
}

BehindGemms TpBehindGemms(double comm_s, double gemms_s, double slowdown) {
  const double hidden = std::min(comm_s, gemms_s * (1 + slowdown));
  return {comm_s - hidden, hidden * slowdown / (1 + slowdown)};
}

// ---------------------------------------------------------------------------
// Timing parts and stages

namespace {

// Communication hidden behind a window of compute: only the excess shows.
double Exposed(double comm, double window, bool overlappable) {
  return overlappable ? std::max(0.0, comm - window) : comm;
}

// One instance of a part for one micro-batch.
struct PartTimes {
  ComputeTime fwd, bwd_in, bwd_w, rec;
  double tp[3] = {0, 0, 0};  // per micro-batch, by phase: forward, backward, recompute
  // Without tp_overlap: the backward's TP behind its column-parallel linears' GEMMs
  // (Collective::behind_gemms), part of tp[1], and those GEMMs' seconds.
  double tp_behind_gemms = 0, column_gemms_s = 0;
  double cp[3] = {0, 0, 0};
  double ep[3] = {0, 0, 0};  // expert all-to-alls: blocking, always exposed
  bool tp_overlap = false;
  bool cp_overlap = true;    // CP ring steps behind the attention (false on serialized work)
  double slowdown = 0;       // GpuSpec::comm_overlap_slowdown
  double dp_gather_fwd = 0;  // ZeRO-3 all-gather before the forward (+ the host copy, offload_params)
  double dp_gather_bwd = 0;  // ZeRO-3 all-gather before the backward (+ the host copy)
  double dp_grad = 0;        // gradient all-reduce / reduce-scatter (cadence: see work.zero_stage)
  double dp_after_optimizer = 0;
  double pp_sync = 0;        // tied-embedding gradient all-reduce, per step

  double backward_compute() const { return bwd_in.total() + rec.total() + bwd_w.total(); }
  // TP overlapped with the GEMMs of its pass (docs/cost_model.md 7(b)): the pass runs
  // (1 + slowdown) times longer while it carries the overlap, and only the TP time beyond
  // that shows.
  // Without it, the backward's collectives behind the column-parallel GEMMs show only past
  // those GEMMs and slow them while they run (TpBehindGemms); the rest blocks.
  double tp_exposed(int ph, double window) const {
    if (tp_overlap) return Exposed(tp[ph], window * (1 + slowdown), true);
    if (ph != 1) return tp[ph];
    return tp[1] - tp_behind_gemms +
           TpBehindGemms(tp_behind_gemms, column_gemms_s, slowdown).exposed;
  }
  double tp_slowdown(int ph, double window) const {
    if (tp_overlap) return tp[ph] > 0 ? slowdown * window : 0.0;
    return ph == 1 ? TpBehindGemms(tp_behind_gemms, column_gemms_s, slowdown).slowed : 0.0;
  }
  double tp_cost(int ph, double window) const {
    return tp_exposed(ph, window) + tp_slowdown(ph, window);
  }
  double bwd_window() const { return bwd_in.total() + bwd_w.total(); }
  // Forward / backward-input (with recompute) time including exposed TP and CP communication.
  double f() const {
    return fwd.total() + tp_cost(0, fwd.total()) + Exposed(cp[0], fwd.attention_s, cp_overlap) + ep[0];
  }
  double b() const {
    return bwd_in.total() + rec.total() + tp_cost(1, bwd_window()) + tp_cost(2, rec.total()) +
           Exposed(cp[1], bwd_in.attention_s, cp_overlap) + Exposed(cp[2], rec.attention_s, cp_overlap) +
           ep[1] + ep[2];
  }
  double ep_exposed_total() const { return ep[0] + ep[1] + ep[2]; }
  double w() const { return bwd_w.total(); }
  double tp_exposed_total() const {
    return tp_exposed(0, fwd.total()) + tp_exposed(1, bwd_window()) + tp_exposed(2, rec.total());
  }
  double tp_slowdown_total() const {
    return tp_slowdown(0, fwd.total()) + tp_slowdown(1, bwd_window()) + tp_slowdown(2, rec.total());
  }
  double cp_exposed_total() const {
    return Exposed(cp[0], fwd.attention_s, cp_overlap) + Exposed(cp[1], bwd_in.attention_s, cp_overlap) +
           Exposed(cp[2], rec.attention_s, cp_overlap);
  }
};

int PhaseIndex(StepPhase phase) {
  return phase == StepPhase::kForward ? 0 : phase == StepPhase::kRecompute ? 2 : 1;
}

// `kernels`: the part's KernelTimes, or null to time its kernels here.
StepWorkTimes::Part TimePartWork(const PartWork& part, const StepWork& work,
                                 const ComputeRates& rates, const ClusterSpec& cluster,
                                 const KernelTimes::Part* kernels) {
  StepWorkTimes::Part t;
  const auto time = [&](const ComputeWork& pass, const ComputeTime* pass_kernels) {
    return pass_kernels ? TimeOf(pass, rates, *pass_kernels) : TimeOf(pass, rates);
  };
  const size_t rec = RecomputeSlot(work.recompute);
  t.fwd = time(part.forward, kernels ? &kernels->fwd : nullptr);
  t.bwd_in = time(part.backward_input, kernels ? &kernels->bwd_in : nullptr);
  t.bwd_w = time(part.backward_weight, kernels ? &kernels->bwd_w : nullptr);
  t.rec = time(part.recompute[rec], kernels ? &kernels->recompute[rec] : nullptr);
  for (const Collective& c : part.collectives)
    t.collectives.push_back(static_cast<double>(c.count) *
                            CollectiveTime(c.kind, c.bytes, c.group, cluster));
  return t;
}

// One part's times: `timed` (TimePartWork of this part) with the work's choices applied.
PartTimes TimePart(const PartWork& part, const StepWorkTimes::Part& timed, const StepWork& work,
                   const ClusterSpec& cluster) {
  PartTimes t;
  t.fwd = timed.fwd;
  t.bwd_in = timed.bwd_in;
  t.bwd_w = timed.bwd_w;
  t.rec = timed.rec;
  t.slowdown = cluster.gpu.comm_overlap_slowdown;
  t.tp_overlap = work.tp_comm_overlap;
  t.column_gemms_s = ColumnGemmSeconds(part.backward_input, t.bwd_in) +
                     ColumnGemmSeconds(part.backward_weight, t.bwd_w);
  // offload_params: this rank's shard comes in from the host before each all-gather.
  const double host_in =
      work.offload.params
          ? HostCopyTime(static_cast<double>(part.params) /
                             static_cast<double>(work.zero_shards) *
                             static_cast<double>(work.param_bytes),
                         cluster.host)
          : 0.0;
  for (int i = 0; i < part.collectives.size; ++i) {
    const Collective& c = part.collectives[i];
    const double s = timed.collectives[i];
    switch (c.dim) {
      case MeshDim::kTp:
        t.tp[PhaseIndex(c.phase)] += s;
        if (RunsBehindGemms(c, work)) t.tp_behind_gemms += s;
        break;
      case MeshDim::kCp:
        t.cp[PhaseIndex(c.phase)] += s;
        t.cp_overlap = c.overlappable;
        break;
      case MeshDim::kEp:
        t.ep[PhaseIndex(c.phase)] += s;
        break;
      case MeshDim::kPp:
        t.pp_sync += s;
        break;
      case MeshDim::kDp:
        if (c.position == CollectivePosition::kAfterOptimizer) t.dp_after_optimizer += s;
        else if (c.position == CollectivePosition::kBeforePart)
          (c.phase == StepPhase::kForward ? t.dp_gather_fwd : t.dp_gather_bwd) += s + host_in;
        else t.dp_grad += s;
        break;
    }
  }
  return t;
}

struct StageTimes {
  double f = 0, b = 0, w = 0;  // per micro-batch, with exposed TP / CP / EP (and offload copies)
  double compute = 0, recompute = 0, tp = 0, cp = 0, ep = 0, tp_slowdown = 0;  // per micro-batch
  double dp = 0, dp_slowdown = 0, pp_sync = 0, optimizer = 0;                  // per step
  double offload_mb = 0;    // per micro-batch: activation copies beyond the compute (in f, b)
  double offload_step = 0;  // per step: gradient shard out, updated parameters in
};

// What communication running beside compute adds to the step: the compute it overlaps runs
// (1 + slowdown) times slower (NCCL's kernels take SMs from it, docs/cost_model.md 7(b)), so
// `hidden` seconds of overlap push hidden * s / (1 + s) of compute later, less what the
// clock's exposed time absorbs (pushed-back compute that runs while communication that showed
// anyway is still going), all of it but `unavoidable` (a prefetch chain's first gather, a
// drain's last bucket: nothing computes beside them). Of an overlap clock's communication,
// what does not show ran beside compute.
double SlowedBy(double comm, double exposed, double unavoidable, double slowdown) {
  const double hidden = std::max(0.0, comm - exposed);
  return std::max(0.0, hidden * slowdown / (1 + slowdown) - std::max(0.0, exposed - unavoidable));
}

// The first of `values` that is not 0 (0 if none): the first (or last) communication of a
// chain whose parts may carry none (a stage without embedding or head, equal-stage tests).
double FirstNonZero(std::initializer_list<double> values) {
  for (double v : values)
    if (v != 0) return v;
  return 0;
}

// DP communication of one stage per step: the part not hidden behind compute, and what the
// hidden part slows the compute (SlowedBy). exposed + slowed never exceeds the communication
// itself, so dp_overlap=0 and prefetch=0 are still never faster here.
struct DpTimes {
  double exposed = 0;
  double slowed = 0;
};
DpTimes DpPerStep(const StepWork& work, const StageParts& parts, const PartTimes& emb,
                  const PartTimes& blk, const PartTimes& head, double slowdown) {
  const double m = static_cast<double>(work.micro_batches);
  const int64_t n_emb = parts.embedding ? 1 : 0, n_head = parts.head ? 1 : 0;
  const double nb = static_cast<double>(parts.blocks);
  const double after_optimizer =
      nb * blk.dp_after_optimizer + n_emb * emb.dp_after_optimizer + n_head * head.dp_after_optimizer;
  const double grads = n_head * head.dp_grad + nb * blk.dp_grad + n_emb * emb.dp_grad;
  if (work.zero_stage <= 2) {
    const double syncs = work.zero_stage == 2 ? m : 1.0;
    if (!work.dp_overlap) return {syncs * grads + after_optimizer, 0};  // all after the backward
    // Buckets in backward order: head, blocks, embedding.
    OverlapClock clock;
    clock.Drain(n_head, head.backward_compute(), head.dp_grad);
    clock.Drain(parts.blocks, blk.backward_compute(), blk.dp_grad);
    clock.Drain(n_emb, emb.backward_compute(), emb.dp_grad);
    const double has_blocks = parts.blocks > 0 ? 1.0 : 0.0;
    const double last =
        FirstNonZero({n_emb * emb.dp_grad, has_blocks * blk.dp_grad, n_head * head.dp_grad});
    const DpTimes syncs_times{syncs * clock.exposed(),
                              syncs * SlowedBy(grads, clock.exposed(), last, slowdown)};
    if (!work.param_gather_in_forward)
      return {syncs_times.exposed + after_optimizer, syncs_times.slowed};
    // The updated parameters gathered in the next step's first forward, each part's before
    // it runs (the closed form of ZeRO-3's prefetched gathers below): only what that forward
    // does not hide shows.
    OverlapClock first_forward;
    first_forward.Prefetch(n_emb, emb.fwd.total(), emb.dp_after_optimizer);
    first_forward.Prefetch(parts.blocks, blk.fwd.total(), blk.dp_after_optimizer);
    first_forward.Prefetch(n_head, head.fwd.total(), head.dp_after_optimizer);
    const double first = FirstNonZero({n_emb * emb.dp_after_optimizer,
                                       has_blocks * blk.dp_after_optimizer,
                                       n_head * head.dp_after_optimizer});
    const double exposed = first_forward.exposed();
    return {syncs_times.exposed + exposed,
            syncs_times.slowed + SlowedBy(after_optimizer, exposed, first, slowdown)};
  }
  // ZeRO-3: gathers prefetched (prefetch >= 1; the closed form treats every depth >= 1
  // alike) or issued as each part starts (0, exposed); gradient reduce-scatters behind the
  // backward (dp_overlap) or after it.
  const bool prefetch = work.zero3_prefetch >= 1, overlap_grads = work.dp_overlap;
  const double g_fwd = prefetch ? 1.0 : 0.0, g_grad = overlap_grads ? 1.0 : 0.0;
  OverlapClock forward;
  forward.Prefetch(n_emb, emb.fwd.total(), g_fwd * emb.dp_gather_fwd);
  forward.Prefetch(parts.blocks, blk.fwd.total(), g_fwd * blk.dp_gather_fwd);
  forward.Prefetch(n_head, head.fwd.total(), g_fwd * head.dp_gather_fwd);
  OverlapClock backward;
  backward.Prefetch(n_head, head.backward_compute(), g_fwd * head.dp_gather_bwd + g_grad * head.dp_grad);
  backward.Prefetch(parts.blocks, blk.backward_compute(), g_fwd * blk.dp_gather_bwd + g_grad * blk.dp_grad);
  backward.Prefetch(n_emb, emb.backward_compute(), g_fwd * emb.dp_gather_bwd + g_grad * emb.dp_grad);
  const double gathers_fwd = n_emb * emb.dp_gather_fwd + nb * blk.dp_gather_fwd + n_head * head.dp_gather_fwd;
  const double gathers_bwd = n_emb * emb.dp_gather_bwd + nb * blk.dp_gather_bwd + n_head * head.dp_gather_bwd;
  // The last part's gradient reduce-scatter can only start after its backward.
  const double tail = overlap_grads ? (parts.embedding ? emb.dp_grad : blk.dp_grad) : 0.0;
  const double serial = (1 - g_fwd) * (gathers_fwd + gathers_bwd) + (1 - g_grad) * grads;
  const double has_blocks = parts.blocks > 0 ? 1.0 : 0.0;
  const double first_fwd = g_fwd * FirstNonZero({n_emb * emb.dp_gather_fwd, has_blocks * blk.dp_gather_fwd,
                                                 n_head * head.dp_gather_fwd});
  const double first_bwd = FirstNonZero({n_head * (g_fwd * head.dp_gather_bwd + g_grad * head.dp_grad),
                                         has_blocks * (g_fwd * blk.dp_gather_bwd + g_grad * blk.dp_grad),
                                         n_emb * (g_fwd * emb.dp_gather_bwd + g_grad * emb.dp_grad)});
  const double slowed =
      SlowedBy(g_fwd * gathers_fwd, forward.exposed(), first_fwd, slowdown) +
      SlowedBy(g_fwd * gathers_bwd + g_grad * grads - tail, backward.exposed(), first_bwd, slowdown);
  return {m * (forward.exposed() + backward.exposed() + tail + serial) + after_optimizer, m * slowed};
}

// The distinct stages into out: first, last, and a middle one when pp > 2; returns how many.
int DistinctStages(const StepWork& work, int64_t out[3]) {
  out[0] = 0;
  out[1] = work.pp - 1;
  out[2] = 1;
  return work.pp > 2 ? 3 : work.pp == 2 ? 2 : 1;
}

// A block's times with `share` of its replayed forward (RecomputedShare: every:N's
// checkpointed blocks among the stage's): the recompute and its communication scale by it,
// so n such blocks sum to what the checkpointed and the other blocks run (Exposed is
// linear in the communication and its window together).
PartTimes WithRecomputeShare(PartTimes t, double share) {
  if (share == 1) return t;
  t.rec.matmul_s *= share;
  t.rec.attention_s *= share;
  t.rec.memory_s *= share;
  t.rec.overhead_s *= share;
  t.tp[2] *= share;
  t.cp[2] *= share;
  t.ep[2] *= share;
  return t;
}

StageTimes TimeStage(const StepWork& work, int64_t stage, const PartTimes& emb,
                     const PartTimes& all_blocks, const PartTimes& head, double optimizer_s,
                     const ClusterSpec& cluster) {
  const PartTimes blk = WithRecomputeShare(all_blocks, RecomputedShare(work, stage));
  const StageParts parts = PartsOfStage(work, stage);
  const double n = static_cast<double>(parts.blocks);
  const double e = parts.embedding ? 1 : 0, h = parts.head ? 1 : 0;
  StageTimes s;
  s.f = n * blk.f() + e * emb.f() + h * head.f();
  s.b = n * blk.b() + e * emb.b() + h * head.b();
  s.w = n * blk.w() + e * emb.w() + h * head.w();
  auto compute = [](const PartTimes& p) { return p.fwd.total() + p.backward_compute(); };
  s.compute = n * compute(blk) + e * compute(emb) + h * compute(head);
  s.recompute = n * blk.rec.total() + e * emb.rec.total() + h * head.rec.total();
  s.tp = n * blk.tp_exposed_total() + e * emb.tp_exposed_total() + h * head.tp_exposed_total();
  s.tp_slowdown = n * blk.tp_slowdown_total() + e * emb.tp_slowdown_total() + h * head.tp_slowdown_total();
  s.cp = n * blk.cp_exposed_total() + e * emb.cp_exposed_total() + h * head.cp_exposed_total();
  s.ep = n * blk.ep_exposed_total();
  const DpTimes dp = DpPerStep(work, parts, emb, blk, head, cluster.gpu.DpOverlapSlowdown());
  s.dp = dp.exposed;
  s.dp_slowdown = dp.slowed;
  s.pp_sync = e * emb.pp_sync + h * head.pp_sync;
  s.optimizer = optimizer_s;
  const double fwd = n * blk.fwd.total() + e * emb.fwd.total() + h * head.fwd.total();
  const double bwd = n * blk.backward_compute() + e * emb.backward_compute() + h * head.backward_compute();
  const OffloadTimes off = StageOffloadTimes(work, parts, cluster.host, fwd, bwd);
  s.f += off.forward_exposed_s;
  s.b += off.backward_exposed_s;
  s.offload_mb = off.forward_exposed_s + off.backward_exposed_s;
  s.offload_step = off.step_exposed_s;
  if (work.offload.optimizer) s.optimizer = off.cpu_optimizer_s;
  return s;
}

}  // namespace

namespace {

KernelTimes::Part TimePartKernels(const PartWork& part, const ComputeRates& rates) {
  KernelTimes::Part k;
  k.fwd = TimeOf(part.forward, rates);
  k.bwd_in = TimeOf(part.backward_input, rates);
  k.bwd_w = TimeOf(part.backward_weight, rates);
  for (size_t i = 0; i < part.recompute.size(); ++i) k.recompute[i] = TimeOf(part.recompute[i], rates);
  return k;
}

StepWorkTimes TimeStepWork(const StepWork& work, const ClusterSpec& cluster, Precision precision,
                           const KernelTimes* kernels) {
  const ComputeRates rates = RatesFor(cluster.gpu, precision, work.calibration);
  StepWorkTimes t;
  t.block = TimePartWork(work.block, work, rates, cluster, kernels ? &kernels->block : nullptr);
  t.embedding =
      TimePartWork(work.embedding, work, rates, cluster, kernels ? &kernels->embedding : nullptr);
  t.head = TimePartWork(work.head, work, rates, cluster, kernels ? &kernels->head : nullptr);
  if (work.pp > 1) {
    const Collective& a = work.pp_activation;
    const Collective& g = work.pp_gradient;
    const Collective& r = work.pp_regather;
    t.pp_slot_s = CollectiveTime(a.kind, a.bytes, a.group, cluster) +
                  CollectiveTime(g.kind, g.bytes, g.group, cluster) +
                  2 * CollectiveTime(r.kind, r.bytes, r.group, cluster);
  }
  int64_t stages[3];
  const int num_stages = DistinctStages(work, stages);
  for (int i = 0; i < num_stages; ++i)
    t.optimizer_s[i] = TimeOf(OptimizerWork(work, PartsOfStage(work, stages[i])), rates).total();
  return t;
}

}  // namespace

StepWorkTimes TimeStepWork(const StepWork& work, const ClusterSpec& cluster, Precision precision) {
  return TimeStepWork(work, cluster, precision, nullptr);
}

StepWorkTimes TimeStepWork(const StepWork& work, const ClusterSpec& cluster, Precision precision,
                           const KernelTimes& kernels) {
  return TimeStepWork(work, cluster, precision, &kernels);
}

KernelTimes TimeKernels(const StepWork& work, const ClusterSpec& cluster, Precision precision) {
  const ComputeRates rates = RatesFor(cluster.gpu, precision, work.calibration);
  return {TimePartKernels(work.block, rates), TimePartKernels(work.embedding, rates),
          TimePartKernels(work.head, rates)};
}

StepTimeBreakdown AnalyticStepTime(const StepWork& work, const ClusterSpec& cluster,
                                   Precision precision) {
  return AnalyticStepTime(work, cluster, TimeStepWork(work, cluster, precision));
}

namespace {

// AnalyticStepTime of `work` as it runs (WorkAsRun applied).
StepTimeBreakdown TimeAsRun(const StepWork& work, const ClusterSpec& cluster,
                            const StepWorkTimes& times) {
  const PartTimes blk = TimePart(work.block, times.block, work, cluster);
  const PartTimes emb = TimePart(work.embedding, times.embedding, work, cluster);
  const PartTimes head = TimePart(work.head, times.head, work, cluster);
  const double m = static_cast<double>(work.micro_batches);

  int64_t stages[3];
  const int num_stages = DistinctStages(work, stages);
  StageTimes slowest_mb, slowest;
  double slowest_mb_time = -1, slowest_total = -1;
  double bubble_all_stages = 0;  // every stage's own bubble term, with its multiplicity
  for (int i = 0; i < num_stages; ++i) {
    const StageTimes s = TimeStage(work, stages[i], emb, blk, head, times.optimizer_s[i], cluster);
    const int64_t copies = stages[i] == 0 || stages[i] == work.pp - 1 ? 1 : work.pp - 2;
    bubble_all_stages +=
        static_cast<double>(copies) * StageBubble(work.schedule, work.virtual_stages, s.f, s.b, s.w);
    const double mb = s.f + s.b + s.w;
    // mb holds the TP slowdown and the activation copies of one micro-batch already.
    const double total =
        m * mb + s.dp + s.dp_slowdown + s.pp_sync + s.optimizer + s.offload_step;
    if (mb > slowest_mb_time) slowest_mb_time = mb, slowest_mb = s;
    if (total > slowest_total) slowest_total = total, slowest = s;
  }

  StepTimeBreakdown out;
  out.compute_s = m * slowest.compute;
  out.recompute_s = m * slowest.recompute;
  out.exposed_comm_s[MeshDim::kTp] = m * slowest.tp;
  out.exposed_comm_s[MeshDim::kCp] = m * slowest.cp;
  out.exposed_comm_s[MeshDim::kEp] = m * slowest.ep;
  out.exposed_comm_s[MeshDim::kDp] = slowest.dp;
  double pp_p2p = 0, pp_hidden = 0;
  if (work.pp > 1) {
    const double vpp = static_cast<double>(work.virtual_stages);
    const double fill = static_cast<double>(work.pp - 1), chunks = vpp * m;
    if (work.pp_activation.overlappable) {
      // pp_overlap: each chunk's sends run behind the next chunk's forward and backward; the
      // fill still waits for them (docs/cost_model.md section 5, "PP").
      const double window = (slowest.f + slowest.b + slowest.w) / vpp;
      pp_hidden = chunks * std::min(times.pp_slot_s, window);
      pp_p2p = fill * times.pp_slot_s + chunks * std::max(0.0, times.pp_slot_s - window);
    } else {
      pp_p2p = (chunks + fill) * times.pp_slot_s;
    }
  }
  out.exposed_comm_s[MeshDim::kPp] = pp_p2p + slowest.pp_sync;
  // The pipeline fills and drains through the other stages: their terms, not the slowest's.
  out.bubble_s =
      std::max(0.0, bubble_all_stages - StageBubble(work.schedule, work.virtual_stages, slowest_mb.f,
                                                    slowest_mb.b, slowest_mb.w));
  out.optimizer_s = slowest.optimizer;
  out.offload_s = m * slowest.offload_mb + slowest.offload_step;
  out.overlap_slowdown_s = m * slowest.tp_slowdown + slowest.dp_slowdown +
                          SlowedBy(pp_hidden, 0, 0, cluster.gpu.comm_overlap_slowdown);
  out.total_s = out.compute_s + out.exposed_comm_s.sum() + out.bubble_s + out.optimizer_s +
                out.offload_s + out.overlap_slowdown_s;
  return out;
}

}  // namespace

StepTimeBreakdown AnalyticStepTime(const StepWork& planned, const ClusterSpec& cluster,
                                   const StepWorkTimes& times) {
  // The serialized copy only where the GPU needs one (a StepWork is tens of KiB: the
  // search's hot path builds none).
  if (cluster.gpu.comm_overlaps_compute) return TimeAsRun(planned, cluster, times);
  StepWork serialized;
  return TimeAsRun(WorkAsRun(planned, cluster.gpu, &serialized), cluster, times);
}

}  // namespace meshplan
