#include "gui/tradeoffs.h"

#include <algorithm>
#include <cmath>

#include "planner/cost/cost_model.h"
#include "planner/plan_fields.h"
#include "planner/search/plan_space.h"  // Divisors
#include "planner/stage_layers.h"

namespace meshplan {
namespace {

// ===== small helpers =========================================================

// How far apart two positive sizes are, on a log scale (2 vs 4 == 4 vs 8).
double LogDistance(int64_t a, int64_t b) {
  return std::abs(std::log2(static_cast<double>(std::max<int64_t>(a, 1))) -
                  std::log2(static_cast<double>(std::max<int64_t>(b, 1))));
}

// The plan field of a knob (planner/plan_fields.h): the knobs before the stage split are
// the table's first rows, in its order; the stage split stands for two rows (nullptr).
const PlanFieldSpec* FieldOf(Knob knob) {
  return knob == Knob::kStageSplit ? nullptr : &PlanFields()[static_cast<size_t>(knob)];
}

void SetKnob(ParallelPlan& plan, Knob knob, int64_t value) {
  if (const PlanFieldSpec* field = FieldOf(knob))
    field->set(plan, value);
  else
    SetStageSplit(&plan, {value / kStageSplitBase, value % kStageSplitBase});
}

// The ep values that can hold for this model and dp: divisors of dp dividing the experts
// (1 for a dense model), closest to `current` first.
std::vector<int64_t> EpValues(const ModelSpec& model, int64_t dp, int64_t current) {
  std::vector<int64_t> values;
  if (!model.moe.enabled() || dp < 1) return {1};
  for (int64_t v : Divisors(dp))
    if (model.moe.experts % v == 0) values.push_back(v);
  std::stable_sort(values.begin(), values.end(), [current](int64_t a, int64_t b) {
    return LogDistance(a, current) < LogDistance(b, current);
  });
  return values;
}

// The stage splits offered for the plan's pp: even (0) and the lighter ends, when there is
// one (for its vpp chunks under the interleaved schedule).
std::vector<int64_t> StageSplitValues(int64_t layers, const ParallelPlan& plan) {
  std::vector<int64_t> values = {0};
  const bool chunked = plan.schedule == PipelineSchedule::kInterleaved && plan.virtual_stages > 1;
  const std::optional<StageSplit> split = chunked
                                              ? LighterEndsSplit(layers, plan.pp, plan.virtual_stages)
                                              : LighterEndsSplit(layers, plan.pp);
  if (split) values.push_back(split->first * kStageSplitBase + split->last);
  return values;
}

// The layers whose divisors the vpp knob offers: a stage's even share (the middle stages'
// with uneven ends), or all layers when pp does not divide them.
int64_t LayersToChunk(int64_t layers, const ParallelPlan& plan) {
  if (HasUnevenStages(plan)) return std::max<int64_t>(SplitLayers(layers, plan).middle, 1);
  return plan.pp > 0 && layers % plan.pp == 0 ? layers / plan.pp : layers;
}

// The specs every check needs, bundled for the helpers below.
struct Ctx {
  const ModelSpec& model;
  const ClusterSpec& cluster;
  const TrainingSpec& training;
  int64_t world() const { return cluster.world_size(); }
  // Megatron placement, as the search's default: a tp group stays inside a node.
  int64_t tp_group_limit() const { return TpGroupLimit(cluster, /*allow_tp_across_nodes=*/false); }
  bool Valid(const ParallelPlan& plan) const {
    return CheckPlan(plan, model, training, world(), tp_group_limit()) == 0;
  }
  std::string WhyInvalid(const ParallelPlan& plan) const {
    std::string out;
    for (const PlanViolation& v : Validate(plan, model, training, world(), tp_group_limit()))
      out += (out.empty() ? "" : "; ") + v.message;
    return out;
  }
};

// Keeps dp*tp*pp*cp == GPUs after `knob` changed: dp <-> tp trade, pp and cp take
// from dp. False (and a reason) when the product cannot be kept.
bool RefitMesh(ParallelPlan& plan, Knob knob, int64_t world, std::string* why_not) {
  const bool moves_tp = knob == Knob::kDp;
  if (knob != Knob::kDp && knob != Knob::kTp && knob != Knob::kPp && knob != Knob::kCp)
    return true;
  const int64_t fixed = moves_tp ? plan.dp * plan.pp * plan.cp : plan.tp * plan.pp * plan.cp;
  if (fixed < 1 || world % fixed != 0) {
    if (why_not)
      *why_not = std::string(moves_tp ? "dp*pp*cp" : "tp*pp*cp") + " = " + std::to_string(fixed) +
                 " does not divide the " + std::to_string(world) + " GPUs";
    return false;
  }
  (moves_tp ? plan.tp : plan.dp) = world / fixed;
  return true;
}

// Other values a secondary knob may take to repair a plan, closest to its current value first.
std::vector<int64_t> RepairValues(const Ctx& ctx, const ParallelPlan& plan, Knob knob) {
  std::vector<int64_t> values;
  const int64_t current = KnobValue(plan, knob);
  switch (knob) {
    case Knob::kSequenceParallel: values = {current ? 0 : 1}; break;
    case Knob::kEp:
      for (int64_t v : EpValues(ctx.model, plan.dp, current))
        if (v != current) values.push_back(v);
      break;
    case Knob::kStageSplit:
      for (int64_t v : StageSplitValues(ctx.model.layers, plan))
        if (v != current) values.push_back(v);
      break;
    case Knob::kSchedule:  // the default schedule first
      for (PipelineSchedule s : {PipelineSchedule::k1F1B, PipelineSchedule::kGpipe,
                                 PipelineSchedule::kInterleaved, PipelineSchedule::kZeroBubbleH1})
        if (static_cast<int64_t>(s) != current) values.push_back(static_cast<int64_t>(s));
      break;
    case Knob::kMicroBatch:
    case Knob::kVirtualStages: {
      const bool mbs = knob == Knob::kMicroBatch;
      const int64_t b = ctx.training.global_batch;
      const int64_t whole = mbs ? (plan.dp > 0 && b % plan.dp == 0 ? b / plan.dp : b)
                                : LayersToChunk(ctx.model.layers, plan);
      for (int64_t v : Divisors(whole))
        if (v != current) values.push_back(v);
      std::stable_sort(values.begin(), values.end(), [current](int64_t a, int64_t b) {
        return LogDistance(a, current) < LogDistance(b, current);
      });
      break;
    }
    default: break;
  }
  return values;
}

// The closest valid plan that differs from `plan` in at most two secondary knobs
// (sp, mbs, schedule, vpp), never in `pinned`.
std::optional<ParallelPlan> Repair(const Ctx& ctx, const ParallelPlan& plan,
                                   std::optional<Knob> pinned) {
  if (ctx.Valid(plan)) return plan;
  std::vector<Knob> free;
  for (Knob k : {Knob::kEp, Knob::kSequenceParallel, Knob::kMicroBatch, Knob::kSchedule,
                 Knob::kVirtualStages, Knob::kStageSplit})
    if (!pinned || k != *pinned) free.push_back(k);
  for (Knob k : free)
    for (int64_t v : RepairValues(ctx, plan, k)) {
      ParallelPlan q = plan;
      SetKnob(q, k, v);
      if (ctx.Valid(q)) return q;
    }
  for (size_t i = 0; i < free.size(); ++i)
    for (size_t j = i + 1; j < free.size(); ++j)
      for (int64_t v : RepairValues(ctx, plan, free[i])) {
        ParallelPlan q = plan;
        SetKnob(q, free[i], v);
        for (int64_t w : RepairValues(ctx, q, free[j])) {
          ParallelPlan r = q;
          SetKnob(r, free[j], w);
          if (ctx.Valid(r)) return r;
        }
      }
  return std::nullopt;
}

std::vector<int64_t> CandidateValues(const Ctx& ctx, const ParallelPlan& plan, Knob knob) {
  switch (knob) {
    case Knob::kDp: case Knob::kTp: case Knob::kPp: case Knob::kCp:
      return Divisors(ctx.world());
    case Knob::kEp:
      return ctx.model.moe.enabled() && plan.dp >= 1 ? Divisors(plan.dp) : std::vector<int64_t>{1};
    case Knob::kZero: return {0, 1, 2, 3};
    case Knob::kSequenceParallel: return {0, 1};
    case Knob::kMicroBatch: {
      const int64_t b = ctx.training.global_batch;
      return Divisors(plan.dp > 0 && b % plan.dp == 0 ? b / plan.dp : b);
    }
    case Knob::kRecompute:  // the plan field's values (RecomputeCode): today's three, then
                            // torchtitan's op and every:2
      return {RecomputeCode(Recompute::kNone), RecomputeCode(Recompute::kSelective),
              RecomputeCode(Recompute::kFull), RecomputeCode(Recompute::kOp),
              RecomputeCode(RecomputePolicy::Every(2))};
    case Knob::kSchedule:
      return {static_cast<int64_t>(PipelineSchedule::kGpipe),
              static_cast<int64_t>(PipelineSchedule::k1F1B),
              static_cast<int64_t>(PipelineSchedule::kInterleaved),
              static_cast<int64_t>(PipelineSchedule::kZeroBubbleH1)};
    case Knob::kVirtualStages: return Divisors(LayersToChunk(ctx.model.layers, plan));
    case Knob::kStageSplit: {
      std::vector<int64_t> values = StageSplitValues(ctx.model.layers, plan);
      const int64_t current = KnobValue(plan, knob);  // a split typed into the plan string
      if (std::find(values.begin(), values.end(), current) == values.end())
        values.push_back(current);
      return values;
    }
  }
  return {};
}

// The knobs that differ, leaving out `skip` (the one the user set).
std::string ChangesExcept(const ParallelPlan& from, const ParallelPlan& to,
                          std::optional<Knob> skip) {
  std::string out;
  for (Knob k : kAllKnobs) {
    if (skip && k == *skip) continue;
    const int64_t v = KnobValue(to, k);
    if (v != KnobValue(from, k))
      out += (out.empty() ? "" : ", ") + std::string(KnobKey(k)) + "=" + KnobValueLabel(k, v);
  }
  // The overlap and offload choices (planner/plan_fields.h), as the plan string spells them.
  for (const PlanFieldSpec& f : PlanFields())
    if (f.role == PlanFieldRole::kChoice && f.get(from) != f.get(to))
      out += (out.empty() ? "" : ", ") + std::string(f.key) + "=" + FormatFieldValue(f, f.get(to));
  return out;
}

TradeoffRow MakeRow(const Ctx& ctx, const ParallelPlan& current, Knob knob, int64_t value,
                    std::string label) {
  TradeoffRow row;
  row.label = std::move(label);
  std::string why;
  if (auto plan = PlanWithKnob(ctx.model, ctx.cluster, ctx.training, current, knob, value, &why)) {
    row.valid = true;
    row.plan = *plan;
    row.is_current = *plan == current;
    row.note = ChangesExcept(current, *plan, knob);
    row.cost = Estimate(ctx.model, ctx.cluster, ctx.training, *plan,
                        {.memory_headroom = kDefaultMemoryHeadroom});
  } else {
    row.note = why;
  }
  return row;
}

}  // namespace

// ===== knobs =================================================================

const char* KnobKey(Knob knob) {
  const PlanFieldSpec* field = FieldOf(knob);
  return field ? field->key : "stages";
}

int64_t KnobValue(const ParallelPlan& plan, Knob knob) {
  if (const PlanFieldSpec* field = FieldOf(knob)) return field->get(plan);
  const StageSplit split = StageSplitOf(plan);
  return split.first * kStageSplitBase + split.last;
}

std::string KnobValueLabel(Knob knob, int64_t value) {
  switch (knob) {
    case Knob::kSequenceParallel: return value ? "on" : "off";
    case Knob::kRecompute:
    case Knob::kSchedule: return FieldOf(knob)->name(value);
    case Knob::kStageSplit:
      return value == 0 ? "even"
                        : "first " + std::to_string(value / kStageSplitBase) + ", last " +
                              std::to_string(value % kStageSplitBase);
    default: return std::to_string(value);
  }
}


std::string DescribePlanChanges(const ParallelPlan& from, const ParallelPlan& to) {
  return ChangesExcept(from, to, std::nullopt);
}

std::optional<ParallelPlan> PlanWithKnob(const ModelSpec& model, const ClusterSpec& cluster,
                                         const TrainingSpec& training,
                                         const ParallelPlan& current, Knob knob, int64_t value,
                                         std::string* why_not) {
  const Ctx ctx{model, cluster, training};
  ParallelPlan plan = current;
  SetKnob(plan, knob, value);
  if (!RefitMesh(plan, knob, ctx.world(), why_not)) return std::nullopt;
  if (auto repaired = Repair(ctx, plan, knob)) return repaired;
  if (why_not) *why_not = ctx.WhyInvalid(plan);
  return std::nullopt;
}

std::vector<KnobOption> KnobOptions(const ModelSpec& model, const ClusterSpec& cluster,
                                    const TrainingSpec& training, const ParallelPlan& current,
                                    Knob knob) {
  const Ctx ctx{model, cluster, training};
  const bool current_valid = ctx.Valid(current);
  std::vector<KnobOption> options;
  for (int64_t value : CandidateValues(ctx, current, knob)) {
    KnobOption option;
    option.value = value;
    option.label = KnobValueLabel(knob, value);
    if (current_valid && value == KnobValue(current, knob)) {
      option.valid = true;
      option.plan = current;
    } else if (auto plan = PlanWithKnob(model, cluster, training, current, knob, value,
                                        &option.note)) {
      option.valid = true;
      option.plan = *plan;
      option.note = ChangesExcept(current, *plan, knob);  // what else it changes
    }
    options.push_back(std::move(option));
  }
  return options;
}

ParallelPlan FitPlanToSetup(const ModelSpec& model, const ClusterSpec& cluster,
                            const TrainingSpec& training, const ParallelPlan& wanted) {
  const Ctx ctx{model, cluster, training};
  if (ctx.Valid(wanted)) return wanted;
  // Candidate (tp, pp, cp) with dp taking the rest, the fewest and smallest changes first.
  struct Mesh {
    int64_t tp, pp, cp;
    int changed;
    double distance;
  };
  std::vector<Mesh> meshes;
  const std::vector<int64_t> divisors = Divisors(ctx.world());
  for (int64_t tp : divisors)
    for (int64_t pp : divisors)
      for (int64_t cp : divisors)
        if (ctx.world() % (tp * pp * cp) == 0)
          meshes.push_back({tp, pp, cp,
                            (tp != wanted.tp) + (pp != wanted.pp) + (cp != wanted.cp),
                            LogDistance(tp, wanted.tp) + LogDistance(pp, wanted.pp) +
                                LogDistance(cp, wanted.cp)});
  std::stable_sort(meshes.begin(), meshes.end(), [](const Mesh& a, const Mesh& b) {
    return a.changed != b.changed ? a.changed < b.changed : a.distance < b.distance;
  });
  for (const Mesh& m : meshes) {
    ParallelPlan plan = wanted;
    plan.tp = m.tp;
    plan.pp = m.pp;
    plan.cp = m.cp;
    plan.dp = ctx.world() / (m.tp * m.pp * m.cp);
    if (auto repaired = Repair(ctx, plan, std::nullopt)) return *repaired;
  }
  return wanted;
}

// ===== trade-off rows ========================================================

std::vector<TradeoffRow> ZeroTradeoffRows(const ModelSpec& model, const ClusterSpec& cluster,
                                          const TrainingSpec& training,
                                          const ParallelPlan& current) {
  const Ctx ctx{model, cluster, training};
  std::vector<TradeoffRow> rows;
  for (int zero = 0; zero <= 3; ++zero)
    rows.push_back(MakeRow(ctx, current, Knob::kZero, zero, "ZeRO-" + std::to_string(zero)));
  return rows;
}

namespace {

// One row per value of a size knob (tp, ep), labelled "<name>=<value>".
template <typename Values>
std::vector<TradeoffRow> SizeRows(const Ctx& ctx, const ParallelPlan& current, Knob knob,
                                  const std::string& name, const Values& values) {
  std::vector<TradeoffRow> rows;
  for (int64_t value : values)
    rows.push_back(MakeRow(ctx, current, knob, value, name + "=" + std::to_string(value)));
  return rows;
}

}  // namespace

std::vector<TradeoffRow> TpTradeoffRows(const ModelSpec& model, const ClusterSpec& cluster,
                                        const TrainingSpec& training,
                                        const ParallelPlan& current) {
  return SizeRows({model, cluster, training}, current, Knob::kTp, "tp", kTradeoffTpValues);
}

std::vector<TradeoffRow> EpTradeoffRows(const ModelSpec& model, const ClusterSpec& cluster,
                                        const TrainingSpec& training,
                                        const ParallelPlan& current) {
  return SizeRows({model, cluster, training}, current, Knob::kEp, "ep", kTradeoffEpValues);
}

}  // namespace meshplan
