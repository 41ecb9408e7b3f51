#include "planner/cost/step_work.h"

#include <string>

#include "planner/cost/activation_memory.h"
#include "planner/cost/block_work.h"
#include "planner/cost/fp8_convention.h"
#include "planner/cost/gradient_buffers.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/offload.h"
#include "planner/cost/param_count.h"
#include "planner/cost/part_collectives.h"
#include "planner/cost/plan_shape.h"
#include "planner/cost/step_shape.h"

namespace meshplan {

const char* ToString(StepPhase phase) {
  switch (phase) {
    case StepPhase::kForward: return "forward";
    case StepPhase::kBackward: return "backward";
    case StepPhase::kRecompute: return "recompute";
    case StepPhase::kOptimizer: return "optimizer";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// Building the step's work

namespace {

int64_t ElementBytes(Precision precision) { return precision == Precision::kFp32 ? 4 : 2; }

// The embedding's or the head's work (`ops`: its op list): compute, its list's collectives, and
// its DP / ZeRO ones over part->params.
void EndPartWork(const StepShape& s, const StepWork& w, const BlockOps& ops, PartWork* part) {
  AddOpListWork(s, ops, part);
  OpListCollectives(s, ops, /*block=*/false, part);
  DpCollectives(s, w, part->params, 0, part);
}

// Bytes the optimizer step moves per parameter it updates.
// OptimizerStep::kMegatronFp16 in mixed precision: Megatron-LM 2021's fp16 step (megatron/optimizer/optimizer.py,
// Float16OptimizerWithFloat16Params.step), one pass each: _copy_model_grads_to_main_grads,
// main_grad.float() of the fp16 gradient (read 2, write 4); _unscale_main_grads_and_check_
// for_nan, torch._amp_foreach_non_finite_check_and_unscale_ (read 4, write 4; it runs with
// the constant loss scale too); clip_grad_norm's multi_tensor_l2norm (read 4; the
// multi_tensor_scale that clips runs only when the norm exceeds the limit: not counted);
// apex FusedAdam on the fp32 main params (read grad, param, m, v, write param, m, v: 28);
// _copy_main_params_to_model_params, multi_tensor_scale by 1 (read 4, write 2).
// OptimizerStep::kForeachAdam: torch.optim.AdamW's _multi_tensor_adamw (torch/optim/adamw.py,
// capturable off, as read at pytorch/pytorch 002d2f0b), one pass each over the weights w it
// updates, m, v (state element size s), the gradient g and the temporary d: the weight decay
// _foreach_mul_(w) (read and write w), _foreach_lerp_(m, g) (m, g; m), _foreach_mul_(v) (v; v),
// _foreach_addcmul_(v, g, g) (v, g; v), d = _foreach_sqrt(v) (v; d), _foreach_div_(d) and
// _foreach_add_(d, eps) (d; d each), _foreach_addcdiv_(w, m, d) (w, m, d; w): 4 w + 12 s + 2 g
// (bf16: 36 bytes against the fused kernel's 14).
double OptimizerBytesPerParam(const TrainingSpec& training) {
  const BytesPerParam bytes = BytesPerParamFor(training);
  const OptimizerStep step = training.framework.optimizer;
  if (training.precision == Precision::kMixed && step == OptimizerStep::kMegatronFp16)
    return 6 + 8 + 4 + 28 + 6;
  const bool master = bytes.optimizer > 2 * bytes.state;  // master + m + v
  const double weights = master ? bytes.optimizer - 2 * bytes.state : bytes.param;
  const double copy_back = master ? bytes.param : 0.0;  // the 16-bit weights from the master
  if (step == OptimizerStep::kForeachAdam)
    return 4 * weights + 12 * bytes.state + 2 * bytes.grad + copy_back;
  // One fused pass: read the gradient, the weights it updates and m, v; write them back,
  // and with a master copy the 16-bit weights too (mixed: read grad + fp32 master, m, v,
  // write master, m, v and the bf16 param: 2 + 12 + 12 + 2; bf16: 2 + 6 + 6).
  return bytes.grad + 2 * (weights + 2 * bytes.state) + copy_back;
}

}  // namespace

StepWork BuildStepWork(const ModelSpec& model, const TrainingSpec& training,
                       const ParallelPlan& plan, AttentionImpl attention) {
  StepWork w;
  BuildStepWork(model, training, plan, attention, &w);
  return w;
}

// FrameworkSpec::grad_accumulation separate: every micro-batch after the first adds its weight
// gradients into the accumulator in one memory-bound pass (read both, write the sum: 3 x the
// gradient element size), over the gradient this rank accumulates (ZeRO-2/3 reduce-scatter
// each micro-batch's gradients and accumulate the shard). Each part's weight-gradient pass
// carries its share, (m - 1) / m of a pass per micro-batch.
void AddSeparateGradAccumulation(StepWork& w) {
  const double m = static_cast<double>(w.micro_batches);
  if (m <= 1) return;
  const bool sharded = w.zero_stage >= 2;
  for (PartWork* part : {&w.block, &w.embedding, &w.head}) {
    const double experts = static_cast<double>(part->expert_params);
    const double dense = static_cast<double>(part->params) - experts;
    const double elements =
        sharded ? dense / static_cast<double>(w.zero_shards) +
                      experts / static_cast<double>(w.expert_zero_shards)
                : dense + experts;
    part->backward_weight.memory_bytes +=
        (m - 1) / m * 3 * static_cast<double>(w.grad_bytes) * elements;
  }
}

// FrameworkSpec::zero3_buffers copies (FSDP2), per micro-batch and part, over the part's full
// (gathered) parameters P on this rank: the forward's and the backward's all-gather copy-out
// (read and write the parameter, 2 x param_bytes each), and the reduce-scatter's copy-in of the
// gradients (read and write, 2 x grad_bytes) after their cast to the reduce dtype when it
// differs from the parameters' (read param_bytes, write grad_bytes). The root unit's parts
// (`zero3_root`, HoldZero3Root) are not gathered again for their backward.
void AddZero3BufferCopies(StepWork& w, bool zero3_root) {
  const double p = static_cast<double>(w.param_bytes), g = static_cast<double>(w.grad_bytes);
  const double cast = g != p ? p + g : 0.0;
  for (PartWork* part : {&w.block, &w.embedding, &w.head}) {
    const double P = static_cast<double>(part->params);
    const bool gathered_for_backward = !zero3_root || part == &w.block;
    part->forward.memory_bytes += 2 * p * P;
    if (gathered_for_backward) part->backward_input.memory_bytes += 2 * p * P;
    part->backward_weight.memory_bytes += (cast + 2 * g) * P;
  }
}

// FrameworkSpec::ddp_buckets copies (PyTorch DDP's default): once per step, in the last
// micro-batch's backward, each gradient is copied into its bucket, scaled by 1/world on the
// way (read and write, 2 x grad_bytes), and the all-reduced bucket back into .grad (2 x
// grad_bytes): 4 x grad_bytes over every gradient of the rank, 1/m of it per micro-batch.
void AddDdpBucketCopies(StepWork& w) {
  const double m = static_cast<double>(w.micro_batches);
  for (PartWork* part : {&w.block, &w.embedding, &w.head})
    part->backward_weight.memory_bytes +=
        4 * static_cast<double>(w.grad_bytes) * static_cast<double>(part->params) / m;
}

// FrameworkSpec::reduce_bucket_elements (DeepSpeed's contiguous_gradients): each gradient is
// copied into the bucket as it is produced (read and write, 2 x param_bytes per element;
// deepspeed/runtime/zero/stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads,
// stage3.py __add_grad_to_ipg_bucket): ZeRO-2/3 in every micro-batch's backward, ZeRO-1 once
// per step (reduce_ready_partitions_and_remove_grads waits for the accumulation boundary
// without partition_gradients), so 1/m of a pass per micro-batch. A tensor larger than the
// bucket is reduced where it is (extra_large_param_to_reduce): the embedding's and the
// lm_head's matrix when the part exceeds the bucket.
void AddReduceBucketCopies(StepWork& w, double bucket_elements) {
  const double share = w.zero_stage == 1 ? 1.0 / static_cast<double>(w.micro_batches) : 1.0;
  for (PartWork* part : {&w.block, &w.embedding, &w.head}) {
    const double P = static_cast<double>(part->params);
    if (part != &w.block && P > bucket_elements) continue;
    part->backward_weight.memory_bytes += share * 2 * static_cast<double>(w.param_bytes) * P;
  }
}

void BuildStepWork(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan,
                   AttentionImpl attention, StepWork* out) {
  BuildStepWork(model, training, plan, MakePlanShape(model, training, plan, attention), out);
}

void BuildStepWork(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan,
                   const PlanShape& shape, StepWork* out) {
  StepWork& w = *out;  // fresh (the header's contract): the parts accumulate into it
  w.pp = plan.pp;
  w.virtual_stages = plan.virtual_stages;
  w.micro_batches = plan.num_microbatches(training.global_batch);
  w.stage_layers = shape.layers;
  w.tokens_per_microbatch = plan.micro_batch * training.seq_len / plan.cp;
  w.recompute = plan.recompute;
  w.schedule = plan.schedule;
  w.zero_stage = plan.zero_stage;
  w.param_gather_in_forward = (plan.zero_stage == 1 || plan.zero_stage == 2) &&
                              training.framework.param_gather == ParamGather::kNextForward;
  w.param_bytes = w.activation_bytes = ElementBytes(training.precision);
  w.grad_bytes = static_cast<int64_t>(BytesPerParamFor(training).grad);
  w.calibration = training.framework.calibration;

  StepShape s{model, plan, shape.groups, shape.rank, shape.lowering};
  s.T = s.rank.T;
  s.tp = static_cast<double>(plan.tp);
  s.Tn = s.rank.Tn;
  s.seq = training.seq_len;
  s.E = static_cast<double>(model.hidden);
  s.a = static_cast<double>(w.activation_bytes);
  s.attention = shape.attention;
  s.fp8 = s.rank.fp8;
  w.experts = s.rank.expert_work;

  // Transformer block.
  w.block.params = shape.block_params;
  w.block.expert_params = shape.routed_expert_params;
  if (s.fp8)
    w.fp8_weight_cast_bytes_per_block = kFp8CastBytesPerElement * static_cast<double>(w.block.params);
  BlockCompute(s, shape.ops, &w.block);
  OpListCollectives(s, shape.ops, /*block=*/true, &w.block);
  DpCollectives(s, w, w.block.params, w.block.expert_params, &w.block);

  // Embedding (first stage) and head (last stage).
  const StageParams& first = shape.first.params;
  const StageParams& last = shape.last.params;
  w.embedding.params = first.embedding;
  EndPartWork(s, w, BuildEmbeddingOps(model, s.rank), &w.embedding);
  TiedEmbeddingSync(s, w, first.embedding, &w.embedding);
  w.head.params = last.final_norm + last.lm_head;
  EndPartWork(s, w, BuildHeadOps(model, s.rank, s.lowering), &w.head);
  TiedEmbeddingSync(s, w, last.lm_head, &w.head);
  const bool zero3_root = HoldsZero3Root(training.framework, plan.zero_stage);
  if (zero3_root) HoldZero3Root(s, &w.embedding, &w.head);

  // Pipeline point-to-point: the (T, E) stage output, sequence-sharded with SP; without SP
  // each tp rank sends 1/tp of it and the receiver all-gathers it over tp (Megatron-LM's
  // scatter/gather optimisation, Narayanan et al. 2021 section 4.1).
  if (plan.pp > 1) {
    const bool scatter = !plan.sequence_parallel && plan.tp > 1;
    const double bytes = s.Tn * s.E * s.a / (scatter ? s.tp : 1.0);
    if (scatter)
      w.pp_regather = MakeCollective(MeshDim::kTp, CollectiveKind::kAllGather, StepPhase::kForward,
                                     CollectivePosition::kAfterPart, Cadence::kPerMicrobatch,
                                     s.T * s.E * s.a, s.groups[MeshDim::kTp], false);
    const CommGroup& pp = s.groups[MeshDim::kPp];
    w.pp_activation =
        MakeCollective(MeshDim::kPp, CollectiveKind::kSendRecv, StepPhase::kForward,
                       CollectivePosition::kAfterPart, Cadence::kPerMicrobatch, bytes, pp, false);
    w.pp_gradient =
        MakeCollective(MeshDim::kPp, CollectiveKind::kSendRecv, StepPhase::kBackward,
                       CollectivePosition::kAfterPart, Cadence::kPerMicrobatch, bytes, pp, false);
  }

  w.optimizer_bytes_per_param = OptimizerBytesPerParam(training);
  w.zero_shards = plan.zero_stage >= 1 ? plan.weight_replicas() : 1;
  w.expert_zero_shards = plan.zero_stage >= 1 ? plan.expert_weight_replicas() : 1;
  if (training.framework.grad_accumulation == GradAccumulation::kSeparate)
    AddSeparateGradAccumulation(w);
  if (plan.zero_stage == 3 && w.zero_shards > 1 &&
      training.framework.zero3_buffers == Zero3Buffers::kCopies)
    AddZero3BufferCopies(w, zero3_root);
  if (HasDdpBucketCopies(training.framework, plan)) AddDdpBucketCopies(w);
  if (const double bucket = ReduceBucketElements(training.framework, plan); bucket > 0)
    AddReduceBucketCopies(w, bucket);
  w.offload.host_state_bytes_per_param = HostUpdatedBytesPerParam(BytesPerParamFor(training));
  if (plan.offload_activations)
    w.offload.activation_bytes_per_block = OffloadedBytesPerBlock(shape, plan);
  SetPlanKnobs(plan, &w);
}

double OffloadedBytesPerBlock(const PlanShape& shape, const ParallelPlan& plan) {
  // every:N: the blocks that keep everything (the most a block offloads).
  const Recompute block =
      plan.recompute.kind == Recompute::kEvery ? Recompute::kNone : plan.recompute.kind;
  return BlockTensorTotals(shape.ops, block).saved;
}

size_t RecomputeSlot(const RecomputePolicy& policy) {
  const Recompute block = policy.kind == Recompute::kEvery ? Recompute::kFull : policy.kind;
  return static_cast<size_t>(block);
}

const ComputeWork& RecomputeWork(const PartWork& part, const RecomputePolicy& policy) {
  return part.recompute[RecomputeSlot(policy)];
}

double RecomputedShare(const StepWork& work, int64_t stage) {
  if (work.recompute.kind != Recompute::kEvery) return 1;
  const int64_t blocks = work.stage_layers.Of(stage);
  return blocks > 0 ? static_cast<double>(CheckpointedBlocks(work.recompute, blocks)) /
                          static_cast<double>(blocks)
                    : 0.0;
}

void SerializeCommunication(StepWork* work) {
  for (PartWork* part : {&work->block, &work->embedding, &work->head})
    for (Collective& c : part->collectives) c.overlappable = false;
  work->pp_activation.overlappable = work->pp_gradient.overlappable = false;
  work->tp_comm_overlap = false;
  work->dp_overlap = false;
  work->zero3_prefetch = 0;
}

const StepWork& WorkAsRun(const StepWork& work, const GpuSpec& gpu, StepWork* storage) {
  if (gpu.comm_overlaps_compute) return work;
  *storage = work;
  SerializeCommunication(storage);
  return *storage;
}

void SetPlanKnobs(const ParallelPlan& plan, StepWork* work) {
  for (PartWork* part : {&work->block, &work->embedding, &work->head})
    for (Collective& c : part->collectives)
      if (c.dim == MeshDim::kTp) c.overlappable = plan.tp_comm_overlap || c.behind_gemms;
  work->tp_comm_overlap = plan.tp_comm_overlap;
  // pp_overlap (interleaved only: PpOverlapOffered): the sends behind the next chunk.
  work->pp_activation.overlappable = work->pp_gradient.overlappable =
      plan.pp_comm_overlap && plan.interleaved();
  work->dp_overlap = plan.dp_comm_overlap;
  work->zero3_prefetch = plan.zero3_prefetch;
  work->offload.optimizer = plan.offload_optimizer;
  work->offload.activations = plan.offload_activations;
  work->offload.params = plan.offload_params;
}

StageParts PartsOfStage(const StepWork& work, int64_t stage) {
  StageParts parts;
  parts.embedding = stage == 0;
  parts.head = stage == work.pp - 1;
  parts.blocks = work.stage_layers.Of(stage);
  return parts;
}

int64_t PpActivationSends(const StepWork& work, int64_t stage) {
  if (work.pp <= 1) return 0;
  return work.virtual_stages - (stage == work.pp - 1 ? 1 : 0);
}

int64_t PpGradientSends(const StepWork& work, int64_t stage) {
  if (work.pp <= 1) return 0;
  return work.virtual_stages - (stage == 0 ? 1 : 0);
}

namespace {

// `recomputed`: the share of the instances that replay their forward (RecomputedShare).
void AddPartBytes(const PartWork& part, double instances, double micro_batches, double recomputed,
                  PerMeshDim* out) {
  for (const Collective& c : part.collectives) {
    const double per_step = c.cadence == Cadence::kPerMicrobatch ? micro_batches : 1.0;
    const double share = c.phase == StepPhase::kRecompute ? recomputed : 1.0;
    (*out)[c.dim] += share * instances * per_step * static_cast<double>(c.count) *
                     BytesSentPerRank(c.kind, c.bytes, c.group.size());
  }
}

}  // namespace

PerMeshDim CommBytesPerStep(const StepWork& work, int64_t stage) {
  const StageParts parts = PartsOfStage(work, stage);
  const double m = static_cast<double>(work.micro_batches);
  PerMeshDim out;
  AddPartBytes(work.block, static_cast<double>(parts.blocks), m, RecomputedShare(work, stage), &out);
  if (parts.embedding) AddPartBytes(work.embedding, 1, m, 1, &out);
  if (parts.head) AddPartBytes(work.head, 1, m, 1, &out);
  const double sends = static_cast<double>(PpActivationSends(work, stage)) * work.pp_activation.bytes +
                       static_cast<double>(PpGradientSends(work, stage)) * work.pp_gradient.bytes;
  out[MeshDim::kPp] += m * sends;
  return out;
}

ComputeWork OptimizerWork(const StepWork& work, const StageParts& parts) {
  const double params = static_cast<double>(parts.blocks * work.block.params +
                                            (parts.embedding ? work.embedding.params : 0) +
                                            (parts.head ? work.head.params : 0));
  // The routed experts' states shard over the expert-data-parallel group (ep > 1).
  const double experts = static_cast<double>(parts.blocks * work.block.expert_params);
  ComputeWork out;
  out.memory_bytes = ((params - experts) / static_cast<double>(work.zero_shards) +
                      experts / static_cast<double>(work.expert_zero_shards)) *
                     work.optimizer_bytes_per_param;
  out.kernels = parts.blocks + (parts.embedding ? 1 : 0) + (parts.head ? 1 : 0);
  if (work.fp8_weight_cast_bytes_per_block > 0) {  // fp8: each block's weights cast once
    out.memory_bytes += static_cast<double>(parts.blocks) * work.fp8_weight_cast_bytes_per_block;
    out.kernels += parts.blocks;
  }
  return out;
}

}  // namespace meshplan
