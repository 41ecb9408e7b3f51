#include "planner/search/plan_space.h"

#include <algorithm>

#include "planner/cost/param_count.h"
#include "planner/input_error.h"
#include "planner/names.h"
#include "planner/stage_layers.h"

namespace meshplan {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

// ---------------------------------------------------------------------------
// Pins

bool PlanPins::empty() const {
  for (const std::optional<int64_t>& v : values_)
    if (v) return false;
  return true;
}

std::vector<std::string> PlanPins::Keys() const {
  std::vector<std::string> keys;
  for (const PlanFieldSpec& f : PlanFields())
    if ((*this)[f.id]) keys.push_back(f.key);
  return keys;
}

std::string PlanPins::ToString() const {
  std::string s;
  for (const PlanFieldSpec& f : PlanFields())
    if (const std::optional<int64_t> v = (*this)[f.id])
      s += (s.empty() ? "" : ",") + std::string(f.key) + "=" + FormatFieldValue(f, *v);
  return s;
}

PlanPins PlanPins::Without(const std::string& key) const {
  PlanPins out = *this;
  if (const PlanFieldSpec* f = FindPlanField(key)) out.values_[static_cast<size_t>(f->id)].reset();
  return out;
}

PlanPins ParsePlanPins(const std::string& text, const std::string& source) {
  PlanPins pins;
  for (const auto& [field, value] : ParsePlanFields(text, source)) {
    CheckPinValue(*field, value, source);
    pins.Pin(field->id, value);
  }
  return pins;
}

// ---------------------------------------------------------------------------
// The grid

namespace {

// The largest stage load, in parameters (a proxy for both compute and model states): its
// blocks, plus the vocabulary matrix on the first (embedding) and last (lm_head) stage.
int64_t LargestStageParams(const ModelSpec& model, const StageLayers& stages) {
  const int64_t block = BlockParams(model), vocab = model.vocab_size * model.hidden;
  int64_t largest = std::max(stages.first, stages.last) * block + vocab;
  if (stages.pp > 2) largest = std::max(largest, stages.middle * block);
  return largest;
}

}  // namespace

std::optional<StageSplit> UnevenSplitWorthTrying(const ModelSpec& model, int64_t pp) {
  const std::optional<StageSplit> split = LighterEndsSplit(model.layers, pp);
  if (!split || model.layers % pp != 0) return split;
  ParallelPlan even, uneven;
  even.pp = uneven.pp = pp;
  SetStageSplit(&uneven, *split);
  const bool better = LargestStageParams(model, SplitLayers(model.layers, uneven)) <
                      LargestStageParams(model, SplitLayers(model.layers, even));
  return better ? split : std::nullopt;
}

std::vector<ScheduleChoice> UnevenInterleavedChoices(const ModelSpec& model, int64_t pp,
                                                     const StageSplit& split,
                                                     std::optional<int64_t> pinned_vpp) {
  ParallelPlan plan;
  plan.pp = pp;
  SetStageSplit(&plan, split);
  const int64_t middle = SplitLayers(model.layers, plan).middle;
  std::vector<ScheduleChoice> choices;  // vpp >= 2 dividing the middle count, split in chunks
  for (int64_t vpp : Divisors(std::max<int64_t>(middle, 1))) {
    if (vpp < 2 || (pinned_vpp && vpp != *pinned_vpp)) continue;
    if (const std::optional<StageSplit> chunked = LighterEndsSplit(model.layers, pp, vpp))
      choices.push_back({PipelineSchedule::kInterleaved, vpp, *chunked});
  }
  if (choices.size() > 2) choices = {choices.front(), choices.back()};
  return choices;
}

namespace {

// Whether the grid tries schedule `s` with pipeline stages: the ones the framework runs (a
// pinned one is tried and judged by Validate's schedule_offered); all of them where it runs
// none, so that its pipelined meshes are refused by that rule rather than left out unseen.
bool ScheduleTried(const ScheduleOffer& offer, PipelineSchedule s) {
  return offer.schedules == 0 || offer.offers(static_cast<int>(s));
}

}  // namespace

PlanSpace::PlanSpace(const ModelSpec& model, const TrainingSpec& training,
                     const ClusterSpec& cluster, const PlanSpaceOptions& options)
    : world_size_(cluster.world_size()),
      tp_group_limit_(TpGroupLimit(cluster, options.allow_tp_across_nodes)),
      pins_(options.pins) {
  const PlanPins& pins = options.pins;
  using F = PlanField;
  const std::optional<int64_t> pin_dp = pins[F::kDp], pin_tp = pins[F::kTp], pin_pp = pins[F::kPp],
                               pin_cp = pins[F::kCp], pin_ep = pins[F::kEp],
                               pin_mbs = pins[F::kMbs], pin_vpp = pins[F::kVpp],
                               pin_first = pins[F::kFirstStageLayers],
                               pin_last = pins[F::kLastStageLayers];
  const std::optional<bool> pin_sp = pins.Get<bool>(F::kSp);
  const std::optional<PipelineSchedule> pin_schedule = pins.Get<PipelineSchedule>(F::kSchedule);
  const std::optional<int> pin_zero = pins.Get<int>(F::kZero);
  const std::optional<int64_t> pin_recompute = pins[F::kRecompute];

  // Meshes: tp, then pp, then cp ascending; dp takes the rest.
  for (int64_t tp : Divisors(world_size_)) {
    if (pin_tp && *pin_tp != tp) continue;
    for (int64_t pp : Divisors(world_size_ / tp)) {
      if (pin_pp && *pin_pp != pp) continue;
      for (int64_t cp : Divisors(world_size_ / tp / pp)) {
        if (pin_cp && *pin_cp != cp) continue;
        const int64_t dp = world_size_ / tp / pp / cp;
        if (pin_dp && *pin_dp != dp) continue;
        if (pin_ep) {  // as given; the constraints judge it
          meshes_.push_back({dp, tp, pp, cp, *pin_ep});
          continue;
        }
        for (int64_t ep : model.moe.enabled() ? Divisors(dp) : std::vector<int64_t>{1})
          if (model.moe.experts == 0 || model.moe.experts % ep == 0)
            meshes_.push_back({dp, tp, pp, cp, ep});
      }
    }
  }

  // sp: off without tp; with tp both, or only the framework's where its TP always or never
  // shards the norms over the sequence; a pin as given.
  sp_single_ = {pin_sp.value_or(false), false};
  sp_single_n_ = 1;
  if (pin_sp) {
    sp_multi_ = {*pin_sp, false};
    sp_multi_n_ = 1;
  } else if (training.framework.sequence_parallel != SpOffer::kOptional) {
    sp_multi_ = {training.framework.sequence_parallel == SpOffer::kAlways, false};
    sp_multi_n_ = 1;
  } else {
    sp_multi_ = {false, true};
    sp_multi_n_ = 2;
  }

  micro_batches_ = pin_mbs ? std::vector<int64_t>{*pin_mbs}
                                    : Divisors(std::max<int64_t>(training.global_batch, 1));

  // A single stage has no schedule: one entry, 1f1b with vpp 1 on even stages, or the
  // pinned values as given (--only vpp=2 leaves no pp=1 plan: the constraints refuse it).
  single_stage_schedules_ = {{pin_schedule.value_or(PipelineSchedule::k1F1B), pin_vpp.value_or(1),
                              {pin_first.value_or(0), pin_last.value_or(0)}}};
  std::vector<ScheduleChoice> even;
  if (pin_schedule && pin_vpp) {
    even = {{*pin_schedule, *pin_vpp}};
  } else {
    for (PipelineSchedule s : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B,
                               PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kInterleaved}) {
      if (pin_schedule && *pin_schedule != s) continue;
      if (!pin_schedule && !ScheduleTried(training.framework.schedules, s)) continue;
      if (s != PipelineSchedule::kInterleaved) {
        if (!pin_vpp || *pin_vpp == 1) even.push_back({s, 1});
      } else if (pin_vpp) {
        if (*pin_vpp > 1) even.push_back({s, *pin_vpp});
      } else {
        for (int64_t vpp : Divisors(std::max<int64_t>(model.layers, 1)))
          if (vpp >= 2) even.push_back({s, vpp});
      }
    }
  }
  // Uneven stages: 1f1b, and interleaved with the vpp that split them (see the header).
  const bool interleaved_allowed =
      (pin_schedule ? *pin_schedule == PipelineSchedule::kInterleaved
                    : ScheduleTried(training.framework.schedules, PipelineSchedule::kInterleaved)) &&
      (!pin_vpp || *pin_vpp > 1);
  for (const MeshShape& mesh : meshes_) {
    if (mesh.pp == 1 || std::any_of(pipelined_schedules_.begin(), pipelined_schedules_.end(),
                                    [&](const auto& entry) { return entry.first == mesh.pp; }))
      continue;
    std::vector<ScheduleChoice> choices;
    if (pin_first || pin_last) {  // the pinned split, as given
      for (const ScheduleChoice& c : even)
        choices.push_back(
            {c.schedule, c.virtual_stages, {pin_first.value_or(0), pin_last.value_or(0)}});
    } else {
      choices = even;
      const std::optional<StageSplit> split =
          options.uneven_stages ? UnevenSplitWorthTrying(model, mesh.pp) : std::nullopt;
      if (split) {
        for (const ScheduleChoice& c : even)
          if (c.virtual_stages == 1 && c.schedule == PipelineSchedule::k1F1B)
            choices.push_back({c.schedule, 1, *split});
        if (interleaved_allowed)
          for (const ScheduleChoice& c :
               UnevenInterleavedChoices(model, mesh.pp, *split, pin_vpp))
            choices.push_back(c);
      }
    }
    pipelined_schedules_.push_back({mesh.pp, std::move(choices)});
  }

  // A pinned stage; else ZeRO-3 for offloaded parameters (offload_params_needs_zero3); else
  // the stages the framework offers, with and without pipeline stages, tensor or context
  // parallelism (ZeroOfferFor). One
  // it does not offer the plan (a pinned one) is refused by Validate's zero_offered. With
  // one weight replica every stage is stage 0.
  if (pin_zero) {
    zero_single_ = zero_multi_ = zero_tp_cp_ = zero_pipelined_ = {*pin_zero};
  } else if (pins[F::kOffloadParams].value_or(0) == 1) {
    zero_single_ = {0};
    zero_multi_ = zero_tp_cp_ = zero_pipelined_ = {3};
  } else {
    zero_single_ = {0};
    zero_multi_ = OfferedZeroStages(ZeroOfferFor(training.framework, /*pp=*/1));
    zero_tp_cp_ = OfferedZeroStages(ZeroOfferFor(training.framework, /*pp=*/1, /*tp=*/2));
    zero_pipelined_ = OfferedZeroStages(ZeroOfferFor(training.framework, /*pp=*/2));
  }
  // A pinned policy; else the caller's list; else what the framework offers (every:N as
  // torchtitan's "selective layer", every:2). A pinned policy the framework does not offer
  // is refused by Validate's recompute_offered.
  if (pin_recompute)
    recomputes_ = {RecomputeOfCode(*pin_recompute)};
  else
    recomputes_ = options.recomputes.empty() ? OfferedRecomputePolicies(training.framework.recompute)
                                             : options.recomputes;

  offsets_.reserve(meshes_.size());
  for (const MeshShape& m : meshes_) {
    offsets_.push_back(size_);
    size_ += axes(m).size();
  }
}

MeshAxes PlanSpace::axes(const MeshShape& mesh) const {
  MeshAxes a;
  a.sequence_parallel = mesh.tp > 1 ? std::span<const bool>(sp_multi_.data(), sp_multi_n_)
                                    : std::span<const bool>(sp_single_.data(), sp_single_n_);
  a.micro_batch = micro_batches_;
  a.schedule = single_stage_schedules_;
  for (const auto& [pp, choices] : pipelined_schedules_)
    if (pp == mesh.pp) a.schedule = choices;
  a.zero_stage = mesh.weight_replicas() == 1   ? zero_single_
                 : mesh.pp > 1                  ? zero_pipelined_
                 : mesh.tp > 1 || mesh.cp > 1   ? zero_tp_cp_
                                                : zero_multi_;
  a.recompute = recomputes_;
  return a;
}



void PlanPins::SetKnobs(ParallelPlan* plan) const {
  for (const PlanFieldSpec& f : PlanFields())
    if (f.role == PlanFieldRole::kChoice) f.set(*plan, (*this)[f.id].value_or(f.default_value));
}

void PlanSpace::SetBaseKnobs(ParallelPlan* plan) const { pins_.SetKnobs(plan); }

ParallelPlan PlanSpace::Canonical(const ParallelPlan& plan) const {
  ParallelPlan out = plan;
  if (plan.pp == 1) {
    out.schedule = single_stage_schedules_.front().schedule;
    out.virtual_stages = single_stage_schedules_.front().virtual_stages;
  }
  if (plan.weight_replicas() == 1 && zero_single_.size() == 1 && zero_single_[0] == 0) out.zero_stage = 0;
  return out;
}

namespace {

template <typename T, typename Eq>
std::optional<int64_t> IndexOf(std::span<const T> values, Eq eq) {
  for (size_t i = 0; i < values.size(); ++i)
    if (eq(values[i])) return static_cast<int64_t>(i);
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> PlanSpace::OrdinalOf(const ParallelPlan& plan) const {
  // The overlap and offload choices are not grid axes: any value is this grid point's
  // variant, unless a pin fixes it.
  for (const PlanFieldSpec& f : PlanFields())
    if (f.role == PlanFieldRole::kChoice && pins_[f.id] && *pins_[f.id] != f.get(plan))
      return std::nullopt;
  for (size_t m = 0; m < meshes_.size(); ++m) {
    const MeshShape& mesh = meshes_[m];
    if (mesh.dp != plan.dp || mesh.tp != plan.tp || mesh.pp != plan.pp || mesh.cp != plan.cp ||
        mesh.ep != plan.ep)
      continue;
    const MeshAxes a = axes(mesh);
    const auto sp = IndexOf(a.sequence_parallel, [&](bool v) { return v == plan.sequence_parallel; });
    const auto mbs = IndexOf(a.micro_batch, [&](int64_t v) { return v == plan.micro_batch; });
    const auto sched = IndexOf(a.schedule, [&](const ScheduleChoice& v) {
      return v.schedule == plan.schedule && v.virtual_stages == plan.virtual_stages &&
             v.split == StageSplitOf(plan);
    });
    const auto zero = IndexOf(a.zero_stage, [&](int v) { return v == plan.zero_stage; });
    const auto rc =
        IndexOf(a.recompute, [&](const RecomputePolicy& v) { return v == plan.recompute; });
    if (!sp || !mbs || !sched || !zero || !rc) return std::nullopt;
    const int64_t structure =
        (*sp * static_cast<int64_t>(a.micro_batch.size()) + *mbs) *
            static_cast<int64_t>(a.schedule.size()) + *sched;
    return offsets_[m] + structure * a.inner_size() +
           *zero * static_cast<int64_t>(a.recompute.size()) + *rc;
  }
  return std::nullopt;
}

}  // namespace meshplan
