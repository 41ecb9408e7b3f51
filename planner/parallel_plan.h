// ParallelPlan: how one training step is split over the GPUs, and its validation.
//
// Rank layout (planner/mesh_layout.h, docs/cost_model.md section 3): tp innermost, then cp,
// then pp, dp outermost: rank = ((dp_i * pp + pp_i) * cp + cp_i) * tp + tp_i.
// Expert parallelism (ep, mixture-of-experts models only) is carved out of dp as in
// Megatron-Core: dp_i = edp_i * ep + ep_i, so the ep ranks of one expert-parallel group are
// consecutive dp coordinates; it adds no GPUs (world = dp*tp*pp*cp).
// CheckPlan() checks every divisibility rule once (a bit mask, no allocation) and
// Validate() names each factor that is off from the same checks; the search, the
// CLI and the executor all call them rather than re-checking.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/checked_math.h"
#include "planner/cluster_spec.h"
#include "planner/model_spec.h"
#include "planner/training_spec.h"

namespace meshplan {

// The deepest ZeRO-3 prefetch a plan may ask for (the `prefetch` key).
inline constexpr int64_t kMaxZero3Prefetch = 4;

// Activation recomputation (docs/memory_model.md, "Recompute policies"). What one block
// keeps: none (everything), selective (all but Megatron's attention core), full (its input:
// the whole forward replays), op (torchtitan's op-level selective checkpointing: its input
// and the outputs of its save list). kEvery is a plan's policy only, never a block's:
// every N-th block of a rank runs full, the others none (torchtitan's layer-level
// selective checkpointing); BlockRecompute says which block runs what.
enum class Recompute : uint8_t { kNone, kSelective, kFull, kOp, kEvery };
// The policies one block can run (kNone .. kOp): arrays indexed by a block's Recompute.
inline constexpr int kNumBlockRecomputes = 4;

// A plan's recompute policy, as plan strings spell it: none | selective | full | op |
// every:N. Converts from a Recompute that needs no period (every kind but kEvery).
struct RecomputePolicy {
  Recompute kind = Recompute::kNone;
  int64_t every = 0;  // kEvery: N >= 2 (every:1 would be full); 0 otherwise

  RecomputePolicy() = default;
  RecomputePolicy(Recompute k) : kind(k) {}  // NOLINT(google-explicit-constructor)
  static RecomputePolicy Every(int64_t n) {
    RecomputePolicy p(Recompute::kEvery);
    p.every = n;
    return p;
  }
  bool operator==(const RecomputePolicy&) const = default;
};
// What the `ordinal`-th block of a rank (0-based, over its model chunks in order) runs.
// every:N checkpoints the blocks with (ordinal + 1) % N == 0, as torchtitan's
// _apply_layer_sac counts them (the 2nd, 4th, ... block of the rank for N = 2).
Recompute BlockRecompute(const RecomputePolicy& policy, int64_t ordinal);
// Of a rank's first `blocks` blocks, how many replay their forward in backward: every:N
// blocks / N, full all, the others none (they replay parts of every block).
int64_t CheckpointedBlocks(const RecomputePolicy& policy, int64_t blocks);

// gpipe: all forwards then all backwards; 1f1b: one-forward-one-backward;
// interleaved: 1F1B with virtual_stages model chunks per rank; zb_h1: zero-bubble H1.
enum class PipelineSchedule { kGpipe, k1F1B, kInterleaved, kZeroBubbleH1 };

struct ParallelPlan {
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t cp = 1;
  // Expert parallel: the routed experts of each MoE layer are split X/ep per rank over ep
  // ranks of the dp dimension; expert gradients are reduced (and ZeRO shards expert states)
  // over the dp/ep expert-data-parallel ranks (x cp). Expert tensor parallelism is tp
  // (experts stay tp-sharded like the dense FFN). 1 = off; > 1 only for MoE models.
  int64_t ep = 1;
  int zero_stage = 0;             // 0 = plain DP, 1/2/3 = ZeRO stage (3 = FSDP full shard)
  bool sequence_parallel = false; // Megatron SP (only meaningful with tp > 1)
  int64_t micro_batch = 1;        // sequences per micro-batch per dp rank
  RecomputePolicy recompute;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;     // model chunks per pipeline rank (interleaved only)
  bool tp_comm_overlap = false;   // let TP collectives overlap compute (off: exposed)
  // Interleaved pipelines: each chunk's sends and receives run behind the next chunk's
  // compute (Megatron-Core's overlap_p2p_comm; off: on the critical path of every chunk).
  bool pp_comm_overlap = false;
  // Uneven pipeline stages (planner/stage_layers.h): the layers of the first / last stage;
  // 0 = the same share as the other stages (the even split, the default).
  int64_t first_stage_layers = 0;
  int64_t last_stage_layers = 0;

  // ---- Offload and overlap choices (issue 17; docs/cost_model.md section 7) ----
  // Kept in one block so that other plan fields merge beside it. Each is a plan-string key
  // (in brackets), a plan-file field and an --only pin; the search chooses them per candidate
  // (planner/search/knob_variants.h). What they move and cost: planner/cost/offload.h.
  bool offload_optimizer = false;    // [offload_opt] ZeRO-Offload: fp32 master weights and Adam
                                     // m, v on the host, the AdamW step on the CPU
  bool offload_activations = false;  // [offload_act] saved activations to host memory during
                                     // the forward, prefetched back before their backward
  bool offload_params = false;       // [offload_params] ZeRO-Infinity: the ZeRO-3 parameter shard
                                     // on the host, copied in before each all-gather
                                     // (needs zero=3 and offload_opt)
  bool dp_comm_overlap = true;       // [dp_overlap] DP gradient sync behind the backward, which
                                     // it slows (off: after it, exposed)
  int64_t zero3_prefetch = 1;        // [prefetch] ZeRO-3 all-gathers issued ahead of the compute
                                     // (0: each part gathers when it starts; 0..kMaxZero3Prefetch)
  bool offloads() const { return offload_optimizer || offload_activations || offload_params; }

  // dp*tp*pp*cp; INT64_MAX when the product overflows (never a real world size).
  int64_t world_size() const { return CheckedProduct({dp, tp, pp, cp}).value_or(INT64_MAX); }
  // Micro-batches per step per dp rank: global_batch / (dp * micro_batch); 0 when dp * mbs
  // is not positive or overflows (CheckPlan() refuses such plans).
  int64_t num_microbatches(int64_t global_batch) const {
    const std::optional<int64_t> per_step = CheckedMul(dp, micro_batch);
    return per_step && *per_step > 0 ? global_batch / *per_step : 0;
  }
  // The expert-data-parallel degree dp/ep: replicas of each expert along dp (1 when ep
  // does not divide dp or is below 1; CheckPlan() refuses such plans).
  int64_t expert_dp() const { return ep >= 1 && dp % ep == 0 ? dp / ep : 1; }
  // Whether the pipeline runs interleaved chunks (schedule=interleaved over pp > 1 stages).
  bool interleaved() const { return pp > 1 && schedule == PipelineSchedule::kInterleaved; }
  // The weight replicas: the dp x cp ranks that hold the same (dense) weights. Gradients
  // sync over them and ZeRO shards over them (docs/architecture.md, "Names"). The one name
  // for this product in planner, simulator and executor.
  int64_t weight_replicas() const { return CheckedMul(dp, cp).value_or(INT64_MAX); }
  // The same for a routed expert's weights: the expert-data-parallel dp/ep x cp ranks.
  int64_t expert_weight_replicas() const { return CheckedMul(expert_dp(), cp).value_or(INT64_MAX); }
  bool operator==(const ParallelPlan&) const = default;
};

// Whether the framework offers `recompute` (configs/frameworks/*.yaml, `recompute:`), and
// the policies it offers as a list ("none, selective, full").
bool Offers(const RecomputeOffer& offer, Recompute recompute);
std::string OfferedRecomputes(const RecomputeOffer& offer);
// The policies a framework offers, in the search's grid order (every:N tried as every:2).
std::vector<RecomputePolicy> OfferedRecomputePolicies(const RecomputeOffer& offer);
// The ZeRO stages a framework offers (configs/frameworks/*.yaml, `zero:`), ascending, and as
// a list ("0, 1").
std::vector<int> OfferedZeroStages(const ZeroOffer& offer);
std::string OfferedZeroStagesText(const ZeroOffer& offer);
// The offload combinations of `offer` but none, as a profile's `offload:` spells them
// ("act, opt+params"; "" when it offers none).
std::string OffloadCombosText(const OffloadOffer& offer);
// The parallelisms of `offer`, as a profile's `parallelism:` spells them ("tp, cp"; "" for
// none).
std::string OfferedParallelismText(const ParallelismOffer& offer);
// The depths of `offer`, as a profile's `prefetch:` spells them ("0, 1").
std::string OfferedPrefetchText(const PrefetchOffer& offer);
// The schedules of `offer`, as a profile's `schedules:` spells them ("1f1b, interleaved"; ""
// when it runs no pipeline).
std::string OfferedSchedulesText(const ScheduleOffer& offer);
// Whether the framework runs the plan's tp_overlap (always, with tp == 1 or overlap off).
bool TpOverlapOffered(TpOverlapOffer offer, const ParallelPlan& plan);
// Whether the plan's pp_overlap runs: off, or an interleaved schedule under a framework that
// overlaps its pipeline sends.
bool PpOverlapOffered(PpOverlapOffer offer, const ParallelPlan& plan);
// Whether `offer` runs the plan's offload choices: its combination, and activation offload's
// conditions (OffloadOffer::act_alone).
bool OffloadOffered(const OffloadOffer& offer, const ParallelPlan& plan);

// The rules a plan can break, in the order they are checked (outer mesh factors
// first, then sequence, batch and schedule). The search counts rejections by them.
enum class PlanConstraint : uint8_t {
  kFactorsPositive,         // dp, tp, pp, cp, ep, mbs, vpp >= 1
  kZeroStageRange,          // zero in 0..3
  kWorldSize,               // dp*tp*pp*cp == GPUs
  kTpWithinNode,            // tp divides TpGroupLimit() (checked only when it is > 0)
  kTpDividesHeads,          // H % tp
  kTpDividesKvHeads,        // K % tp
  kTpDividesFfn,            // F % tp
  kEpNeedsMoe,              // ep > 1 only for a mixture-of-experts model
  kEpDividesDp,             // dp % ep (the ep group is carved out of dp)
  kEpDividesExperts,        // X % ep (each rank holds X/ep routed experts)
  kPpDividesLayers,         // L % (pp*vpp) (even stages only)
  kStageLayersNeedPp,       // first/last_stage_layers set with pp == 1
  kStageLayersSplit,        // uneven stages: the rest splits equally, >= 1 each, over the others
  kStageLayersWithVpp,      // uneven stages that do not split into the vpp chunks
  kCpDividesSeq,            // S % (2*cp) (load-balanced causal context parallel)
  kSeqWithinMax,            // S <= max_seq
  kSpNeedsTp,               // sp only with tp > 1
  kTpDividesSeq,            // sp: (S/cp) % tp
  kBatchDivides,            // global_batch % (dp*mbs)
  kVppNeedsInterleaved,     // vpp > 1 only with schedule=interleaved
  kInterleavedNeedsPpVpp,   // interleaved needs pp >= 2 and vpp >= 2
  kInterleavedMicrobatches, // interleaved: micro-batches % pp
  kOffloadParamsNeedsZero3, // offload_params only with zero=3
  kOffloadParamsNeedsOptimizer,  // offload_params only with offload_opt
  kPrefetchRange,           // prefetch in 0..kMaxZero3Prefetch
  kParallelismOffered,      // the framework runs the plan's tp, cp and ep > 1 (FrameworkSpec::parallelism)
  kPrefetchOffered,         // zero=3 over dp x cp > 1: the framework runs the prefetch depth (FrameworkSpec::prefetch)
  kRecomputeOffered,        // the framework offers the recompute policy (FrameworkSpec::recompute)
  kZeroOffered,             // over dp x cp > 1, the framework offers the ZeRO stage (ZeroOfferFor)
  kOffloadOffered,          // the framework runs the plan's offload combination (FrameworkSpec::offload)
  kScheduleOffered,         // with pp > 1, the framework runs the schedule (FrameworkSpec::schedules)
  kTpOverlapOffered,        // with tp > 1, the framework runs tp_overlap as asked (FrameworkSpec::tp_overlap)
  kSpOffered,               // with tp > 1, the plan's sp as the framework runs it (FrameworkSpec::sequence_parallel)
  kPpOverlapOffered,        // pp_overlap=1 only on an interleaved schedule of a framework that overlaps (FrameworkSpec::pp_overlap)
  kCount
};
inline constexpr int kNumPlanConstraints = static_cast<int>(PlanConstraint::kCount);
// A set of PlanConstraint, bit i = constraint i broken; 0 means valid.
using PlanConstraintMask = uint64_t;
constexpr PlanConstraintMask MaskOf(PlanConstraint c) {
  return PlanConstraintMask{1} << static_cast<int>(c);
}
// The stable id of a constraint ("tp_divides_heads"): what PlanViolation::constraint holds.
const char* ConstraintId(PlanConstraint constraint);

// Why a plan is invalid. `constraint` is a stable id that the search counts by
// (e.g. "tp_divides_heads"); `message` names the factors and their values.
struct PlanViolation {
  std::string constraint;
  std::string message;
};

// Every rule of docs/cost_model.md section 3 that the plan breaks for this model, batch and
// world size (world_size <= 0 skips the product check), as a bit mask. Allocates
// nothing: this is what the search calls on every candidate. tp_group_limit > 0
// (TpGroupLimit() below) adds the placement rule: tp divides it.
// With a factor below 1 only kFactorsPositive is reported (the rest need division).
PlanConstraintMask CheckPlan(const ParallelPlan& plan, const ModelSpec& model,
                             const TrainingSpec& training, int64_t world_size,
                             int64_t tp_group_limit = 0);

// CheckPlan()'s rules of what the framework runs (parallelism_offered .. pp_overlap_offered,
// kFrameworkRules) that `plan` breaks under `framework`.
PlanConstraintMask FrameworkRefusals(const ParallelPlan& plan, const FrameworkSpec& framework);
inline constexpr PlanConstraintMask kFrameworkRules =
    MaskOf(PlanConstraint::kParallelismOffered) | MaskOf(PlanConstraint::kPrefetchOffered) |
    MaskOf(PlanConstraint::kRecomputeOffered) |
    MaskOf(PlanConstraint::kZeroOffered) |
    MaskOf(PlanConstraint::kOffloadOffered) | MaskOf(PlanConstraint::kScheduleOffered) |
    MaskOf(PlanConstraint::kTpOverlapOffered) | MaskOf(PlanConstraint::kSpOffered) |
    MaskOf(PlanConstraint::kPpOverlapOffered);
// Whether a violation's constraint id (PlanViolation::constraint) is one of kFrameworkRules.
bool IsFrameworkRule(const std::string& constraint_id);

// The same rules with messages naming the factors and their values: one violation
// per bit of CheckPlan(), in PlanConstraint order. Empty means valid.
std::vector<PlanViolation> Validate(const ParallelPlan& plan, const ModelSpec& model,
                                    const TrainingSpec& training, int64_t world_size,
                                    int64_t tp_group_limit = 0);

// The placement rule, in one place: a tp group stays inside one node, so tp must divide
// the node's GPUs. Returns what CheckPlan() and Validate() take as `tp_group_limit`:
// cluster.gpus_per_node, or 0 (no limit) when tp groups may cross nodes.
int64_t TpGroupLimit(const ClusterSpec& cluster, bool allow_tp_across_nodes);

// Plan strings: "dp=2,tp=4,pp=1,cp=1,zero=1,sp=1,mbs=1,recompute=none,schedule=1f1b,vpp=1",
// one key=value per field of planner/plan_fields.h, in its order. ToPlanString prints the
// fields the table marks always_printed and the others when not at their default;
// ParsePlanString reads any subset (omitted keys keep their defaults) and throws InputError
// at `source` naming the key and the allowed values: an unknown key, a key given twice, a
// value that does not parse or lies above the table's parse bound (docs/limits.md). Values
// below 1 parse, and CheckPlan() reports them (factors_positive, stage_layers_split).
ParallelPlan ParsePlanString(const std::string& text, const std::string& source = "--plan");
std::string ToPlanString(const ParallelPlan& plan);
// Only the keys that differ from a default ParallelPlan, in ToPlanString order
// ("dp=8,zero=1,mbs=2"); ParsePlanString reads it back to the same plan.
std::string ToShortPlanString(const ParallelPlan& plan);

}  // namespace meshplan
