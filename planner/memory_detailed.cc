// The detailed memory model: every tensor the executor allocates on one rank of
// one pipeline stage, phase by phase; the breakdown is the largest phase
// (planner/memory_model.h lists the phases, planner/activation_memory.h the
// activations op by op). Each term below is named after the tensor it counts.
#include <algorithm>

#include "planner/activation_memory.h"
#include "planner/memory_model.h"
#include "planner/model_state_memory.h"
#include "planner/param_count.h"
#include "planner/pipeline_in_flight.h"

namespace meshplan {
namespace {

// The largest weight matrix of one block on one tp rank, elements.
double LargestBlockMatrix(const ModelSpec& m, int64_t tp) {
  const double E = double(m.hidden), F = double(m.ffn_hidden), KD = double(m.kv_hidden());
  const double attention = m.block == BlockKind::kGpt ? E * (E + 2 * KD)  // fused QKV
                                                      : std::max(E * E, E * KD);
  return std::max(attention, E * F) / double(tp);
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
  const int zero = weight_replicas > 1 ? plan.zero_stage : 0;
  const StageParams stage_params = CountStageParams(model, plan, stage);
  const double rank_params = double(stage_params.total());
  const BytesPerParam bytes = BytesPerParamFor(training.precision);
  const ModelStateBytes states = ShardedModelStates(rank_params, bytes, zero, weight_replicas);

  // ---- Activations: the op list times the micro-batches in flight.
  const AttentionImpl impl = ResolveAttentionImpl(options.attention, model, training.precision);
  const ActivationShape shape = MakeActivationShape(model, training, plan);
  const double stage_layers = double(model.layers) / plan.pp;
  const double block_bytes = BlockSavedTensors(model, shape, impl, plan.recompute).TotalBytes();
  const double first_bytes = first ? FirstStageSavedTensors(model, shape).TotalBytes() : 0;
  const double last_bytes = last ? LastStageSavedTensors(model, shape).TotalBytes() : 0;
  const double loss_bytes = last ? LossSavedTensors(shape).TotalBytes() : 0;  // per micro-batch
  const MicrobatchesInFlight in_flight =
      CountMicrobatchesInFlight(plan, plan.num_microbatches(training.global_batch), stage);
  const double stage_activations_per_mb = stage_layers * block_bytes;
  const double activations = in_flight.blocks * stage_activations_per_mb +
                             double(in_flight.first_stage) * first_bytes +
                             double(in_flight.last_stage) * last_bytes;
  const double logits_all = double(in_flight.last_stage) * loss_bytes;
  const double logits_but_current = double(in_flight.last_stage - 1) * loss_bytes;

  // ---- Buffers.
  const double vocab_shard = double(PaddedVocab(model, plan.tp) / plan.tp) * model.hidden;
  const double block_params = double(BlockParamsPerTpRank(model, plan.tp));
  // ZeRO-3 / FSDP units: each block, the embedding, the final norm + lm_head.
  const double head_unit = double(stage_params.final_norm + stage_params.lm_head);
  const double largest_unit =
      std::max({stage_layers > 1 ? block_params : 0.0, double(stage_params.embedding), head_unit});
  // Gathered: the unit computing now and the prefetched next one, in the param dtype.
  const double gathered = zero == 3 ? bytes.param * (block_params + largest_unit) : 0.0;
  const double full_grads_bytes = rank_params * bytes.grad;
  double comm_backward = 0;
  if (zero == 3) {
    comm_backward = bytes.grad * largest_unit;  // a unit's full gradient before reduce-scatter
  } else if (weight_replicas > 1) {
    comm_backward = std::min(options.ddp_bucket_bytes, full_grads_bytes);  // one grad bucket
  }
  if (plan.cp > 1) {  // ring attention: the K and V chunks being sent and received
    comm_backward += 2.0 * 2.0 * double(shape.b) * shape.s_local * shape.kv_heads * shape.head_dim *
                     shape.act_bytes;
  }
  // ZeRO-1/2 all-gather the updated parameters after the step, bucket by bucket.
  const double comm_optimizer = (zero == 1 || zero == 2)
                                    ? std::min(options.ddp_bucket_bytes, rank_params * bytes.param)
                                    : 0.0;
  // A weight's new gradient before it is added into .grad (ZeRO-0..2; under ZeRO-3 it
  // is written into the unit's full gradient, counted in comm_backward).
  auto weight_grad_temp = [&](double elements) { return zero == 3 ? 0.0 : elements * bytes.grad; };

  // ---- Phases.
  Phase phases[5];
  int num_phases = 0;
  {  // Start of the backward of the last micro-batch: the stage's last block.
    Phase p{"layer_backward"};
    p.activations_bytes = activations;
    p.logits_bytes = logits_but_current;
    p.comm_buffer_bytes = comm_backward;
    p.gathered_params_bytes = gathered;
    p.transient_bytes = BlockRecomputedTensors(model, shape, impl, plan.recompute).TotalBytes() +
                        BlockBackwardWorkspace(model, shape, impl).TotalBytes() +
                        weight_grad_temp(LargestBlockMatrix(model, plan.tp));
    phases[num_phases++] = p;
  }
  if (last) {
    Phase ce{"cross_entropy"};
    ce.activations_bytes = activations;
    ce.logits_bytes = logits_all;
    ce.comm_buffer_bytes = comm_backward;
    ce.gathered_params_bytes = gathered;
    ce.transient_bytes = LossBackwardWorkspace(shape).TotalBytes();
    phases[num_phases++] = ce;

    Phase head{"head_backward"};
    head.activations_bytes = activations;
    head.logits_bytes = logits_but_current;
    head.comm_buffer_bytes = comm_backward;
    head.gathered_params_bytes = gathered;
    const double grad_logits = double(shape.b) * shape.s_local * shape.vocab * shape.act_bytes;
    head.transient_bytes = grad_logits + weight_grad_temp(vocab_shard);
    phases[num_phases++] = head;
  }
  if (first) {  // the micro-batch's blocks are done; the others in flight remain
    Phase embed{"embed_backward"};
    const double chunk = 1.0 / double(plan.virtual_stages);
    embed.activations_bytes = std::max(0.0, in_flight.blocks - chunk) * stage_activations_per_mb +
                              double(in_flight.first_stage - 1) * first_bytes +
                              (last ? double(in_flight.last_stage - 1) * last_bytes : 0.0);
    embed.logits_bytes = logits_but_current;
    embed.comm_buffer_bytes = comm_backward;
    embed.gathered_params_bytes = zero == 3 ? bytes.param * largest_unit : 0.0;
    embed.transient_bytes = weight_grad_temp(vocab_shard);  // dense embedding gradient
    phases[num_phases++] = embed;
  }
  {  // AdamW, parameter by parameter: sqrt(v) and its scaled copy (+ fp32 grad for mixed).
    Phase opt{"optimizer"};
    double largest = LargestBlockMatrix(model, plan.tp);
    if (stage_params.embedding > 0 || stage_params.lm_head > 0)
      largest = std::max(largest, vocab_shard);
    if (zero >= 1) largest /= double(weight_replicas);
    opt.comm_buffer_bytes = comm_optimizer;
    opt.transient_bytes =
        largest * (2.0 * bytes.state + (training.precision == Precision::kMixed ? 4.0 : 0.0));
    phases[num_phases++] = opt;
  }

  const Phase* peak =
      std::max_element(phases, phases + num_phases,
                       [](const Phase& a, const Phase& b) { return a.sum() < b.sum(); });
  MemoryBreakdown out;
  out.params_bytes = states.params_bytes;
  out.grads_bytes = states.grads_bytes;
  out.optimizer_bytes = states.optimizer_bytes;
  out.activations_bytes = peak->activations_bytes;
  out.logits_bytes = peak->logits_bytes;
  out.comm_buffer_bytes = peak->comm_buffer_bytes;
  out.gathered_params_bytes = peak->gathered_params_bytes;
  out.transient_bytes = peak->transient_bytes;
  out.total_bytes = states.total() + peak->sum();
  out.peak_phase = peak->name;
  out.worst_stage = stage;
  return out;
}

}  // namespace meshplan
