#include "planner/parallel_plan.h"

#include <algorithm>
#include <array>

#include "planner/checked_math.h"
#include "planner/input_error.h"
#include "planner/names.h"
#include "planner/plan_fields.h"
#include "planner/stage_layers.h"

namespace meshplan {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// A product for a message: its value, or "more than 2^63" when it overflows.
std::string Str(std::optional<int64_t> v) { return v ? Str(*v) : "more than 2^63"; }

}  // namespace

const char* ConstraintId(PlanConstraint constraint) {
  constexpr const char* kIds[kNumPlanConstraints] = {
      "factors_positive", "zero_stage_range",   "world_size",      "tp_within_node",
      "tp_divides_heads", "tp_divides_kv_heads", "tp_divides_ffn",
      "ep_needs_moe",     "ep_divides_dp",      "ep_divides_experts", "pp_divides_layers",
      "stage_layers_need_pp", "stage_layers_split", "stage_layers_with_vpp",
      "cp_divides_seq",   "seq_within_max",     "sp_needs_tp",     "tp_divides_seq",
      "batch_divides",    "vpp_needs_interleaved", "interleaved_needs_pp_vpp",
      "interleaved_microbatches", "offload_params_needs_zero3",
      "offload_params_needs_offload_opt", "prefetch_range", "parallelism_offered", "prefetch_offered",
      "recompute_offered", "zero_offered",
      "offload_offered", "schedule_offered", "tp_overlap_offered", "sp_offered",
      "pp_overlap_offered"};
  const int i = static_cast<int>(constraint);
  return i >= 0 && i < kNumPlanConstraints ? kIds[i] : "?";
}

bool Offers(const RecomputeOffer& offer, Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return offer.none;
    case Recompute::kSelective: return offer.selective;
    case Recompute::kFull: return offer.full;
    case Recompute::kOp: return offer.op;
    case Recompute::kEvery: return offer.every;
  }
  return false;
}

std::vector<RecomputePolicy> OfferedRecomputePolicies(const RecomputeOffer& offer) {
  std::vector<RecomputePolicy> out;
  for (const Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull, Recompute::kOp})
    if (Offers(offer, r)) out.push_back(r);
  if (offer.every) out.push_back(RecomputePolicy::Every(2));
  return out;
}

std::vector<int> OfferedZeroStages(const ZeroOffer& offer) {
  std::vector<int> stages;
  for (int stage = 0; stage <= 3; ++stage)
    if (offer.offers(stage)) stages.push_back(stage);
  return stages;
}

std::string OfferedZeroStagesText(const ZeroOffer& offer) {
  std::string text;
  for (int stage : OfferedZeroStages(offer)) text += (text.empty() ? "" : ", ") + std::to_string(stage);
  return text;
}

std::string OffloadCombosText(const OffloadOffer& offer) {
  std::string out;
  for (int bit = 1; bit < 8; ++bit) {
    if (!((offer.combos >> bit) & 1)) continue;
    std::string combo;
    for (const auto& [mask, name] : {std::pair{1, "act"}, {2, "opt"}, {4, "params"}})
      if (bit & mask) combo += (combo.empty() ? "" : "+") + std::string(name);
    out += (out.empty() ? "" : ", ") + combo;
  }
  return out;
}

namespace {

// The plan's tp, cp and ep with whether `offer` runs each (> 1).
struct ParallelismUse {
  const char* key;
  int64_t degree;
  bool offered;
  const char* name;
};
std::array<ParallelismUse, 3> ParallelismUses(const ParallelismOffer& offer, const ParallelPlan& plan) {
  return {{{"tp", plan.tp, offer.tp, "tensor"},
           {"cp", plan.cp, offer.cp, "context"},
           {"ep", plan.ep, offer.ep, "expert"}}};
}

}  // namespace

std::string OfferedParallelismText(const ParallelismOffer& offer) {
  std::string out;
  for (const ParallelismUse& u : ParallelismUses(offer, ParallelPlan{}))
    if (u.offered) out += (out.empty() ? "" : ", ") + std::string(u.key);
  return out;
}

std::string OfferedPrefetchText(const PrefetchOffer& offer) {
  static_assert(kMaxZero3Prefetch < 8, "PrefetchOffer holds depths 0 to 7");
  std::string out;
  for (int64_t d = 0; d <= kMaxZero3Prefetch; ++d)
    if (offer.offers(d)) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return out;
}

std::string OfferedSchedulesText(const ScheduleOffer& offer) {
  std::string out;
  for (PipelineSchedule s : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B,
                             PipelineSchedule::kInterleaved, PipelineSchedule::kZeroBubbleH1})
    if (offer.offers(static_cast<int>(s))) out += (out.empty() ? "" : ", ") + std::string(ToString(s));
  return out;
}

bool TpOverlapOffered(TpOverlapOffer offer, const ParallelPlan& plan) {
  if (!plan.tp_comm_overlap || plan.tp == 1) return true;  // nothing to overlap
  return offer == TpOverlapOffer::kAny || (offer == TpOverlapOffer::kWithSp && plan.sequence_parallel);
}

bool PpOverlapOffered(PpOverlapOffer offer, const ParallelPlan& plan) {
  if (!plan.pp_comm_overlap) return true;
  return plan.interleaved() && offer == PpOverlapOffer::kInterleaved;
}

bool OffloadOffered(const OffloadOffer& offer, const ParallelPlan& plan) {
  if (!offer.offers(plan.offload_activations, plan.offload_optimizer, plan.offload_params))
    return false;
  return !(plan.offload_activations && offer.act_alone &&
           (plan.pp > 1 || plan.recompute.kind != Recompute::kNone));
}

std::string OfferedRecomputes(const RecomputeOffer& offer) {
  std::string out;
  for (const RecomputePolicy& p : OfferedRecomputePolicies(offer))
    out += (out.empty() ? "" : ", ") +
           std::string(p.kind == Recompute::kEvery ? "every:N" : ToString(p.kind));
  return out;
}

Recompute BlockRecompute(const RecomputePolicy& policy, int64_t ordinal) {
  if (policy.kind != Recompute::kEvery) return policy.kind;
  // A period below 1 never parses (ParseRecompute); it checkpoints nothing.
  return policy.every >= 1 && (ordinal + 1) % policy.every == 0 ? Recompute::kFull
                                                                 : Recompute::kNone;
}

int64_t CheckpointedBlocks(const RecomputePolicy& policy, int64_t blocks) {
  switch (policy.kind) {
    case Recompute::kFull: return blocks;
    case Recompute::kEvery: return policy.every >= 1 ? blocks / policy.every : 0;
    default: return 0;
  }
}

int64_t TpGroupLimit(const ClusterSpec& cluster, bool allow_tp_across_nodes) {
  return allow_tp_across_nodes ? 0 : cluster.gpus_per_node;
}

PlanConstraintMask CheckPlan(const ParallelPlan& plan, const ModelSpec& model,
                             const TrainingSpec& training, int64_t world_size,
                             int64_t tp_group_limit) {
  using C = PlanConstraint;
  if (plan.dp < 1 || plan.tp < 1 || plan.pp < 1 || plan.cp < 1 || plan.ep < 1 ||
      plan.micro_batch < 1 || plan.virtual_stages < 1)
    return MaskOf(C::kFactorsPositive);  // the divisibility checks below need positive factors
  PlanConstraintMask out = 0;
  auto fail_if = [&out](bool broken, C c) {
    if (broken) out |= MaskOf(c);
  };
  fail_if(plan.zero_stage < 0 || plan.zero_stage > 3, C::kZeroStageRange);
  // Every product below is checked (planner/checked_math.h): one that overflows int64 is
  // larger than any world size, layer count, sequence or batch, so its rule is broken.
  const std::optional<int64_t> world = CheckedProduct({plan.dp, plan.tp, plan.pp, plan.cp});
  fail_if(world_size > 0 && world != world_size, C::kWorldSize);
  fail_if(tp_group_limit > 0 && tp_group_limit % plan.tp != 0, C::kTpWithinNode);
  fail_if(model.heads % plan.tp != 0, C::kTpDividesHeads);
  fail_if(model.kv_heads % plan.tp != 0, C::kTpDividesKvHeads);
  fail_if(model.ffn_hidden % plan.tp != 0 ||
              (model.moe.enabled() && model.moe.expert_ffn_hidden % plan.tp != 0),
          C::kTpDividesFfn);
  fail_if(plan.ep > 1 && !model.moe.enabled(), C::kEpNeedsMoe);
  fail_if(plan.dp % plan.ep != 0, C::kEpDividesDp);
  fail_if(model.moe.enabled() && model.moe.experts % plan.ep != 0, C::kEpDividesExperts);
  const std::optional<int64_t> chunks = CheckedMul(plan.pp, plan.virtual_stages);
  const bool uneven = HasUnevenStages(plan);
  fail_if(!uneven && (!chunks || model.layers % *chunks != 0), C::kPpDividesLayers);
  fail_if(uneven && plan.pp == 1, C::kStageLayersNeedPp);
  fail_if(uneven && plan.pp > 1 && !StageSplitIsWhole(model.layers, plan), C::kStageLayersSplit);
  fail_if(uneven && plan.pp > 1 && StageSplitIsWhole(model.layers, plan) &&
              !StageSplitFitsChunks(model.layers, plan),
          C::kStageLayersWithVpp);
  // Causal load balancing gives each cp rank one early and one late chunk: 2*cp chunks.
  const std::optional<int64_t> cp_chunks = plan.cp > 1 ? CheckedMul(2, plan.cp) : std::optional<int64_t>(1);
  fail_if(!cp_chunks || training.seq_len % *cp_chunks != 0, C::kCpDividesSeq);
  fail_if(model.max_seq > 0 && training.seq_len > model.max_seq, C::kSeqWithinMax);
  fail_if(plan.sequence_parallel && plan.tp == 1, C::kSpNeedsTp);
  fail_if(plan.sequence_parallel && (training.seq_len / plan.cp) % plan.tp != 0, C::kTpDividesSeq);
  const std::optional<int64_t> per_step = CheckedMul(plan.dp, plan.micro_batch);
  const bool batch_divides = per_step && training.global_batch % *per_step == 0;
  fail_if(!batch_divides, C::kBatchDivides);
  const bool interleaved = plan.schedule == PipelineSchedule::kInterleaved;
  fail_if(plan.virtual_stages > 1 && !interleaved, C::kVppNeedsInterleaved);
  fail_if(interleaved && (plan.pp < 2 || plan.virtual_stages < 2), C::kInterleavedNeedsPpVpp);
  fail_if(interleaved && plan.pp > 1 && batch_divides &&
              plan.num_microbatches(training.global_batch) % plan.pp != 0,
          C::kInterleavedMicrobatches);
  fail_if(plan.offload_params && plan.zero_stage != 3, C::kOffloadParamsNeedsZero3);
  fail_if(plan.offload_params && !plan.offload_optimizer, C::kOffloadParamsNeedsOptimizer);
  fail_if(plan.zero3_prefetch < 0 || plan.zero3_prefetch > kMaxZero3Prefetch, C::kPrefetchRange);
  return out | FrameworkRefusals(plan, training.framework);
}

bool IsFrameworkRule(const std::string& constraint_id) {
  for (int c = 0; c < kNumPlanConstraints; ++c)
    if (((kFrameworkRules >> c) & 1) && constraint_id == ConstraintId(static_cast<PlanConstraint>(c)))
      return true;
  return false;
}

PlanConstraintMask FrameworkRefusals(const ParallelPlan& plan, const FrameworkSpec& framework) {
  using C = PlanConstraint;
  PlanConstraintMask out = 0;
  auto fail_if = [&out](bool broken, C c) {
    if (broken) out |= MaskOf(c);
  };
  const std::array<ParallelismUse, 3> uses = ParallelismUses(framework.parallelism, plan);
  fail_if(std::any_of(uses.begin(), uses.end(),
                      [](const ParallelismUse& u) { return u.degree > 1 && !u.offered; }),
          C::kParallelismOffered);
  fail_if(plan.zero_stage == 3 && plan.weight_replicas() > 1 &&
              !framework.prefetch.offers(plan.zero3_prefetch),
          C::kPrefetchOffered);
  fail_if(!Offers(framework.recompute, plan.recompute.kind), C::kRecomputeOffered);
  // One replica shards nothing: every stage is the same plan there.
  fail_if(plan.weight_replicas() > 1 &&
              !ZeroOfferFor(framework, plan.pp, plan.tp, plan.cp).offers(plan.zero_stage),
          C::kZeroOffered);
  fail_if(!OffloadOffered(framework.offload, plan), C::kOffloadOffered);
  fail_if(plan.pp > 1 && !framework.schedules.offers(static_cast<int>(plan.schedule)),
          C::kScheduleOffered);
  fail_if(!TpOverlapOffered(framework.tp_overlap, plan), C::kTpOverlapOffered);
  const SpOffer sp = framework.sequence_parallel;
  fail_if(plan.tp > 1 && ((sp == SpOffer::kAlways && !plan.sequence_parallel) ||
                          (sp == SpOffer::kNever && plan.sequence_parallel)),
          C::kSpOffered);
  fail_if(!PpOverlapOffered(framework.pp_overlap, plan), C::kPpOverlapOffered);
  return out;
}

namespace {

// "1, 2, 4, 8": the divisors of n that also divide m (m == 0: all divisors of n), as the
// allowed values of a message; "1" at least. At most 12 listed, then "...".
std::string AllowedDivisors(int64_t n, int64_t m) {
  std::vector<int64_t> small, large;  // divisors up to sqrt(n), and their partners
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  std::string s;
  int listed = 0;
  for (int64_t d : small) {
    if (m != 0 && m % d != 0) continue;
    if (listed++ == 12) return s + ", ...";
    s += (s.empty() ? "" : ", ") + Str(d);
  }
  return s.empty() ? "1" : s;
}

// The message for one broken rule; the rule itself lives in CheckPlan().
std::string ViolationMessage(PlanConstraint c, const ParallelPlan& plan, const ModelSpec& model,
                             const TrainingSpec& training, int64_t world_size,
                             int64_t tp_group_limit) {
  using C = PlanConstraint;
  switch (c) {
    case C::kFactorsPositive: {
      std::string msg;
      const std::pair<const char*, int64_t> factors[] = {
          {"dp", plan.dp}, {"tp", plan.tp}, {"pp", plan.pp}, {"cp", plan.cp}, {"ep", plan.ep},
          {"mbs", plan.micro_batch}, {"vpp", plan.virtual_stages}};
      for (const auto& [name, value] : factors)
        if (value < 1) msg += (msg.empty() ? "" : "; ") + std::string(name) + "=" + Str(value);
      return msg + " must be >= 1";
    }
    case C::kZeroStageRange:
      return "zero=" + Str(plan.zero_stage) + " must be one of 0, 1, 2, 3";
    case C::kWorldSize:
      return "dp*tp*pp*cp = " + Str(plan.dp) + "*" + Str(plan.tp) + "*" + Str(plan.pp) + "*" +
             Str(plan.cp) + " = " + Str(CheckedProduct({plan.dp, plan.tp, plan.pp, plan.cp})) +
             ", but the cluster has " +
             Str(world_size) + " GPUs";
    case C::kTpWithinNode:
      return "tp=" + Str(plan.tp) + " does not divide the " + Str(tp_group_limit) +
             " GPUs of a node, so a tp group would cross nodes (allow with "
             "--allow-tp-across-nodes)";
    case C::kTpDividesHeads:
      return "tp=" + Str(plan.tp) + " does not divide heads=" + Str(model.heads);
    case C::kTpDividesKvHeads:
      return "tp=" + Str(plan.tp) + " does not divide kv_heads=" + Str(model.kv_heads);
    case C::kTpDividesFfn:
      if (model.ffn_hidden % plan.tp == 0 && model.moe.enabled())
        return "tp=" + Str(plan.tp) + " does not divide moe.expert_ffn_hidden=" +
               Str(model.moe.expert_ffn_hidden);
      return "tp=" + Str(plan.tp) + " does not divide ffn_hidden=" + Str(model.ffn_hidden);
    case C::kEpNeedsMoe:
      return "ep=" + Str(plan.ep) + " needs a mixture-of-experts model, but model '" +
             model.name + "' is dense (moe.experts=0); allowed: ep=1";
    case C::kEpDividesDp:
      return "ep=" + Str(plan.ep) + " does not divide dp=" + Str(plan.dp) +
             " (the expert-parallel group is carved out of dp); allowed: " +
             AllowedDivisors(plan.dp, 0);
    case C::kEpDividesExperts:
      return "ep=" + Str(plan.ep) + " does not divide moe.experts=" + Str(model.moe.experts) +
             " (each rank holds experts/ep routed experts); allowed with dp=" + Str(plan.dp) +
             ": " + AllowedDivisors(plan.dp, model.moe.experts);
    case C::kPpDividesLayers:
      return "pp*vpp=" + Str(plan.pp) + "*" + Str(plan.virtual_stages) +
             " does not divide layers=" + Str(model.layers) +
             (plan.pp > 1 && plan.virtual_stages == 1
                  ? std::string(" (or give the first / last stage its own count: ") +
                        FieldSpec(PlanField::kFirstStageLayers).key + ", " +
                        FieldSpec(PlanField::kLastStageLayers).key + ")"
                  : "");
    case C::kStageLayersNeedPp:
    case C::kStageLayersSplit:
    case C::kStageLayersWithVpp:
      return StageSplitViolation(c, plan, model.layers);
    case C::kCpDividesSeq:
      return "seq=" + Str(training.seq_len) + " is not divisible by 2*cp=" + Str(CheckedMul(2, plan.cp)) +
             " (load-balanced context parallel)";
    case C::kSeqWithinMax:
      return "seq=" + Str(training.seq_len) + " exceeds the model's max_seq=" + Str(model.max_seq);
    case C::kSpNeedsTp:
      return "sp=1 needs tp > 1 (sequence parallel shards over the tp group)";
    case C::kTpDividesSeq:
      return "sp=1 shards seq/cp=" + Str(training.seq_len / plan.cp) + " over tp=" +
             Str(plan.tp) + ", which does not divide it";
    case C::kBatchDivides:
      return "global_batch=" + Str(training.global_batch) + " is not divisible by dp*mbs=" +
             Str(plan.dp) + "*" + Str(plan.micro_batch);
    case C::kVppNeedsInterleaved:
      return "vpp=" + Str(plan.virtual_stages) + " needs schedule=interleaved (schedule is " +
             ToString(plan.schedule) + ")";
    case C::kInterleavedNeedsPpVpp:
      return "schedule=interleaved needs pp >= 2 and vpp >= 2 (pp=" + Str(plan.pp) +
             ", vpp=" + Str(plan.virtual_stages) + ")";
    case C::kInterleavedMicrobatches:
      return "schedule=interleaved needs micro-batches=" +
             Str(plan.num_microbatches(training.global_batch)) + " divisible by pp=" +
             Str(plan.pp);
    case C::kOffloadParamsNeedsZero3:
      return "offload_params=1 needs zero=3 (only ZeRO-3 keeps a parameter shard to offload; "
             "zero is " + Str(plan.zero_stage) + ")";
    case C::kOffloadParamsNeedsOptimizer:
      return "offload_params=1 needs offload_opt=1 (ZeRO-Infinity updates the host shard on the "
             "CPU)";
    case C::kPrefetchRange:
      return "prefetch=" + Str(plan.zero3_prefetch) + " must be an integer from 0 to " +
             Str(kMaxZero3Prefetch);
    case C::kRecomputeOffered:
      return std::string("recompute=") + ToString(plan.recompute) + " is not offered by " +
             training.framework.name + "; allowed: " + OfferedRecomputes(training.framework.recompute);
    case C::kZeroOffered: {
      const ZeroOffer& offer = ZeroOfferFor(training.framework, plan.pp, plan.tp, plan.cp);
      const std::string where = &offer == &training.framework.zero ? ""
                                : plan.pp > 1                      ? " with pp > 1"
                                                                   : " with tp or cp > 1";
      return "zero=" + Str(plan.zero_stage) + " is not offered by " +
             FrameworkLabel(training.framework) + where + "; allowed: " +
             OfferedZeroStagesText(offer);
    }
    case C::kOffloadOffered: {
      const OffloadOffer& offer = training.framework.offload;
      const std::string label = FrameworkLabel(training.framework);
      if (offer.offers(plan.offload_activations, plan.offload_optimizer, plan.offload_params))
        return "offload_act=1 is not offered by " + label +
               " with pipeline parallelism or recompute; allowed there: nothing offloaded "
               "(it needs pp=1 and recompute=none)";
      std::string combo;
      for (const auto& [on, key] : {std::pair{plan.offload_activations, "offload_act=1"},
                                    {plan.offload_optimizer, "offload_opt=1"},
                                    {plan.offload_params, "offload_params=1"}})
        if (on) combo += (combo.empty() ? "" : ",") + std::string(key);
      const std::string offered = OffloadCombosText(offer);
      return combo + " is not offered by " + label + "; allowed: " +
             (offered.empty() ? "nothing offloaded" : offered + " (or nothing offloaded)");
    }
    case C::kTpOverlapOffered:
      return "tp_overlap=1 is not offered by " + FrameworkLabel(training.framework) +
             (training.framework.tp_overlap == TpOverlapOffer::kWithSp
                  ? " without sequence parallelism; allowed: tp_overlap=1 with sp=1, or tp_overlap=0"
                  : "; allowed: tp_overlap=0");
    case C::kPpOverlapOffered:
      if (training.framework.pp_overlap == PpOverlapOffer::kNone)
        return "pp_overlap=1 is not offered by " + FrameworkLabel(training.framework) +
               ": its pipeline sends run between the chunks; allowed: pp_overlap=0";
      return "pp_overlap=1 needs schedule=interleaved with pp > 1 (got schedule=" +
             std::string(ToString(plan.schedule)) + ", pp=" + Str(plan.pp) +
             "): only interleaved chunks have a next chunk to hide the sends behind; allowed: "
             "pp_overlap=0, or schedule=interleaved";
    case C::kSpOffered: {
      const bool always = training.framework.sequence_parallel == SpOffer::kAlways;
      return "sp=" + Str(plan.sequence_parallel ? 1 : 0) + " with tp=" + Str(plan.tp) +
             " is not offered by " + FrameworkLabel(training.framework) +
             (always ? ": its tensor parallelism always shards the norms over the sequence; allowed: sp=1"
                     : ": its tensor parallelism never shards the norms over the sequence; allowed: sp=0");
    }
    case C::kParallelismOffered: {
      std::string used, names, allowed;
      for (const ParallelismUse& u : ParallelismUses(training.framework.parallelism, plan)) {
        if (u.degree <= 1 || u.offered) continue;
        const bool first = used.empty();
        used += (first ? "" : ",") + std::string(u.key) + "=" + Str(u.degree);
        names += (first ? "" : " or ") + std::string(u.name);
        allowed += (first ? "" : ", ") + std::string(u.key) + "=1";
      }
      return used + ": " + FrameworkLabel(training.framework) + " runs no " + names +
             " parallelism; allowed: " + allowed;
    }
    case C::kPrefetchOffered:
      return "prefetch=" + Str(plan.zero3_prefetch) + " with zero=3 is not offered by " +
             FrameworkLabel(training.framework) + "; allowed: prefetch=" +
             OfferedPrefetchText(training.framework.prefetch);
    case C::kScheduleOffered: {
      const std::string offered = OfferedSchedulesText(training.framework.schedules);
      if (offered.empty())
        return "pp=" + Str(plan.pp) + ": " + FrameworkLabel(training.framework) +
               " runs no pipeline parallelism; allowed: pp=1";
      return "schedule=" + std::string(ToString(plan.schedule)) + " is not offered by " +
             FrameworkLabel(training.framework) + "; allowed: " + offered;
    }
    case C::kCount:
      break;
  }
  return "?";
}

}  // namespace

std::vector<PlanViolation> Validate(const ParallelPlan& plan, const ModelSpec& model,
                                    const TrainingSpec& training, int64_t world_size,
                                    int64_t tp_group_limit) {
  const PlanConstraintMask mask = CheckPlan(plan, model, training, world_size, tp_group_limit);
  std::vector<PlanViolation> out;
  for (int i = 0; i < kNumPlanConstraints; ++i) {
    const auto c = static_cast<PlanConstraint>(i);
    if (mask & MaskOf(c))
      out.push_back({ConstraintId(c),
                     ViolationMessage(c, plan, model, training, world_size, tp_group_limit)});
  }
  return out;
}

ParallelPlan ParsePlanString(const std::string& text, const std::string& source) {
  ParallelPlan plan;
  for (const PlanFieldValue& item : ParsePlanFields(text, source)) item.field->set(plan, item.value);
  return plan;
}

std::string ToPlanString(const ParallelPlan& p) {
  std::string s;
  for (const PlanFieldSpec& f : PlanFields())
    if (f.always_printed || !f.is_default(p))
      s += (s.empty() ? "" : ",") + std::string(f.key) + "=" + FormatFieldValue(f, f.get(p));
  return s;
}

std::string ToShortPlanString(const ParallelPlan& p) {
  std::string s;
  for (const PlanFieldSpec& f : PlanFields())
    if (!f.is_default(p))
      s += (s.empty() ? "" : ",") + std::string(f.key) + "=" + FormatFieldValue(f, f.get(p));
  return s.empty() ? "dp=1" : s;
}

}  // namespace meshplan
