// StepWork: the work of one training step on one rank, as plain data.
//
// The one description both the analytic cost model (planner/cost/cost_model.h) and the
// event simulator read, so they cannot drift apart (docs/architecture.md "Seams"). It holds
// work, not time: time = f(work, GpuSpec) (TimeOf below) and f(collective,
// ClusterSpec) (planner/cost/collective_time.h).
//
// Compact: all blocks are equal, so one PartWork describes a block and a stage holds
// stage_layers.Of(stage) of them (planner/stage_layers.h); stage 0 adds the embedding part, the last
// stage the head part (final norm, lm_head, loss); with pp == 1 one stage has both.
// A mixture-of-experts model's block is its MoE block; its first Ld dense layers are timed
// as MoE blocks too (an approximation: docs/cost_model.md section 1(a)), while parameters and
// memory count them exactly. Every number is for ONE rank and ONE micro-batch unless its
// Cadence says per step. Shapes: the legend of docs/architecture.md (T, Tn, a).
//
// What the work assumes (attention kernels, GEMM shapes, the op list's lowering, gradient
// sync dtype, expert parallel, when DP / ZeRO sync): docs/cost_model.md section 5, "What the
// step's work assumes".
//
// BuildStepWork allocates nothing (fixed-capacity lists): the search calls it per candidate.
#pragma once

#include <array>
#include <cassert>
#include <cstdint>

#include "planner/cost/collective_position.h"
#include "planner/cost/collective_time.h"
#include "planner/attention_impl.h"
#include "planner/cost/compute_work.h"
#include "planner/cost/expert_parallel.h"
#include "planner/cost/offload.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"
#include "planner/stage_layers.h"
#include "planner/training_spec.h"

namespace meshplan {

struct GpuSpec;
struct PlanShape;

enum class StepPhase : uint8_t { kForward, kBackward, kRecompute, kOptimizer };
const char* ToString(StepPhase phase);  // forward | backward | recompute | optimizer


enum class Cadence : uint8_t {
  kPerMicrobatch,  // once per micro-batch (per part instance)
  kPerStep,        // once per optimizer step (per part instance)
};

struct Collective {
  MeshDim dim = MeshDim::kDp;  // which mesh dimension's communicator (dp x cp counts as dp)
  CollectiveKind kind = CollectiveKind::kAllReduce;
  StepPhase phase = StepPhase::kForward;
  CollectivePosition position = CollectivePosition::kAfterPart;
  Cadence cadence = Cadence::kPerMicrobatch;
  double bytes = 0;     // buffer bytes (planner/cost/collective_time.h convention)
  CommGroup group;
  int32_t count = 1;    // identical collectives at this position
  bool overlappable = false;  // may run behind compute (else the compute stream waits)
  // TP, backward: issued behind its column-parallel linear's backward GEMMs by the framework
  // (OpCollective::backward_behind_gemms), so overlappable without the plan's tp_overlap and
  // hidden only behind those GEMMs (docs/cost_model.md 7(b)).
  bool behind_gemms = false;
};

// The busiest part is a MoE block with SP, full recompute, CP, ZeRO-3 and ep > 1 with
// tp > 1: 12 TP + 3 CP + 3 DP + 3 expert DP + 6 all-to-all + 6 tp regathers = 33.
inline constexpr int kMaxCollectivesPerPart = 36;

// One part of the model (a block, the embedding, or the head) on one rank.
struct PartWork {
  ComputeWork forward;
  ComputeWork backward_input;   // gradients of the inputs (zero-bubble "B")
  ComputeWork backward_weight;  // gradients of the weights (zero-bubble "W")
  // The forward work replayed in backward, indexed by a block's Recompute (none is empty;
  // every:N replays full's on its checkpointed blocks: RecomputeWork).
  std::array<ComputeWork, kNumBlockRecomputes> recompute;
  // The attention core's call alone (blocks only; forward: with the copies Transformer
  // Engine makes inside it, BlockOp::in_attention_call), already counted in forward /
  // backward_input. Selective recompute replays the forward one.
  ComputeWork attention_forward, attention_backward;
  int64_t params = 0;  // this rank's parameters of the part (tp shard, before ZeRO)
  int64_t expert_params = 0;  // of params: the X/ep routed experts' (ep > 1 only; their
                              // gradients sync over the expert-data-parallel group)
  // Of the plan's recompute policy; every:N: full's, whose kRecompute ones run on the
  // checkpointed blocks only (RecomputedShare).
  FixedList<Collective, kMaxCollectivesPerPart> collectives;
};

struct StepWork {
  // The step's shape.
  int64_t pp = 1;
  int64_t virtual_stages = 1;
  int64_t micro_batches = 1;     // per dp rank per step
  StageLayers stage_layers;      // blocks per pipeline rank (all its virtual chunks)
  int64_t tokens_per_microbatch = 0;  // T = B*S/cp on this rank
  RecomputePolicy recompute;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int zero_stage = 0;
  int64_t param_bytes = 2;        // element size of parameters as communicated
  int64_t grad_bytes = 2;         // element size of gradients as communicated
  int64_t activation_bytes = 2;   // a

  PartWork block;      // one transformer block
  PartWork embedding;  // stage 0 only
  PartWork head;       // last stage only: final norm, lm_head, loss

  // Pipeline: a stage's output activation sent forward, its input gradient sent back,
  // per micro-batch and model chunk (pp == 1: bytes 0).
  Collective pp_activation;
  Collective pp_gradient;
  // Without SP and with tp > 1: the tp all-gather that rebuilds each received slice
  // (bytes 0 otherwise); one per send. Timed with the send (analytic and simulator), its
  // intra-node bytes are not in CommBytesPerStep.
  Collective pp_regather;

  // AdamW: bytes read + written per parameter this rank updates, and the ZeRO shard count
  // that divides the parameters: the plan's weight_replicas() with zero >= 1, else 1
  // (expert_weight_replicas() for PartWork::expert_params).
  double optimizer_bytes_per_param = 0;
  int64_t zero_shards = 1;
  int64_t expert_zero_shards = 1;
  // A MoE block's expert-parallel work per micro-batch (rows, all-to-all bytes); zeros for
  // a dense model.
  ExpertParallelWork experts;
  // fp8: bytes of casting one block's (full, unsharded) weights to their FP8 copies, once
  // per step after the update (planner/cost/fp8_convention.h); timed with the optimizer.
  double fp8_weight_cast_bytes_per_block = 0;
  // The framework's fitted factors on the hardware's rates (TrainingSpec::framework), which
  // the analytic step time and the simulator time this work with (RatesFor).
  FrameworkCalibration calibration;

  // Overlap and offload choices (planner/parallel_plan.h; TP overlap is each TP
  // Collective's `overlappable`, pp_overlap pp_activation's and pp_gradient's): DP gradient
  // sync behind the backward or after it, ZeRO-3 gathers issued ahead (0: none), and what is
  // offloaded (planner/cost/offload.h).
  bool dp_overlap = true;
  bool tp_comm_overlap = false;  // the plan's tp_overlap: every TP collective behind its pass
  int64_t zero3_prefetch = 1;
  // ZeRO-1/2 under a framework that gathers the updated parameters in the next step's first
  // forward (FrameworkSpec::param_gather next-forward): with dp_overlap, the all-gathers
  // (CollectivePosition::kAfterOptimizer) run as a chain beside the first micro-batch's
  // forward instead of after the optimizer step.
  bool param_gather_in_forward = false;
  OffloadWork offload;
};

// Sets the plan's overlap and offload choices on work built for the same plan with other
// choices (the search's variants of one candidate: planner/search/knob_variants.h): TP
// collectives' `overlappable` (tp_overlap, or Collective::behind_gemms) and the pipeline
// sends', tp_comm_overlap, dp_overlap, zero3_prefetch and the
// offload flags. The offloaded activation bytes must already be there (built with
// offload_act, or set by `activation_bytes_per_block`).
void SetPlanKnobs(const ParallelPlan& plan, StepWork* work);
// offload_act: one block's saved tensors of one micro-batch of a plan of `shape`
// (planner/cost/plan_shape.h; the memory model's list, planner/cost/activation_memory.h),
// what OffloadWork::activation_bytes_per_block holds.
double OffloadedBytesPerBlock(const PlanShape& shape, const ParallelPlan& plan);

// `attention` as the memory model's MemoryOptions (auto: planner/attention_impl.h).
StepWork BuildStepWork(const ModelSpec& model, const TrainingSpec& training,
                       const ParallelPlan& plan, AttentionImpl attention = AttentionImpl::kAuto);
// The same into *out, which must be freshly default-constructed, for callers that keep one
// StepWork (no copy of it; the search builds one per candidate).
void BuildStepWork(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan,
                   AttentionImpl attention, StepWork* out);
// The same from the plan's shape (planner/cost/plan_shape.h; its attention is the one asked
// for), which the search derives once for the plans that share it.
void BuildStepWork(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan,
                   const PlanShape& shape, StepWork* out);

// Every collective of *work made blocking: no TP, CP or PP overlap, DP gradient syncs after the
// backward, ZeRO-3 gathers not prefetched. What a GPU whose communication shares the compute
// cores (GpuSpec::comm_overlaps_compute false: CPU ranks) runs, whatever the plan's knobs;
// the analytic model and the simulator both time such work.
void SerializeCommunication(StepWork* work);
// The work as `gpu` runs it: `work` itself, or (comm_overlaps_compute false) a copy in
// *storage with SerializeCommunication applied. The one rule for the analytic model and the
// simulator.
const StepWork& WorkAsRun(const StepWork& work, const GpuSpec& gpu, StepWork* storage);

// What one block of `part` replays in its backward when it replays: the policy's work
// (every:N: full's).
const ComputeWork& RecomputeWork(const PartWork& part, const RecomputePolicy& policy);
// Its index in PartWork::recompute.
size_t RecomputeSlot(const RecomputePolicy& policy);
// The share of `stage`'s blocks that replay it: every:N CheckpointedBlocks / blocks (0 on a
// stage without blocks), 1 under the other policies (every block replays its part).
double RecomputedShare(const StepWork& work, int64_t stage);

// Which parts pipeline stage `stage` holds.
struct StageParts {
  bool embedding = false;
  bool head = false;
  int64_t blocks = 0;
};
StageParts PartsOfStage(const StepWork& work, int64_t stage);

// Per micro-batch: model chunks whose output this stage sends forward and whose
// input gradient it sends back (interleaved: one per virtual chunk, less at the ends).
int64_t PpActivationSends(const StepWork& work, int64_t stage);
int64_t PpGradientSends(const StepWork& work, int64_t stage);

// Bytes this rank of `stage` sends per step on each mesh dimension (ring factors of
// planner/cost/collective_time.h applied; the dp x cp gradient group counts as dp).
PerMeshDim CommBytesPerStep(const StepWork& work, int64_t stage);

// The optimizer step of one stage: memory-bound over this rank's share of the parameters.
ComputeWork OptimizerWork(const StepWork& work, const StageParts& parts);

}  // namespace meshplan
