// The analytic step time: a StepWork timed on a ClusterSpec in closed form.
//
// The cost model's answer to "how long is one step": the slowest stage's compute, the
// communication its overlap rules leave exposed (TP, CP, DP buckets and ZeRO-3 prefetch,
// offload copies, pipeline send/recv), the pipeline bubble and the optimizer. The rules and
// the bubble per schedule are derived once in docs/cost_model.md section 5 ("Exposed
// communication", "Pipeline bubble") and section 7(b) (dp_overlap, prefetch, offload).
// The event simulator times the same StepWork event by event and must agree where nothing
// overlaps (tests/simulator/). Pure functions, no allocation on the search's path.
#pragma once

#include <array>
#include <cstdint>

#include "planner/cluster_spec.h"
#include "planner/cost/step_work.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/training_spec.h"

namespace meshplan {

StepTimeBreakdown AnalyticStepTime(const StepWork& work, const ClusterSpec& cluster,
                                   Precision precision);

// The times AnalyticStepTime reads off a StepWork that its overlap and offload choices
// (SetPlanKnobs, planner/cost/step_work.h) leave unchanged: each part's compute times and
// each collective's time, the pipeline sends of one slot, and the optimizer of each distinct
// stage. The search times a candidate's overlap / offload variants from one of these
// (planner/search/knob_variants.h) instead of timing the same GEMMs again.
struct StepWorkTimes {
  struct Part {
    ComputeTime fwd, bwd_in, bwd_w, rec;  // rec: of the work's recompute mode
    FixedList<double, kMaxCollectivesPerPart> collectives;  // count x CollectiveTime, in order
  };
  Part block, embedding, head;
  double pp_slot_s = 0;         // one chunk-micro-batch slot's sends (pp > 1)
  double optimizer_s[3] = {};   // the distinct stages: first, last, a middle one (pp > 2)
};
StepWorkTimes TimeStepWork(const StepWork& work, const ClusterSpec& cluster, Precision precision);

// The GEMM and attention kernels' seconds (ComputeTime::matmul_s, attention_s) of every pass
// of a StepWork's parts: they follow from its PlanShape alone (planner/cost/plan_shape.h; the
// ZeRO stage and the knobs change memory-bound bytes and collectives only, the recompute
// policy picks one of the replays), so the search times them once per shape.
struct KernelTimes {
  struct Part {
    ComputeTime fwd, bwd_in, bwd_w;
    std::array<ComputeTime, kNumBlockRecomputes> recompute;  // PartWork::recompute's
  };
  Part block, embedding, head;
};
KernelTimes TimeKernels(const StepWork& work, const ClusterSpec& cluster, Precision precision);
// TimeStepWork with `kernels` from TimeKernels of work of the same shape: the same result.
StepWorkTimes TimeStepWork(const StepWork& work, const ClusterSpec& cluster, Precision precision,
                           const KernelTimes& kernels);
// AnalyticStepTime with `times` from TimeStepWork of this work, or of work built for the same
// plan with other overlap and offload choices: the same result.
StepTimeBreakdown AnalyticStepTime(const StepWork& work, const ClusterSpec& cluster,
                                   const StepWorkTimes& times);

// How much longer a pass of `part` computes when it carries TP communication overlapped with
// it (the plan's tp_overlap, StepWork::tp_comm_overlap): 1 + GpuSpec::comm_overlap_slowdown
// when a TP collective of `phase` (the backward's for the weight-gradient pass too) is
// overlappable, else 1. The analytic model's overlap_slowdown_s and the simulator's stretched
// passes both follow this rule.
double OverlapStretch(const StepWork& work, const PartWork& part, StepPhase phase,
                      const GpuSpec& gpu);

// Without tp_overlap, the TP collectives a framework issues behind a column-parallel linear's
// backward GEMMs (Collective::behind_gemms): `comm_s` of them beside `gemms_s` of those
// GEMMs (ColumnGemmSeconds of the backward passes). The GEMMs run 1 + slowdown times slower
// while the communication runs beside them; what outlasts them shows. docs/cost_model.md 7(b).
struct BehindGemms {
  double exposed = 0;  // communication past the GEMMs
  double slowed = 0;   // what the GEMMs run longer
};
BehindGemms TpBehindGemms(double comm_s, double gemms_s, double slowdown);
// Whether `c` runs so in `work` as timed: a behind_gemms TP collective, overlappable (not
// serialized by WorkAsRun), without the plan's tp_overlap (which hides it behind the pass).
bool RunsBehindGemms(const Collective& c, const StepWork& work);
// The seconds of `time` (TimeOf `work`) its column-parallel GEMMs take: its GEMM time by
// their share of its matmul FLOPs.
double ColumnGemmSeconds(const ComputeWork& work, const ComputeTime& time);

// Pipeline idle time per step, from the slowest stage's per-micro-batch forward f,
// backward-input b (with recompute) and backward-weight w (all model chunks of a rank):
//   gpipe, 1f1b:  (pp-1) * (f + b + w)          bubble / (m*(f+b+w) + bubble) = (pp-1)/(m+pp-1)
//   interleaved:  (pp-1) * (f + b + w) / vpp    (Megatron: the bubble divided by vpp)
//   zb_h1:        (pp-1) * max(0, f + b - w)    (Qi et al. 2023, ZB-H1: weight-gradient work
//                                                fills the bubble; 1/3 of 1F1B when f=b=w)
// 0 when pp == 1.
double PipelineBubble(PipelineSchedule schedule, int64_t pp, int64_t vpp, double f, double b,
                      double w);
// One stage's share of that bubble (PipelineBubble with pp - 1 = 1): what a stage other than
// the slowest adds to the fill and drain.
double StageBubble(PipelineSchedule schedule, int64_t vpp, double f, double b, double w);

// A compute stream and one communication stream, for chunks (model parts) in order.
// Closed forms for runs of n equal chunks, so a stage of L blocks costs O(1).
struct OverlapClock {
  double compute_end = 0;
  double comm_end = 0;
  double compute_sum = 0;
  // Each chunk's communication must finish before its compute starts; communication
  // runs ahead as far as it likes (parameter prefetch).
  void Prefetch(int64_t n, double compute, double comm);
  // Each chunk's communication starts when its compute ends (gradient buckets).
  void Drain(int64_t n, double compute, double comm);
  // Time beyond the pure compute: stalls waiting for communication plus the tail.
  double exposed() const;
};

}  // namespace meshplan
