#include "planner/search/plan_space.h"

#include <algorithm>
#include <sstream>

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

bool PlanPins::empty() const { return Keys().empty(); }

std::vector<std::string> PlanPins::Keys() const {
  std::vector<std::string> keys;
  if (dp) keys.push_back("dp");
  if (tp) keys.push_back("tp");
  if (pp) keys.push_back("pp");
  if (cp) keys.push_back("cp");
  if (ep) keys.push_back("ep");
  if (zero_stage) keys.push_back("zero");
  if (sequence_parallel) keys.push_back("sp");
  if (micro_batch) keys.push_back("mbs");
  if (recompute) keys.push_back("recompute");
  if (schedule) keys.push_back("schedule");
  if (virtual_stages) keys.push_back("vpp");
  if (tp_comm_overlap) keys.push_back("tp_overlap");
  if (first_stage_layers) keys.push_back("first_stage_layers");
  if (last_stage_layers) keys.push_back("last_stage_layers");
  if (offload_optimizer) keys.push_back("offload_opt");
  if (offload_activations) keys.push_back("offload_act");
  if (offload_params) keys.push_back("offload_params");
  if (dp_comm_overlap) keys.push_back("dp_overlap");
  if (zero3_prefetch) keys.push_back("prefetch");
  return keys;
}

std::string PlanPins::ToString() const {
  std::string s;
  auto add = [&s](const std::string& item) { s += (s.empty() ? "" : ",") + item; };
  if (dp) add("dp=" + std::to_string(*dp));
  if (tp) add("tp=" + std::to_string(*tp));
  if (pp) add("pp=" + std::to_string(*pp));
  if (cp) add("cp=" + std::to_string(*cp));
  if (ep) add("ep=" + std::to_string(*ep));
  if (zero_stage) add("zero=" + std::to_string(*zero_stage));
  if (sequence_parallel) add(*sequence_parallel ? "sp=1" : "sp=0");
  if (micro_batch) add("mbs=" + std::to_string(*micro_batch));
  if (recompute) add(std::string("recompute=") + meshplan::ToString(*recompute));
  if (schedule) add(std::string("schedule=") + meshplan::ToString(*schedule));
  if (virtual_stages) add("vpp=" + std::to_string(*virtual_stages));
  if (tp_comm_overlap) add(*tp_comm_overlap ? "tp_overlap=1" : "tp_overlap=0");
  if (first_stage_layers) add("first_stage_layers=" + std::to_string(*first_stage_layers));
  if (last_stage_layers) add("last_stage_layers=" + std::to_string(*last_stage_layers));
  auto flag = [&add](const char* key, const std::optional<bool>& v) {
    if (v) add(std::string(key) + (*v ? "=1" : "=0"));
  };
  flag("offload_opt", offload_optimizer);
  flag("offload_act", offload_activations);
  flag("offload_params", offload_params);
  flag("dp_overlap", dp_comm_overlap);
  if (zero3_prefetch) add("prefetch=" + std::to_string(*zero3_prefetch));
  return s;
}

PlanPins PlanPins::Without(const std::string& key) const {
  PlanPins out = *this;
  if (key == "dp") out.dp.reset();
  else if (key == "tp") out.tp.reset();
  else if (key == "pp") out.pp.reset();
  else if (key == "cp") out.cp.reset();
  else if (key == "ep") out.ep.reset();
  else if (key == "zero") out.zero_stage.reset();
  else if (key == "sp") out.sequence_parallel.reset();
  else if (key == "mbs") out.micro_batch.reset();
  else if (key == "recompute") out.recompute.reset();
  else if (key == "schedule") out.schedule.reset();
  else if (key == "vpp") out.virtual_stages.reset();
  else if (key == "tp_overlap") out.tp_comm_overlap.reset();
  else if (key == "first_stage_layers") out.first_stage_layers.reset();
  else if (key == "last_stage_layers") out.last_stage_layers.reset();
  else if (key == "offload_opt") out.offload_optimizer.reset();
  else if (key == "offload_act") out.offload_activations.reset();
  else if (key == "offload_params") out.offload_params.reset();
  else if (key == "dp_overlap") out.dp_comm_overlap.reset();
  else if (key == "prefetch") out.zero3_prefetch.reset();
  return out;
}

PlanPins ParsePlanPins(const std::string& text, const std::string& source) {
  PlanPins pins;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    // One key at a time through the plan-string parser: one spelling, one set of errors.
    const ParallelPlan p = ParsePlanString(item, source);
    const std::string key = item.substr(0, item.find('='));
    auto positive = [&](int64_t v) {
      if (v < 1) throw InputError({source}, key, "must be >= 1, got " + std::to_string(v));
      return v;
    };
    if (key == "dp") pins.dp = positive(p.dp);
    else if (key == "tp") pins.tp = positive(p.tp);
    else if (key == "pp") pins.pp = positive(p.pp);
    else if (key == "cp") pins.cp = positive(p.cp);
    else if (key == "ep") pins.ep = positive(p.ep);
    else if (key == "mbs") pins.micro_batch = positive(p.micro_batch);
    else if (key == "vpp") pins.virtual_stages = positive(p.virtual_stages);
    else if (key == "sp") pins.sequence_parallel = p.sequence_parallel;
    else if (key == "recompute") pins.recompute = p.recompute;
    else if (key == "schedule") pins.schedule = p.schedule;
    else if (key == "tp_overlap") pins.tp_comm_overlap = p.tp_comm_overlap;
    else if (key == "first_stage_layers") pins.first_stage_layers = positive(p.first_stage_layers);
    else if (key == "last_stage_layers") pins.last_stage_layers = positive(p.last_stage_layers);
    else if (key == "offload_opt") pins.offload_optimizer = p.offload_optimizer;
    else if (key == "offload_act") pins.offload_activations = p.offload_activations;
    else if (key == "offload_params") pins.offload_params = p.offload_params;
    else if (key == "dp_overlap") pins.dp_comm_overlap = p.dp_comm_overlap;
    else if (key == "prefetch") {
      if (p.zero3_prefetch < 0 || p.zero3_prefetch > kMaxZero3Prefetch)
        throw InputError({source}, key, "expected an integer from 0 to " +
                                            std::to_string(kMaxZero3Prefetch) + "; got " +
                                            std::to_string(p.zero3_prefetch));
      pins.zero3_prefetch = p.zero3_prefetch;
    }
    else if (key == "zero") {
      if (p.zero_stage < 0 || p.zero_stage > 3)
        throw InputError({source}, key, "expected one of: 0, 1, 2, 3; got " +
                                            std::to_string(p.zero_stage));
      pins.zero_stage = p.zero_stage;
    } else {
      throw InputError({source}, key,
                       "cannot be pinned; allowed: dp, tp, pp, cp, ep, zero, sp, mbs, recompute, "
                       "schedule, vpp, tp_overlap, first_stage_layers, last_stage_layers, "
                       "offload_opt, offload_act, offload_params, dp_overlap, prefetch");
    }
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
  uneven.first_stage_layers = split->first_stage_layers;
  uneven.last_stage_layers = split->last_stage_layers;
  const bool better = LargestStageParams(model, SplitLayers(model.layers, uneven)) <
                      LargestStageParams(model, SplitLayers(model.layers, even));
  return better ? split : std::nullopt;
}

std::vector<ScheduleChoice> UnevenInterleavedChoices(const ModelSpec& model, int64_t pp,
                                                     const StageSplit& split,
                                                     std::optional<int64_t> pinned_vpp) {
  ParallelPlan plan;
  plan.pp = pp;
  plan.first_stage_layers = split.first_stage_layers;
  plan.last_stage_layers = split.last_stage_layers;
  const int64_t middle = SplitLayers(model.layers, plan).middle;
  std::vector<ScheduleChoice> choices;  // vpp >= 2 dividing the middle count, split in chunks
  for (int64_t vpp : Divisors(std::max<int64_t>(middle, 1))) {
    if (vpp < 2 || (pinned_vpp && vpp != *pinned_vpp)) continue;
    if (const std::optional<StageSplit> chunked = LighterEndsSplit(model.layers, pp, vpp))
      choices.push_back({PipelineSchedule::kInterleaved, vpp, chunked->first_stage_layers,
                         chunked->last_stage_layers});
  }
  if (choices.size() > 2) choices = {choices.front(), choices.back()};
  return choices;
}

PlanSpace::PlanSpace(const ModelSpec& model, const TrainingSpec& training,
                     const ClusterSpec& cluster, const PlanSpaceOptions& options)
    : world_size_(cluster.world_size()),
      tp_group_limit_(TpGroupLimit(cluster, options.allow_tp_across_nodes)),
      pins_(options.pins) {
  const PlanPins& pins = options.pins;

  // Meshes: tp, then pp, then cp ascending; dp takes the rest.
  for (int64_t tp : Divisors(world_size_)) {
    if (pins.tp && *pins.tp != tp) continue;
    for (int64_t pp : Divisors(world_size_ / tp)) {
      if (pins.pp && *pins.pp != pp) continue;
      for (int64_t cp : Divisors(world_size_ / tp / pp)) {
        if (pins.cp && *pins.cp != cp) continue;
        const int64_t dp = world_size_ / tp / pp / cp;
        if (pins.dp && *pins.dp != dp) continue;
        if (pins.ep) {  // as given; the constraints judge it
          meshes_.push_back({dp, tp, pp, cp, *pins.ep});
          continue;
        }
        for (int64_t ep : model.moe.enabled() ? Divisors(dp) : std::vector<int64_t>{1})
          if (model.moe.experts == 0 || model.moe.experts % ep == 0)
            meshes_.push_back({dp, tp, pp, cp, ep});
      }
    }
  }

  if (pins.sequence_parallel) {
    sp_single_ = sp_multi_ = {*pins.sequence_parallel, false};
    sp_single_n_ = sp_multi_n_ = 1;
  } else {
    sp_single_ = {false, false};
    sp_single_n_ = 1;
    sp_multi_ = {false, true};
    sp_multi_n_ = 2;
  }

  micro_batches_ = pins.micro_batch ? std::vector<int64_t>{*pins.micro_batch}
                                    : Divisors(std::max<int64_t>(training.global_batch, 1));

  single_stage_schedules_ = {{PipelineSchedule::k1F1B, 1}};
  std::vector<ScheduleChoice> even;
  if (pins.schedule && pins.virtual_stages) {
    even = {{*pins.schedule, *pins.virtual_stages}};
  } else {
    for (PipelineSchedule s : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B,
                               PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kInterleaved}) {
      if (pins.schedule && *pins.schedule != s) continue;
      if (s != PipelineSchedule::kInterleaved) {
        if (!pins.virtual_stages || *pins.virtual_stages == 1) even.push_back({s, 1});
      } else if (pins.virtual_stages) {
        if (*pins.virtual_stages > 1) even.push_back({s, *pins.virtual_stages});
      } else {
        for (int64_t vpp : Divisors(std::max<int64_t>(model.layers, 1)))
          if (vpp >= 2) even.push_back({s, vpp});
      }
    }
  }
  // Uneven stages: 1f1b, and interleaved with the vpp that split them (see the header).
  const bool interleaved_allowed =
      (!pins.schedule || *pins.schedule == PipelineSchedule::kInterleaved) &&
      (!pins.virtual_stages || *pins.virtual_stages > 1);
  for (const MeshShape& mesh : meshes_) {
    if (mesh.pp == 1 || std::any_of(pipelined_schedules_.begin(), pipelined_schedules_.end(),
                                    [&](const auto& entry) { return entry.first == mesh.pp; }))
      continue;
    std::vector<ScheduleChoice> choices;
    if (pins.first_stage_layers || pins.last_stage_layers) {  // the pinned split, as given
      for (const ScheduleChoice& c : even)
        choices.push_back({c.schedule, c.virtual_stages, pins.first_stage_layers.value_or(0),
                           pins.last_stage_layers.value_or(0)});
    } else {
      choices = even;
      const std::optional<StageSplit> split =
          options.uneven_stages ? UnevenSplitWorthTrying(model, mesh.pp) : std::nullopt;
      if (split) {
        for (const ScheduleChoice& c : even)
          if (c.virtual_stages == 1 && c.schedule == PipelineSchedule::k1F1B)
            choices.push_back({c.schedule, 1, split->first_stage_layers, split->last_stage_layers});
        if (interleaved_allowed)
          for (const ScheduleChoice& c :
               UnevenInterleavedChoices(model, mesh.pp, *split, pins.virtual_stages))
            choices.push_back(c);
      }
    }
    pipelined_schedules_.push_back({mesh.pp, std::move(choices)});
  }

  if (pins.zero_stage) {
    zero_single_ = zero_multi_ = {*pins.zero_stage};
  } else if (pins.offload_params.value_or(false)) {  // ZeRO-3 only (offload_params_needs_zero3)
    zero_single_ = {0};
    zero_multi_ = {3};
  } else {
    zero_single_ = {0};
    zero_multi_ = {0, 1, 2, 3};
  }
  recomputes_ = pins.recompute ? std::vector<Recompute>{*pins.recompute}
                               : std::vector<Recompute>{Recompute::kNone, Recompute::kSelective,
                                                        Recompute::kFull};

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
  a.zero_stage = mesh.dp * mesh.cp > 1 ? zero_multi_ : zero_single_;
  a.recompute = recomputes_;
  return a;
}

void PlanPins::SetKnobs(ParallelPlan* plan) const {
  const ParallelPlan defaults;
  plan->tp_comm_overlap = tp_comm_overlap.value_or(defaults.tp_comm_overlap);
  plan->dp_comm_overlap = dp_comm_overlap.value_or(defaults.dp_comm_overlap);
  plan->zero3_prefetch = zero3_prefetch.value_or(defaults.zero3_prefetch);
  plan->offload_optimizer = offload_optimizer.value_or(defaults.offload_optimizer);
  plan->offload_activations = offload_activations.value_or(defaults.offload_activations);
  plan->offload_params = offload_params.value_or(defaults.offload_params);
}

void PlanSpace::SetBaseKnobs(ParallelPlan* plan) const { pins_.SetKnobs(plan); }

ParallelPlan PlanSpace::Canonical(const ParallelPlan& plan) const {
  ParallelPlan out = plan;
  if (plan.pp == 1 && !(plan.schedule == PipelineSchedule::k1F1B && plan.virtual_stages == 1)) {
    out.schedule = PipelineSchedule::k1F1B;
    out.virtual_stages = 1;
  }
  if (plan.dp * plan.cp == 1 && zero_single_.size() == 1 && zero_single_[0] == 0) out.zero_stage = 0;
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
  ParallelPlan knobs = plan;
  SetBaseKnobs(&knobs);
  if (pins_.tp_comm_overlap && knobs.tp_comm_overlap != plan.tp_comm_overlap) return std::nullopt;
  if (pins_.dp_comm_overlap && knobs.dp_comm_overlap != plan.dp_comm_overlap) return std::nullopt;
  if (pins_.zero3_prefetch && knobs.zero3_prefetch != plan.zero3_prefetch) return std::nullopt;
  if (pins_.offload_optimizer && knobs.offload_optimizer != plan.offload_optimizer) return std::nullopt;
  if (pins_.offload_activations && knobs.offload_activations != plan.offload_activations)
    return std::nullopt;
  if (pins_.offload_params && knobs.offload_params != plan.offload_params) return std::nullopt;
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
             v.first_stage_layers == plan.first_stage_layers &&
             v.last_stage_layers == plan.last_stage_layers;
    });
    const auto zero = IndexOf(a.zero_stage, [&](int v) { return v == plan.zero_stage; });
    const auto rc = IndexOf(a.recompute, [&](Recompute v) { return v == plan.recompute; });
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
