#include "planner/search/knob_variants.h"

#include "planner/cost/runtime_memory.h"

namespace meshplan {

void KnobTally::Add(const KnobTally& o) {
  timings += o.timings;
  tp_overlap_on += o.tp_overlap_on;
  tp_overlap_off += o.tp_overlap_off;
  dp_overlap_dominated += o.dp_overlap_dominated;
  pp_overlap_on += o.pp_overlap_on;
  prefetch0_tried += o.prefetch0_tried;
  prefetch0_fit += o.prefetch0_fit;
  offload_tried += o.offload_tried;
  offload_fit += o.offload_fit;
  offload_pruned += o.offload_pruned;
  offload_dominated += o.offload_dominated;
  host_memory_exceeded += o.host_memory_exceeded;
}

namespace {

// Flips `flag` of *plan on the base's work; keeps it when strictly faster (then *cost is
// re-timed).
void TryFlip(bool ParallelPlan::*flag, ParallelPlan* plan, PlanEvaluator* evaluator,
             PlanCost* cost, KnobTally* tally) {
  ParallelPlan flipped = *plan;
  flipped.*flag = !(plan->*flag);
  const StepTimeBreakdown time = evaluator->TimeVariant(flipped);
  ++tally->timings;
  if (time.total_s < cost->time.total_s) {
    *plan = flipped;
    evaluator->SetTime(flipped, time, cost);
  }
}

// The allocator's overhead on top of `bytes` of tensors (runtime_memory.h: reserved =
// tensors / (1 - fragmentation)), an upper bound on what freeing them saves.
double WithAllocator(double bytes, const ClusterSpec& cluster, const FrameworkSpec& framework) {
  const double f = WithFramework(cluster.gpu.runtime_memory, framework).allocator_fragmentation;
  return f < 1 ? bytes / (1 - f) : bytes;
}

}  // namespace

void EvaluateKnobVariants(const KnobSearch& s, PlanEvaluator* evaluator_ptr,
                          const ParallelPlan& base, KnobTally* tally, OfferCandidateFn offer,
                          void* context) {
  const PlanPins& pins = s.space.pins();
  ParallelPlan plan = base;
  // pp_overlap=1 where it runs: the sends hide behind the next chunk, which they slow by
  // less than they took (step_time.h): never slower, so set without a timing of 0.
  if (!pins[PlanField::kPpOverlap] && !plan.pp_comm_overlap) {
    ParallelPlan overlapped = plan;
    overlapped.pp_comm_overlap = true;
    if (PpOverlapOffered(s.training.framework.pp_overlap, overlapped)) {
      plan = overlapped;
      ++tally->pp_overlap_on;
    }
  }
  PlanEvaluator& evaluator = *evaluator_ptr;
  PlanCost cost = evaluator.EstimateBase(plan);
  ++tally->timings;

  // 1. Overlap choices: time only, independent terms (see the header).
  if (!pins[PlanField::kTpOverlap] && plan.tp > 1) {
    ParallelPlan overlapped = plan;
    overlapped.tp_comm_overlap = true;
    if (TpOverlapOffered(s.training.framework.tp_overlap, overlapped)) {
      TryFlip(&ParallelPlan::tp_comm_overlap, &plan, &evaluator, &cost, tally);
      ++(plan.tp_comm_overlap ? tally->tp_overlap_on : tally->tp_overlap_off);
    }
  }
  // dp_overlap=0 only moves the gradient sync out from behind the backward: never faster
  // (step_time.h), so it is dominated without a timing.
  if (!pins[PlanField::kDpOverlap] && plan.weight_replicas() > 1) ++tally->dp_overlap_dominated;
  offer(context, plan, cost, 0);
  if (cost.fits) return;
  const PlanCost& base_cost = cost;
  const MemoryBreakdown& m = cost.memory;

  const double usable = UsableBytes(s.cluster.gpu, s.estimate.memory_headroom);
  const auto could_fit = [&](double saving) {
    return m.total_bytes - WithAllocator(saving, s.cluster, s.training.framework) <= usable;
  };
  const bool zero3 = plan.zero_stage == 3 && plan.weight_replicas() > 1;

  // 2. prefetch=0, where the framework runs it: one gathered block less.
  if (zero3 && !pins[PlanField::kPrefetch] && plan.zero3_prefetch >= 1 &&
      s.training.framework.prefetch.offers(0) && could_fit(m.gathered_params_bytes)) {
    ParallelPlan p = plan;
    p.zero3_prefetch = 0;
    PlanCost c = evaluator.EstimateVariant(p, base_cost);
    ++tally->timings;
    ++tally->prefetch0_tried;
    if (c.fits) ++tally->prefetch0_fit;
    offer(context, p, c, 1);
  }

  // 3. Offload combinations, cheapest first (activation copies can hide; the CPU step
  // cannot). A combination holding one that already fits is dominated (more offload, more
  // time, needed by nothing) and is skipped.
  if (!s.cluster.host.known()) return;
  struct Combo {
    bool act, opt, params;
  };
  static constexpr Combo kCombos[] = {{true, false, false}, {false, true, false},
                                      {true, true, false},  {false, true, true},
                                      {true, true, true}};
  bool act_fits = false, opt_fits = false;
  int variant = 2;
  for (const Combo& c : kCombos) {
    const int index = variant++;
    if (c.params && !zero3) continue;
    ParallelPlan p = plan;
    p.offload_optimizer = c.opt;
    p.offload_activations = c.act;
    p.offload_params = c.params;
    if (!OffloadOffered(s.training.framework.offload, p)) continue;  // the framework cannot run it
    const auto off_pin = [&](PlanField f, bool v) { return pins[f] && *pins[f] != int64_t{v}; };
    if (off_pin(PlanField::kOffloadOpt, c.opt) || off_pin(PlanField::kOffloadAct, c.act) ||
        off_pin(PlanField::kOffloadParams, c.params))
      continue;
    if (c.opt == plan.offload_optimizer && c.act == plan.offload_activations &&
        c.params == plan.offload_params)
      continue;  // the base itself (its offload pinned)
    if ((c.act && act_fits && (c.opt || c.params)) || (c.opt && opt_fits && (c.act || c.params))) {
      ++tally->offload_dominated;
      continue;
    }
    const double saving = (c.opt ? m.optimizer_bytes + m.transient_bytes : 0.0) +
                          (c.act ? m.activations_bytes : 0.0) +
                          (c.params ? m.params_bytes : 0.0);
    if (!could_fit(saving)) {
      ++tally->offload_pruned;
      continue;
    }
    PlanCost cost_p = evaluator.EstimateVariant(p, base_cost);
    ++tally->timings;
    ++tally->offload_tried;
    if (cost_p.fits) {
      ++tally->offload_fit;
      if (c.act && !c.opt && !c.params) act_fits = true;
      if (c.opt && !c.act && !c.params) opt_fits = true;
    }
    if (!cost_p.fits_host && cost_p.memory.total_bytes <= usable) ++tally->host_memory_exceeded;
    offer(context, p, cost_p, index);
  }
}

}  // namespace meshplan
