// The detailed memory model: every tensor the executor allocates on one rank of
// one pipeline stage, phase by phase; the breakdown is the largest phase
// (planner/memory_model.h lists the phases, planner/activation_memory.h the
// activations op by op). Each term below is named after the tensor it counts.
#include <algorithm>
#include <cmath>

#include "planner/activation_memory.h"
#include "planner/memory_model.h"
#include "planner/model_state_memory.h"
#include "planner/param_count.h"
#include "planner/pipeline_in_flight.h"

namespace meshplan {
namespace {

// `elements` rounded up to a multiple of n: the executor pads each parameter group's flat
// buffer so that every one of the n ZeRO ranks owns an equal shard (executor/param_layout.h).
double PadTo(double elements, int64_t n) {
  const double groups = std::ceil(elements / double(n));
  return groups * double(n);
}

// The model's buffers, allocated once (executor/llama_model.h): the causal mask (S,S) bool,
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

}  // namespace

MemoryBreakdown DetailedStageMemory(const ModelSpec& model, const TrainingSpec& training,
                                    const ParallelPlan& plan, int64_t stage,
                                    const MemoryOptions& options) {
  const bool first = stage == 0, last = stage == plan.pp - 1;
  // ZeRO shards over the ranks that hold the same weights: dp x cp (as
  // planner/step_work.h). Over a single such rank it shards, gathers and sends nothing.
  const int64_t weight_replicas = plan.dp * plan.cp;
  const double n = double(weight_replicas);
  const int zero = weight_replicas > 1 ? plan.zero_stage : 0;
  const StageParams stage_params = CountStageParams(model, plan, stage);
  const BytesPerParam bytes = BytesPerParamFor(training.precision);
  const double stage_layers = double(model.layers) / plan.pp;

  // ---- Parameter groups (executor/param_layout.h; also the ZeRO-3 units): the
  // embedding, each block, the final norm + lm_head; each padded to a multiple of n.
  const double embed_group = PadTo(double(stage_params.embedding), weight_replicas);
  const double block_group = PadTo(double(BlockParamsPerTpRank(model, plan.tp)), weight_replicas);
  const double head_group =
      PadTo(double(stage_params.final_norm + stage_params.lm_head), weight_replicas);
  const double padded_params = embed_group + stage_layers * block_group + head_group;
  const ModelStateBytes states = ExecutorModelStates(padded_params, bytes, zero, weight_replicas);
  const double model_buffers = ModelBufferBytes(model, training);

  // ---- Activations: the op list times the micro-batches in flight.
  const AttentionImpl impl = ResolveAttentionImpl(options.attention, model, training.precision);
  const ActivationShape shape = MakeActivationShape(model, training, plan);
  const SavedTensorList block_saved = BlockSavedTensors(model, shape, impl, plan.recompute);
  const SavedTensorList block_recomputed =
      BlockRecomputedTensors(model, shape, impl, plan.recompute);
  const double block_bytes = block_saved.TotalBytes();
  const double first_bytes = first ? FirstStageSavedTensors(model, shape).TotalBytes() : 0;
  const double last_bytes = last ? LastStageSavedTensors(model, shape).TotalBytes() : 0;
  const double loss_bytes = last ? LossSavedTensors(shape).TotalBytes() : 0;  // per micro-batch
  const int64_t microbatches = plan.num_microbatches(training.global_batch);
  const MicrobatchesInFlight in_flight = CountMicrobatchesInFlight(plan, microbatches, stage);
  const double stage_activations_per_mb = stage_layers * block_bytes;
  const double activations = in_flight.blocks * stage_activations_per_mb +
                             double(in_flight.first_stage) * first_bytes +
                             double(in_flight.last_stage) * last_bytes;
  const double logits_all = double(in_flight.last_stage) * loss_bytes;
  const double logits_but_current = double(in_flight.last_stage - 1) * loss_bytes;

  // ---- Gradient communication (executor/zero_engine.h): ZeRO 0/1 all-reduce /
  // reduce-scatter each group's gradient in place in the flat gradient buffer (no bucket
  // copy). ZeRO 2/3 hold a group's full gradient while it is computed and while its async
  // reduce-scatter is in flight (freed when the next group's gradient is ready); from the
  // second micro-batch on, the reduce-scatter lands in a temporary shard (group / n).
  // ZeRO-3 (executor/trainer.cc, executor/zero_engine.h): each pass gathers the group it
  // computes and, as that group starts, prefetches the next group the pass computes (one
  // ahead), so two groups are gathered at once: forward embedding -> block 0 -> ... ->
  // head, backward head -> last block -> ... -> block 0 (the embedding backward reads no
  // parameters: block 0 prefetches nothing and the embedding is not gathered).
  const bool grads_per_group = zero >= 2;
  auto full_grad = [&](double group) { return grads_per_group ? bytes.grad * group : 0.0; };
  auto gathered = [&](double group) { return zero == 3 ? bytes.param * group : 0.0; };
  const double partial_shard = microbatches > 1 ? 1.0 / n : 0.0;  // temporary shard per group
  // Blocks per chunk (virtual stage): a block's backward prefetches the one before it in
  // its chunk, which the stage's last block has when the chunk holds two or more.
  const bool interleaved = plan.pp > 1 && plan.schedule == PipelineSchedule::kInterleaved;
  const double chunk_blocks =
      stage_layers / double(interleaved ? std::max<int64_t>(1, plan.virtual_stages) : 1);
  const double prefetched_block = chunk_blocks >= 2 ? gathered(block_group) : 0.0;

  // ---- Phases.
  Phase phases[4];
  int num_phases = 0;
  {  // The backward of the stage's last block in the last micro-batch in flight. The
     // current micro-batch's final-norm / lm_head tensors and logits are freed by now.
     // Two steps: the FFN backward (all recomputed tensors alive) and the attention
     // backward (the FFN half's saved and recomputed tensors freed).
    Phase p{"layer_backward"};
    double saved_mlp = 0, recomputed_mlp = 0;
    for (const SavedTensor& t : block_saved)
      if (t.mlp_half) saved_mlp += t.bytes();
    for (const SavedTensor& t : block_recomputed)
      if (t.mlp_half) recomputed_mlp += t.bytes();
    const double recomputed = block_recomputed.TotalBytes();
    const double mlp_step =
        recomputed + BlockBackwardStepWorkspace(model, shape, impl, BlockHalf::kMlp).TotalBytes();
    const double attention_step =
        recomputed - recomputed_mlp +
        BlockBackwardStepWorkspace(model, shape, impl, BlockHalf::kAttention).TotalBytes();
    const bool attention_peak = attention_step - saved_mlp > mlp_step;
    p.activations_bytes = activations - last_bytes - (attention_peak ? saved_mlp : 0.0);
    p.logits_bytes = logits_but_current;
    // The block's full gradient; on the last stage the head's is still in flight.
    p.comm_buffer_bytes = full_grad(block_group) +
                          (last ? full_grad(head_group) * (1.0 + partial_shard) : 0.0);
    // The block computing and the block before it, prefetched (the head is released).
    p.gathered_params_bytes = gathered(block_group) + prefetched_block;
    p.transient_bytes = attention_peak ? attention_step : mlp_step;
    phases[num_phases++] = p;
  }
  if (last) {  // the lm_head backward: the logits buffer holds their gradient (in place)
    Phase head{"head_backward"};
    head.activations_bytes = activations;
    head.logits_bytes = logits_all;
    head.comm_buffer_bytes = full_grad(head_group);
    // The head (gathered since its forward) and the chunk's last block, prefetched as the
    // head's backward starts.
    head.gathered_params_bytes = gathered(head_group) + (chunk_blocks >= 1 ? gathered(block_group) : 0.0);
    head.transient_bytes = HeadBackwardWorkspace(shape).TotalBytes();
    if (shape.act_bytes != 4.0) {  // the fp32 logits are freed once cast, before d(input)
      const double d_input = double(shape.b) * shape.s_norm * shape.hidden * shape.act_bytes;
      head.transient_bytes -= std::min(d_input, loss_bytes);
    }
    phases[num_phases++] = head;
  }
  if (first) {  // the micro-batch's blocks are done; the others in flight remain
    Phase embed{"embed_backward"};
    const double chunk = 1.0 / double(plan.virtual_stages);
    embed.activations_bytes = std::max(0.0, in_flight.blocks - chunk) * stage_activations_per_mb +
                              double(in_flight.first_stage - 1) * first_bytes +
                              (last ? double(in_flight.last_stage - 1) * last_bytes : 0.0);
    embed.logits_bytes = logits_but_current;
    // The embedding's full gradient, block 0's still in flight. The embedding backward
    // scatters into the gradient buffer and allocates nothing.
    embed.comm_buffer_bytes = full_grad(embed_group) + full_grad(block_group) * (1.0 + partial_shard);
    // Nothing gathered: the embedding backward reads only the token ids, and block 0's
    // gather was freed with its backward (it prefetched nothing).
    embed.gathered_params_bytes = 0;
    phases[num_phases++] = embed;
  }
  {  // AdamW, group by group (executor/adamw.h): one temporary the size of the group's
     // (shard of the) parameters, the denominator, in the state dtype (+ the fp32 copy of
     // the gradient for mixed). ZeRO-1/2 all-gather the updated shard in place.
    Phase opt{"optimizer"};
    double largest = stage_layers > 0 ? block_group : 0.0;
    largest = std::max({largest, embed_group, head_group});
    if (zero >= 1) largest /= n;
    opt.transient_bytes =
        largest * (bytes.state + (training.precision == Precision::kMixed ? 4.0 : 0.0));
    phases[num_phases++] = opt;
  }

  const Phase* peak =
      std::max_element(phases, phases + num_phases,
                       [](const Phase& a, const Phase& b) { return a.sum() < b.sum(); });
  MemoryBreakdown out;
  out.params_bytes = states.params_bytes + model_buffers;
  out.grads_bytes = states.grads_bytes;
  out.optimizer_bytes = states.optimizer_bytes;
  out.activations_bytes = peak->activations_bytes;
  out.logits_bytes = peak->logits_bytes;
  out.comm_buffer_bytes = peak->comm_buffer_bytes;
  out.gathered_params_bytes = peak->gathered_params_bytes;
  out.transient_bytes = peak->transient_bytes;
  out.total_bytes = states.total() + model_buffers + peak->sum();
  out.peak_phase = peak->name;
  out.worst_stage = stage;
  return out;
}

}  // namespace meshplan
