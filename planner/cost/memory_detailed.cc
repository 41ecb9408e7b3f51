// The detailed memory model: every tensor the executor allocates on one rank of
// one pipeline stage, phase by phase; the breakdown is the largest phase
// (planner/cost/memory_model.h lists the phases, planner/cost/activation_memory.h the
// activations op by op). Each term below is named after the tensor it counts.
#include <algorithm>
#include <cmath>

#include "planner/cost/activation_memory.h"
#include "planner/cost/fp8_convention.h"
#include "planner/cost/gradient_buffers.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/offload.h"
#include "planner/cost/param_count.h"
#include "planner/cost/pipeline_in_flight.h"
#include "planner/cost/runtime_memory.h"
#include "planner/stage_layers.h"

namespace meshplan {
namespace {

// `elements` rounded up to a multiple of n: the executor pads each parameter group's flat
// buffer so that every one of the n ZeRO ranks owns an equal shard (executor/model/param_layout.h).
double PadTo(double elements, int64_t n) {
  const double groups = std::ceil(elements / double(n));
  return groups * double(n);
}

// The model's buffers, allocated once (executor/model/llama_model.h): the causal mask (S,S) bool,
// and for llama the RoPE cos and sin tables (S, D/2) each, in the activation dtype.
double ModelBufferBytes(const ModelSpec& model, const TrainingSpec& training) {
  const double S = double(training.seq_len);
  const double mask = S * S * 1.0;
  const double A = ActivationBytesPerElement(training.precision);
  const double rope = model.block == BlockKind::kGpt ? 0.0 : 2.0 * S * (model.head_dim() / 2) * A;
  return mask + rope;
}

// What is alive in one phase besides the model states.
struct Phase {
  const char* name;
  double activations_bytes = 0;
  double logits_bytes = 0;
  double comm_buffer_bytes = 0;
  double gathered_params_bytes = 0;
  double transient_bytes = 0;
  double sum() const {
    return activations_bytes + logits_bytes + comm_buffer_bytes + gathered_params_bytes +
           transient_bytes;
  }
};

// The stage's parameter groups (executor/model/param_layout.h; also the ZeRO-3 units): the
// embedding, one block, the final norm + lm_head; each padded to a multiple of the ZeRO ranks.
// With expert parallelism (ep > 1) a MoE block's X/ep routed experts are a group of their
// own, padded over the expert replicas (dp/ep x cp) that shard them.
struct ParamGroups {
  double embed = 0;
  double block = 0;   // the largest block (a MoE block when the model has MoE layers)
  double head = 0;
  double blocks = 0;  // all the stage's blocks, each padded: MoE and dense ones counted apart
                      // (ep > 1: without the routed experts, which expert_blocks holds)
  double expert_blocks = 0;  // ep > 1: the stage's routed experts, padded per block
};

// The groups of `stage`, padded over the weight_replicas ZeRO ranks (routed experts with
// ep > 1: over the expert_replicas).
ParamGroups StageParamGroups(const PlanShape& shape, const StageShape& stage,
                             int64_t weight_replicas, int64_t expert_replicas) {
  const StageParams& params = stage.params;
  ParamGroups g;
  g.embed = PadTo(double(params.embedding), weight_replicas);
  g.head = PadTo(double(params.final_norm + params.lm_head), weight_replicas);
  const int64_t moe = stage.moe_layers;
  const int64_t dense = stage.layers - moe;
  g.blocks = double(dense) * PadTo(double(shape.dense_block_params), weight_replicas);
  const bool split = shape.routed_expert_params > 0;  // ep > 1 on a MoE model
  const double routed = double(shape.routed_expert_params);
  const double routed_padded = split ? PadTo(routed, expert_replicas) : 0.0;
  const double block_rest = PadTo(double(shape.block_params) - routed, weight_replicas);
  g.block = block_rest + routed_padded;
  if (moe > 0) {
    g.blocks += double(moe) * block_rest;
    g.expert_blocks = double(moe) * routed_padded;
  }
  return g;
}

// How ZeRO holds the stage's weights and gradients. ZeRO shards over the ranks that hold
// the same weights: dp x cp (as planner/cost/step_work.h); over a single such rank it
// shards, gathers and sends nothing.
//
// Gradient communication (executor/parallel/zero_engine.h): ZeRO 0/1 all-reduce /
// reduce-scatter each group's gradient in place in the flat gradient buffer (no bucket
// copy). ZeRO 2/3 hold a group's full gradient while it is computed and while its async
// reduce-scatter is in flight (freed when the next group's gradient is ready); from the
// second micro-batch on, the reduce-scatter lands in a temporary shard (group / n).
// ZeRO-3 (executor/trainer.cc, executor/parallel/zero_engine.h): each pass gathers the group it
// computes and, as that group starts, prefetches the plan's `prefetch` groups the pass
// computes next, so 1 + prefetch groups are gathered at once (fewer near the pass's end):
// forward embedding -> block 0 -> ... -> head, backward head -> last block -> ... -> block 0
// (the embedding backward reads no parameters: block 0 prefetches nothing and the embedding
// is not gathered). Under a framework whose root FSDP unit holds the embedding and the head
// (FrameworkSpec::zero3_end_parts root) they stay gathered from their forward through the
// whole backward, and the head's full gradient waits for the root's reduce-scatter after it.
struct ZeroLayout {
  int64_t weight_replicas = 1;
  int zero = 0;  // the plan's ZeRO stage, 0 over a single rank
  int64_t expert_replicas = 1;  // dp/ep x cp: the ranks that shard the routed experts (ep > 1)
  int expert_zero = 0;          // `zero`: the executor's one ZeroEngine runs the same stage
                                // on every group, over a single expert replica too
  BytesPerParam bytes;
  ParamGroups groups;
  double stage_layers = 0;   // blocks on the stage (all chunks)
  double chunk_blocks = 0;   // blocks of the stage's largest chunk (virtual stage)
  double head_chunk_blocks = 0;   // blocks of its last chunk (the head's, on the last stage)
  double embed_chunk_blocks = 0;  // blocks of its first chunk (the embedding's, on stage 0)
  double partial_shard = 0;  // the temporary reduce-scatter shard per group, in groups
  double fp8_copies = 0;     // fp8: FP8 weight bytes per block parameter (fp8_convention.h)
  double prefetch = 1;       // ZeRO-3 gathers issued ahead (the plan's `prefetch`)
  double reduce_bucket = 0;  // bytes of the framework's gradient bucket (ZeRO >= 1)
  bool root_held = false;    // ZeRO-3 with zero3_end_parts root: embedding and head held

  // Of `group` parameters, those this rank's optimizer updates (ZeRO >= 1: its shard).
  double owned(double group) const { return zero >= 1 ? group / double(weight_replicas) : group; }
  // Every parameter this rank's optimizer updates: its share of the stage's groups and of the
  // routed experts (ep > 1: sharded over the expert replicas).
  double owned_params() const {
    const double experts = expert_zero >= 1 ? groups.expert_blocks / double(expert_replicas)
                                            : groups.expert_blocks;
    return owned(groups.embed + groups.blocks + groups.head) + experts;
  }
  // A group's full gradient (ZeRO 2/3) and its gathered weights (ZeRO-3).
  double full_grad(double group) const { return zero >= 2 ? bytes.grad * group : 0.0; }
  // A backward's communication buffers: `pending` gradients, or the framework's gradient
  // bucket (FrameworkSpec::reduce_bucket_elements), which holds them, when it is larger.
  double backward_buffers(double pending) const { return std::max(pending, reduce_bucket); }
  double gathered(double group) const { return zero == 3 ? bytes.param * group : 0.0; }
  // A gathered block, with its FP8 copies in fp8 runs (ZeRO-3 casts the gathered weights).
  double gathered_block() const {
    return zero == 3 ? (bytes.param + fp8_copies) * groups.block : 0.0;
  }
  // The root unit's parts on the stage, gathered through the backward (root_held).
  double held_root() const { return root_held ? gathered(groups.embed + groups.head) : 0.0; }
  // The head's gradient in the root unit: unsharded in the parameters' dtype (autograd's
  // .grad of the gathered weight) until the root's reduce-scatter after the backward.
  double held_head_grad() const { return bytes.param * groups.head; }
  // The head's gradient during the blocks' backward: held (root) or its reduce-scatter in
  // flight in the reduce dtype.
  double head_grad_in_backward() const {
    return root_held ? held_head_grad() : full_grad(groups.head) * (1.0 + partial_shard);
  }
  // The FP8 copies that live through the step (ZeRO 0-2: every block's; ZeRO-3: none).
  double resident_fp8_copies() const {
    return zero == 3 ? 0.0 : fp8_copies * groups.block * stage_layers;
  }
  // A block's backward prefetches the `prefetch` blocks before it in its chunk (one by
  // default), as many as the chunk holds before the stage's last block.
  double prefetched_block() const {
    return std::min(prefetch, std::max(0.0, chunk_blocks - 1)) * gathered_block();
  }
  // The head's backward prefetches the chunk's last `prefetch` blocks.
  double prefetched_after_head() const {
    return std::min(prefetch, head_chunk_blocks) * gathered_block();
  }
};

// The ZeRO layout of one rank of `stage`.
ZeroLayout MakeZeroLayout(const TrainingSpec& training, const ParallelPlan& plan,
                          const PlanShape& shape, const StageShape& stage_shape) {
  ZeroLayout z;
  z.weight_replicas = plan.weight_replicas();
  z.zero = z.weight_replicas > 1 ? plan.zero_stage : 0;
  z.expert_replicas = plan.expert_weight_replicas();
  z.expert_zero = z.zero;
  z.bytes = BytesPerParamFor(training);
  z.groups = StageParamGroups(shape, stage_shape, z.weight_replicas, z.expert_replicas);
  z.stage_layers = double(stage_shape.layers);
  z.chunk_blocks = double(stage_shape.largest_chunk);
  z.head_chunk_blocks = double(stage_shape.last_chunk);
  z.embed_chunk_blocks = double(stage_shape.first_chunk);
  z.partial_shard = plan.num_microbatches(training.global_batch) > 1 ? 1.0 / double(z.weight_replicas) : 0.0;
  if (training.precision == Precision::kFp8) z.fp8_copies = kFp8WeightCopiesPerParam * kFp8Bytes;
  z.prefetch = double(std::max<int64_t>(0, plan.zero3_prefetch));
  z.root_held = HoldsZero3Root(training.framework, z.zero);
  // ZeRO-1/2 double the bucket to overlap its reduction (stage_1_and_2.py: a second buffer
  // with overlap_comm); ZeRO-3 keeps one.
  const double buckets = z.zero <= 2 && plan.dp_comm_overlap ? 2.0 : 1.0;
  z.reduce_bucket = buckets * ReduceBucketElements(training.framework, plan) * z.bytes.param;
  return z;
}

// The activations alive on the stage: the op lists (planner/cost/activation_memory.h)
// times the micro-batches in flight.
struct StageActivations {
  double first_bytes = 0;           // stage 0's own tensors, per micro-batch
  double last_bytes = 0;            // the last stage's, before the loss
  double loss_bytes = 0;            // the loss (fp32 logits), per micro-batch
  MicrobatchesInFlight in_flight;
  double per_microbatch = 0;        // the stage's blocks, one micro-batch
  double total = 0;                 // everything in flight
  double logits_all = 0;            // the loss tensors of every micro-batch in flight
  double logits_but_current = 0;    // ... but the one whose backward runs
  double loss_held = 0;             // of its loss tensors, those alive in every phase (LossHeldBytes)
  double host_bytes = 0;            // offload_act: the saved tensors kept on the host
};

// every:N: the checkpointed blocks of a stage of `stage_layers` blocks (0 under the other
// policies, whose blocks all keep DetailedBlockTerms::tensors).
double StageCheckpoints(const ParallelPlan& plan, double stage_layers) {
  if (plan.recompute.kind != Recompute::kEvery) return 0;
  return double(CheckpointedBlocks(plan.recompute, static_cast<int64_t>(stage_layers)));
}

// The activations of one rank of `stage`, with the stage's blocks (stage_layers).
StageActivations CountStageActivations(const ModelSpec& model, const ParallelPlan& plan,
                                       int64_t stage,
                                       const StageShape& stage_shape, double stage_layers,
                                       const DetailedBlockTerms& block) {
  const bool first = stage == 0, last = stage == plan.pp - 1;
  StageActivations a;
  a.first_bytes = first ? FirstStageSavedTensors(model, block.shape).TotalBytes() : 0;
  a.last_bytes = last ? LastStageSavedTensors(model, block.shape).TotalBytes() : 0;
  a.loss_bytes = last ? LossSavedTensors(block.shape).TotalBytes() : 0;
  a.in_flight = stage_shape.in_flight;
  // Dense and MoE layers keep different FFNs: weigh the two blocks by the stage's share
  // of MoE layers (its first dense_layers keep the dense FFN: executor/model/moe_block.h).
  const double layers = double(stage_shape.layers);
  const double moe_share =
      block.shape.experts > 0 && layers > 0 ? double(stage_shape.moe_layers) / layers
                                            : 1.0;
  auto per_layer = [&](double moe_saved, double dense_saved) {
    return block.shape.experts > 0 ? moe_share * moe_saved + (1.0 - moe_share) * dense_saved
                                   : moe_saved;
  };
  // every:N: the stage's checkpointed blocks keep their input only (StageCheckpoints).
  const double checkpointed = StageCheckpoints(plan, stage_layers);
  a.per_microbatch =
      (stage_layers - checkpointed) * per_layer(block.tensors.saved, block.dense_saved) +
      checkpointed * per_layer(block.checkpointed.saved, block.dense_checkpointed_saved);
  a.total = a.in_flight.blocks * a.per_microbatch +
            double(a.in_flight.first_stage) * a.first_bytes +
            double(a.in_flight.last_stage) * a.last_bytes;
  if (plan.offload_activations && stage_layers > 0) {
    // planner/cost/offload.h: the GPU keeps two blocks of one micro-batch (the one computing,
    // the one in transit) and the stage's own tensors of the current micro-batch; the rest
    // of the blocks' saved tensors wait on the host.
    const double blocks_in_flight = a.in_flight.blocks * stage_layers;
    const double kept = std::min(blocks_in_flight, 2.0);
    a.host_bytes = (blocks_in_flight - kept) * block.tensors.saved;
    a.in_flight.blocks = kept / stage_layers;
    a.in_flight.head_blocks = std::min(a.in_flight.head_blocks, a.in_flight.blocks);
    a.in_flight.embedding_blocks = std::min(a.in_flight.embedding_blocks, a.in_flight.blocks);
    a.total -= a.host_bytes;
  }
  a.logits_all = double(a.in_flight.last_stage) * a.loss_bytes;
  a.logits_but_current = double(a.in_flight.last_stage - 1) * a.loss_bytes;
  a.loss_held = last ? LossHeldBytes(block.shape) : 0;
  return a;
}

// What every phase reads: one rank of pipeline stage `index`.
struct Stage {
  const ModelSpec& model;
  const TrainingSpec& training;
  const ParallelPlan& plan;
  int64_t index;
  const StageShape& shape;
  ZeroLayout zero;
  const DetailedBlockTerms& block;
  StageActivations act;
  bool fused_adamw;  // MemoryOptions::fused_adamw
  bool first() const { return index == 0; }
  bool last() const { return index == plan.pp - 1; }
};

// The backward of the stage's last block in the last micro-batch in flight, whose tensors
// are `t` (every:N: a checkpointed block's or another's, LayerBackwardPhase). The current
// micro-batch's final-norm / lm_head tensors and logits are freed by now. Two steps: the
// FFN backward (all recomputed tensors alive) and the attention backward (the FFN half's
// saved and recomputed tensors freed); the phase is the larger.
Phase BlockBackwardPhase(const Stage& s, const BlockTensorBytes& t) {
  const StageActivations& a = s.act;
  const ZeroLayout& z = s.zero;
  const double saved_mlp = t.saved_mlp;
  const double recomputed_mlp = t.recomputed_mlp;
  const double recomputed = t.recomputed;
  const double mlp_step = recomputed + s.block.mlp_workspace;
  const double attention_step = recomputed - recomputed_mlp + s.block.attention_workspace;
  const bool attention_peak = attention_step - saved_mlp > mlp_step;
  Phase p{"layer_backward"};
  p.activations_bytes = a.total - a.last_bytes - (attention_peak ? saved_mlp : 0.0);
  p.logits_bytes = a.logits_but_current + a.loss_held;
  // The block's full gradient; on the last stage the head's, still in flight (or held: root).
  p.comm_buffer_bytes = z.backward_buffers(
      z.full_grad(z.groups.block) + (s.last() ? z.head_grad_in_backward() : 0.0));
  // The block computing and the block before it, prefetched (the head is released unless
  // the root unit holds it).
  p.gathered_params_bytes = z.gathered_block() + z.prefetched_block() + z.held_root();
  p.transient_bytes = attention_peak ? attention_step : mlp_step;
  return p;
}

// The layer backward phase: every:N with checkpointed blocks on the stage, the larger of a
// checkpointed block's backward (its recomputed tensors alive) and another's.
Phase LayerBackwardPhase(const Stage& s) {
  const Phase plain = BlockBackwardPhase(s, s.block.tensors);
  if (StageCheckpoints(s.plan, s.zero.stage_layers) == 0) return plain;
  const Phase checkpointed = BlockBackwardPhase(s, s.block.checkpointed);
  return checkpointed.sum() > plain.sum() ? checkpointed : plain;
}

// The last stage's lm_head backward: the logits buffer holds their gradient (in place).
Phase HeadBackwardPhase(const Stage& s) {
  const StageActivations& a = s.act;
  const ZeroLayout& z = s.zero;
  Phase head{"head_backward"};
  // Fewer blocks may be in flight as the head's chunk starts its backward (uneven chunks).
  head.activations_bytes =
      a.total - std::max(0.0, a.in_flight.blocks - a.in_flight.head_blocks) * a.per_microbatch;
  head.logits_bytes = a.logits_all;
  head.comm_buffer_bytes =
      z.backward_buffers(z.root_held ? z.held_head_grad() : z.full_grad(z.groups.head));
  // The head (gathered since its forward) and the chunk's last block, prefetched as the
  // head's backward starts.
  head.gathered_params_bytes =
      (z.root_held ? z.held_root() : z.gathered(z.groups.head)) + z.prefetched_after_head();
  head.transient_bytes = HeadBackwardWorkspace(s.block.shape).TotalBytes();
  if (s.block.shape.act_bytes != 4.0 && Fp32SoftmaxBuffer(s.block.shape.loss)) {
    // The fp32 logits are freed once cast, before d(input).
    const RankShape& sh = s.block.shape;
    const double d_input = double(sh.b) * sh.s_norm * sh.hidden * sh.act_bytes;
    head.transient_bytes -= std::min(d_input, a.loss_bytes);
  }
  return head;
}

// Stage 0's embedding backward: the micro-batch's blocks are done; the others in flight
// remain.
Phase EmbedBackwardPhase(const Stage& s) {
  const StageActivations& a = s.act;
  const ZeroLayout& z = s.zero;
  Phase embed{"embed_backward"};
  // The micro-batch's first chunk (the embedding's) has run its backward.
  const double chunk = z.stage_layers > 0 ? z.embed_chunk_blocks / z.stage_layers
                                          : 1.0 / double(s.plan.virtual_stages);
  embed.activations_bytes = std::max(0.0, a.in_flight.embedding_blocks - chunk) * a.per_microbatch +
                            double(a.in_flight.first_stage - 1) * a.first_bytes +
                            (s.last() ? double(a.in_flight.last_stage - 1) * a.last_bytes : 0.0);
  embed.logits_bytes = a.logits_but_current + a.loss_held;
  // The embedding's full gradient, block 0's still in flight. The embedding backward
  // scatters into the gradient buffer and allocates nothing.
  // Under the root unit the head's gradient too, held until the root's reduce-scatter.
  embed.comm_buffer_bytes = z.backward_buffers(
      z.full_grad(z.groups.embed) + z.full_grad(z.groups.block) * (1.0 + z.partial_shard) +
      (z.root_held ? z.held_head_grad() : 0.0));
  // Nothing gathered but the root unit: the embedding backward reads only the token ids,
  // and block 0's gather was freed with its backward (it prefetched nothing).
  embed.gathered_params_bytes = z.held_root();
  return embed;
}

// AdamW, group by group (executor/model/adamw.h): one temporary the size of the group's
// (shard of the) parameters, the denominator, in the state dtype (none with the fused
// kernel), + the fp32 copy of the gradient for mixed: the largest group's. torch.optim.AdamW's
// foreach path (OptimizerStep::kForeachAdam) takes the whole rank as one group (its tensors
// grouped by device and dtype): its denominator d = _foreach_sqrt(v) spans every parameter
// the rank updates (torch/optim/adamw.py _multi_tensor_adamw).
double OptimizerTransientBytes(const Stage& s) {
  const ZeroLayout& z = s.zero;
  const double block = z.stage_layers > 0 ? z.groups.block : 0.0;
  // The parameters one temporary spans.
  const double group = s.training.framework.optimizer == OptimizerStep::kForeachAdam
                           ? z.owned_params()
                           : z.owned(std::max({block, z.groups.embed, z.groups.head}));
  const bool fp32_copy = s.training.precision == Precision::kMixed && z.bytes.grad < 4;
  return group * ((s.fused_adamw ? 0.0 : z.bytes.state) + (fp32_copy ? 4.0 : 0.0));
}

// The update. ZeRO-1/2 all-gather the updated shard in place. offload_opt: the step and its
// transient (a workspace kept on the host, Breakdown) leave the GPU.
Phase OptimizerPhase(const Stage& s) {
  Phase opt{"optimizer"};
  opt.logits_bytes = s.act.loss_held;
  opt.comm_buffer_bytes = s.zero.zero == 3 ? s.zero.reduce_bucket : 0.0;  // ZeRO-3 keeps its bucket
  opt.transient_bytes = s.plan.offload_optimizer ? 0.0 : OptimizerTransientBytes(s);
  return opt;
}

// fp8 (fp8_convention.h): the FP8 weight copies that live through the step and the
// scaling state (amax histories, scales) of every FP8 GEMM of the stage's blocks.
double Fp8ResidentBytes(const Stage& s) {
  if (s.training.precision != Precision::kFp8) return 0;
  const int64_t moe = s.shape.moe_layers;
  const double gemms = double(s.zero.stage_layers - moe) * double(Fp8GemmsPerBlock(s.model, false, 1)) +
                       double(moe) * double(Fp8GemmsPerBlock(s.model, true, s.plan.ep));
  return s.zero.resident_fp8_copies() + gemms * kFp8ScalingBytesPerGemm;
}

// The model states (the padded groups, ZeRO-sharded: the routed experts with ep > 1 over
// the expert replicas, the rest over dp x cp), the model's buffers and the FP8 copies and
// scaling state, which live through the step, plus what the peak phase holds.
MemoryBreakdown Breakdown(const Stage& s, const Phase& peak) {
  const ZeroLayout& z = s.zero;
  const double padded_params = z.groups.embed + z.groups.blocks + z.groups.head;
  const auto model_states = s.training.framework.zero1_gradient_shard ? ExecutorModelStates
                                                                        : ShardedModelStates;
  ModelStateBytes states = model_states(padded_params, z.bytes, z.zero, z.weight_replicas);
  if (z.groups.expert_blocks > 0) {
    const ModelStateBytes experts =
        model_states(z.groups.expert_blocks, z.bytes, z.expert_zero, z.expert_replicas);
    states.params_bytes += experts.params_bytes;
    states.grads_bytes += experts.grads_bytes;
    states.optimizer_bytes += experts.optimizer_bytes;
  }
  // DDP's buckets (FrameworkSpec::ddp_buckets copies): a second copy of every gradient,
  // allocated when DDP wraps the model and kept for the run.
  if (HasDdpBucketCopies(s.training.framework, s.plan)) states.grads_bytes *= 2;
  const double model_buffers = ModelBufferBytes(s.model, s.training) + Fp8ResidentBytes(s);
  MemoryBreakdown out;
  out.params_bytes = states.params_bytes + model_buffers;
  out.grads_bytes = states.grads_bytes;
  out.optimizer_bytes = states.optimizer_bytes;
  out.activations_bytes = peak.activations_bytes;
  out.logits_bytes = peak.logits_bytes;
  out.comm_buffer_bytes = peak.comm_buffer_bytes;
  out.gathered_params_bytes = peak.gathered_params_bytes;
  out.transient_bytes = peak.transient_bytes;
  out.total_bytes = states.total() + model_buffers + peak.sum();
  // Offload (planner/cost/offload.h): what leaves the GPU for the host.
  if (s.plan.offload_optimizer) {
    // The owned parameters (experts included) are what the optimizer states count; the
    // update's workspace is held once.
    out.host_optimizer_bytes =
        HostOptimizerBytesPerParam(z.bytes) * z.owned_params() + OptimizerTransientBytes(s);
    out.total_bytes -= out.optimizer_bytes;
    out.optimizer_bytes = 0;
  }
  if (s.plan.offload_params && z.zero == 3) {
    out.host_params_bytes = states.params_bytes;
    out.total_bytes -= states.params_bytes;
    out.params_bytes -= states.params_bytes;
  }
  out.host_activations_bytes = s.act.host_bytes;
  out.peak_phase = peak.name;
  out.worst_stage = s.index;
  return out;
}

}  // namespace

DetailedBlockTerms DetailedBlockTermsOf(const ParallelPlan& plan, const PlanShape& shape) {
  DetailedBlockTerms b;
  b.impl = shape.attention;
  b.shape = shape.rank;
  // every:N: the blocks that keep everything, and (below) the checkpointed ones.
  const Recompute kept =
      plan.recompute.kind == Recompute::kEvery ? Recompute::kNone : plan.recompute.kind;
  const BlockOps& ops = shape.ops;
  b.tensors = BlockTensorTotals(ops, kept);
  if (plan.recompute.kind == Recompute::kEvery)
    b.checkpointed = BlockTensorTotals(ops, Recompute::kFull);
  if (b.shape.experts > 0) {
    const BlockOps& dense_ops = shape.dense_ops;  // the dense FFN of width F/tp
    b.dense_saved = BlockTensorTotals(dense_ops, kept).saved;
    if (plan.recompute.kind == Recompute::kEvery)
      b.dense_checkpointed_saved = BlockTensorTotals(dense_ops, Recompute::kFull).saved;
  }
  b.mlp_workspace = ops.backward_workspace(BlockHalf::kMlp).TotalBytes();
  b.attention_workspace = ops.backward_workspace(BlockHalf::kAttention).TotalBytes();
  return b;
}

MemoryBreakdown DetailedStageMemory(const ModelSpec& model, const TrainingSpec& training,
                                    const ParallelPlan& plan, int64_t stage,
                                    const MemoryOptions& options) {
  const PlanShape shape = MakePlanShape(model, training, plan, options.attention);
  return DetailedStageMemory(model, training, plan, stage, options, shape,
                             DetailedBlockTermsOf(plan, shape));
}

// Stage -> its phases (layer backward, head backward on the last stage, embedding
// backward on the first, optimizer) -> the largest, over the model states -> plus the
// GPU's runtime memory (fixed, or proportional to the phase's bytes: the peak stays).
MemoryBreakdown DetailedStageMemory(const ModelSpec& model, const TrainingSpec& training,
                                    const ParallelPlan& plan, int64_t stage,
                                    const MemoryOptions& options, const PlanShape& shape,
                                    const DetailedBlockTerms& block) {
  const StageShape stage_shape = StageOf(shape, model, training, plan, stage);
  const ZeroLayout zero = MakeZeroLayout(training, plan, shape, stage_shape);
  const Stage s{model,
                training,
                plan,
                stage,
                stage_shape,
                zero,
                block,
                CountStageActivations(model, plan, stage, stage_shape, zero.stage_layers,
                                      block),
                options.fused_adamw};
  Phase phases[4];
  int num_phases = 0;
  phases[num_phases++] = LayerBackwardPhase(s);
  if (s.last()) phases[num_phases++] = HeadBackwardPhase(s);
  if (s.first()) phases[num_phases++] = EmbedBackwardPhase(s);
  phases[num_phases++] = OptimizerPhase(s);
  const Phase* peak =
      std::max_element(phases, phases + num_phases,
                       [](const Phase& a, const Phase& b) { return a.sum() < b.sum(); });
  MemoryBreakdown out = Breakdown(s, *peak);
  AddRuntimeMemory(WithFramework(options.runtime, training.framework), plan, &out);
  return out;
}

}  // namespace meshplan
