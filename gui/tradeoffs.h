// The explorer's pure logic about plans: which knob values are valid, and the
// trade-off rows (ZeRO 0-3, tp = 1, 2, 4, 8, ep = 1, 2, 4, 8). No ImGui here; tested
// without a window.
//
// Validity is decided by CheckPlan()/Validate() (planner/parallel_plan.h) only;
// nothing here re-states a rule (the placement rule "a tp group stays inside a node"
// is asked for, as the search does by default). What this file adds is how one knob
// moves a plan:
//  - the mesh factors keep dp*tp*pp*cp equal to the cluster's GPUs: tp and dp
//    trade against each other (the ZeRO/TP trade-off), pp and cp take from dp; ep is
//    carved out of dp and moves no factor (it changes memory per GPU against all-to-all
//    time: the expert trade-off);
//  - if the plan that results breaks a rule, the other secondary knobs (sp, mbs,
//    schedule, vpp, stage split, ep; never the one being set, never zero or recompute) may change,
//    at most two of them, the fewest and closest changes first. The option then
//    says what else changed ("also sets sp=0").
// A value is offered (valid) when that yields a valid plan.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/training_spec.h"

namespace meshplan {

// The plan's knobs, in the order the Knobs panel shows them: the grid axes of
// planner/plan_fields.h in its order, the two stage-split fields as one knob.
enum class Knob { kDp, kTp, kPp, kCp, kEp, kZero, kSequenceParallel, kMicroBatch, kRecompute,
                  kSchedule, kVirtualStages, kStageSplit };
inline constexpr int kNumKnobs = 12;
inline constexpr std::array<Knob, kNumKnobs> kAllKnobs{
    Knob::kDp,         Knob::kTp,        Knob::kPp,       Knob::kCp,       Knob::kEp,
    Knob::kZero,       Knob::kSequenceParallel, Knob::kMicroBatch,
    Knob::kRecompute,  Knob::kSchedule,  Knob::kVirtualStages, Knob::kStageSplit};

// The plan-string key of a knob ("dp", "sp", "mbs", "vpp", ...; "stages" for the stage
// split, which stands for the first and the last stage's layers).
const char* KnobKey(Knob knob);
// A knob's value as an integer: factors as they are, sp 0/1, recompute and
// schedule as their enum index, the stage split (StageSplitOf) as first * kStageSplitBase +
// last (0: even stages).
int64_t KnobValue(const ParallelPlan& plan, Knob knob);
inline constexpr int64_t kStageSplitBase = 1'000'001;  // > kMaxStageLayers
// "4", "on", "selective", "1f1b", "even", "first 7, last 7".
std::string KnobValueLabel(Knob knob, int64_t value);

// One value a knob could take from the current plan.
struct KnobOption {
  int64_t value = 0;
  std::string label;      // KnobValueLabel(knob, value)
  bool valid = false;     // choosing it gives a valid plan
  ParallelPlan plan;      // that plan (meaningful when valid)
  std::string note;       // valid: the other knobs it changes ("dp=2, sp=0", "" if none);
                          // invalid: why not (the violated rules' messages)
};

// The candidate values of `knob` (dp/tp/pp/cp: divisors of the GPU count; ep: divisors of
// dp for a MoE model, 1 for a dense one; zero 0-3;
// sp off/on; mbs: divisors of the global batch per dp rank; recompute none, selective,
// full, op and every:2; every schedule; vpp: divisors of the layers per stage; stage split: even, and the pp's
// LighterEndsSplit (planner/stage_layers.h)), each with its verdict.
std::vector<KnobOption> KnobOptions(const ModelSpec& model, const ClusterSpec& cluster,
                                    const TrainingSpec& training, const ParallelPlan& current,
                                    Knob knob);

// The plan after setting `knob` to `value` from `current`, as described at the top;
// nullopt when no valid plan results, with the reason in *why_not (if given).
std::optional<ParallelPlan> PlanWithKnob(const ModelSpec& model, const ClusterSpec& cluster,
                                         const TrainingSpec& training,
                                         const ParallelPlan& current, Knob knob, int64_t value,
                                         std::string* why_not = nullptr);

// The valid plan closest to `wanted` for a (new) setup: `wanted` itself when valid;
// else the same tp/pp/cp with dp refitted; else the mesh factors that change least.
// Secondary knobs are repaired as above. Returns `wanted` unchanged when nothing is
// valid (the explorer then shows the violations).
ParallelPlan FitPlanToSetup(const ModelSpec& model, const ClusterSpec& cluster,
                            const TrainingSpec& training, const ParallelPlan& wanted);

// "dp=2, sp=0": the knobs whose values differ between two plans (empty if none).
std::string DescribePlanChanges(const ParallelPlan& from, const ParallelPlan& to);

// One column of a trade-off view: the current plan with one knob changed.
struct TradeoffRow {
  std::string label;       // "ZeRO-2", "tp=4"
  bool valid = false;
  bool is_current = false; // this row is the plan in the knobs
  ParallelPlan plan;
  std::string note;        // valid: other knobs changed; invalid: why
  PlanCost cost;           // the detailed Estimate() of `plan` (valid rows only)
};

// The current plan at ZeRO stage 0, 1, 2, 3 (nothing else changes).
std::vector<TradeoffRow> ZeroTradeoffRows(const ModelSpec& model, const ClusterSpec& cluster,
                                          const TrainingSpec& training,
                                          const ParallelPlan& current);
// The current plan at tp = 1, 2, 4, 8 (dp rebalanced, secondary knobs repaired).
inline constexpr std::array<int64_t, 4> kTradeoffTpValues{1, 2, 4, 8};
std::vector<TradeoffRow> TpTradeoffRows(const ModelSpec& model, const ClusterSpec& cluster,
                                        const TrainingSpec& training,
                                        const ParallelPlan& current);
// The current plan at ep = 1, 2, 4, 8 (dp unchanged, secondary knobs repaired): expert
// states per GPU against the all-to-alls. A dense model's rows above 1 are invalid
// (ep_needs_moe), with the rule's message.
inline constexpr std::array<int64_t, 4> kTradeoffEpValues{1, 2, 4, 8};
std::vector<TradeoffRow> EpTradeoffRows(const ModelSpec& model, const ClusterSpec& cluster,
                                        const TrainingSpec& training,
                                        const ParallelPlan& current);

}  // namespace meshplan
