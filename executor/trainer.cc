// One rank's training step (see trainer.h). Local tensor handles are scoped so that the
// end of a ParamsLease and GradReady really free what they release: a view kept alive
// here would keep a gathered parameter group or a full gradient allocated.
// ZeRO-3 prefetch (executor/parallel/zero_engine.h PrefetchAhead): each pass of a chunk, as it
// starts computing a group (right after acquiring it), prefetches the plan's `prefetch`
// groups that pass acquires next (0: none, each gathers when it starts): forward embedding ->
// block 0 -> ... -> head, backward head -> last block -> ... -> block 0 (the embedding
// backward reads no parameters: nothing is prefetched for it).
// Every prefetch is acquired within the same pass, so none is left in flight between the
// items of a pipeline schedule, and every rank of the dp x cp group, running the same
// pass, issues the same all-gathers in the same order.
#include "executor/trainer.h"

#include <cmath>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "executor/model/precision_dtypes.h"
#include "executor/parallel/context_split.h"

namespace meshplan {

namespace {

AdamWOptions AdamWFor(const TrainingSpec& training) {
  AdamWOptions options;
  options.lr = training.learning_rate;
  return options;
}

int64_t ChunksPerRank(const ParallelPlan& plan) {
  if (plan.pp == 1) return 1;
  return plan.schedule == PipelineSchedule::kInterleaved ? std::max<int64_t>(1, plan.virtual_stages)
                                                         : 1;
}

}  // namespace

Trainer::Trainer(const ModelSpec& model, const TrainingSpec& training, const DeviceMesh& mesh,
                 const TokenSource& data, uint64_t seed, MemoryProbe* probe, at::Device device)
    : spec_(model),
      training_(training),
      plan_(mesh.plan()),
      mesh_(mesh),
      dp_(mesh.comm(MeshDim::kDp)),
      pp_(mesh.comm(MeshDim::kPp)),
      chunks_per_rank_(ChunksPerRank(mesh.plan())),
      data_(data),
      probe_(probe),
      activations_(at::TensorOptions().dtype(DtypesFor(training.precision).compute).device(device)),
      shard_{training.global_batch, dp_.rank(), dp_.size(), plan_.micro_batch},
      model_(model, training.seq_len,
             TpConfig{&mesh.comm(MeshDim::kTp), plan_.sequence_parallel}, activations_,
             ExecutorAttention(device, training.precision)),
      engine_(BuildParamLayout(model, mesh.weight_replicas().size(),
                               PipelineRankChunks(model, SplitLayers(model.layers, plan_),
                                                  chunks_per_rank_, pp_.rank()),
                               TpShard{mesh.size(MeshDim::kTp), mesh.coord(MeshDim::kTp)},
                               ExpertShard{mesh.ep_size(), mesh.expert_parallel().rank(),
                                           mesh.expert_weight_replicas().size()}),
              plan_.zero_stage, mesh.weight_replicas(), AdamWFor(training), seed,
              training.precision, device, &mesh.expert_weight_replicas(), plan_.offload_optimizer),
      timer_(device) {
  engine_.set_prefetch_depth(plan_.zero3_prefetch);
  model_.UseContextParallel(mesh.comm(MeshDim::kCp));  // cp = 1: nothing changes
  if (model.moe.enabled()) model_.UseMoe(training.moe_aux_loss_coef, &mesh.expert_parallel());
  if (plan_.interleaved() && shard_.microbatches() % plan_.pp != 0)
    throw std::invalid_argument("Trainer: the interleaved schedule needs the micro-batch count (" +
                                std::to_string(shard_.microbatches()) +
                                ") to be a multiple of pp (" + std::to_string(plan_.pp) + ")");
  if (plan_.pp > 1 && model.tied_embeddings)
    throw std::invalid_argument(
        "Trainer: tied embeddings with pp > 1 (the embedding and the lm_head on different "
        "stages) are not supported; use an untied model or pp=1");
}

void Trainer::set_step(int64_t step) {
  step_ = step;
  engine_.set_optimizer_steps(step);
}

std::vector<int64_t> Trainer::BoundaryShape() const {
  // The residual stream between blocks: this cp rank's S/cp tokens, sequence-sharded over
  // tp with sp.
  const int64_t tokens = training_.seq_len / plan_.cp / (plan_.sequence_parallel ? plan_.tp : 1);
  return {plan_.micro_batch, tokens, spec_.hidden};
}

void Trainer::LoadTokens(int64_t microbatch, bool ids, bool targets, MicroBatch& mb) const {
  const at::Tensor tokens =  // (B, S+1), read on the host, then on the device
      MicroBatchTokens(data_, shard_, step_, microbatch).to(activations_.device());
  const int64_t S = training_.seq_len;
  // Context parallel: this cp rank keeps its zigzag chunks (B, S/cp) (context_split.h).
  const Communicator& cp = mesh_.comm(MeshDim::kCp);
  if (ids) mb.ids = SelectLocalTokens(tokens.narrow(1, 0, S).contiguous(), cp.size(), cp.rank());
  if (targets)
    mb.targets = SelectLocalTokens(tokens.narrow(1, 1, S).contiguous(), cp.size(), cp.rank());
}

// ---------------------------------------------------------------------------------------
// The step

StepLog Trainer::Step() { return plan_.pp > 1 ? PipelineStep() : SingleStageStep(); }

StepLog Trainer::SingleStageStep() {
  StepLog log;
  timer_.Start();
  const int64_t count = shard_.microbatches();
  const ChunkGroups& chunk = engine_.layout().chunks.front();
  engine_.BeginStep(count);
  // Summed on the device (in fp64, as the host would): one host sync per step, not one
  // per micro-batch.
  at::Tensor loss_sum = at::zeros({}, activations_.dtype(at::kDouble));
  std::vector<std::pair<int64_t, at::Tensor>> losses;  // per micro-batch, for a NaN's origin
  for (int64_t i = 0; i < count; ++i) {
    MicroBatch mb;
    LoadTokens(i, true, true, mb);
    BeginPhase();
    at::Tensor loss;
    ForwardChunk(chunk, mb, {}, &loss);
    loss_sum.add_(loss);
    losses.emplace_back(i, loss);
    EndPhase("forward", log);
    BackwardChunk(chunk, mb, {}, 1.0 / static_cast<double>(count));
    engine_.EndBackward();
    EndPhase("backward", log);
  }
  // The global-batch loss: the mean over micro-batches, cp ranks (each the mean over its
  // S/cp tokens) and dp ranks (equal token counts): one all-reduce over the dp x cp group.
  const double local_sum = loss_sum.item<double>();
  if (!std::isfinite(local_sum)) log.first_nonfinite_microbatch = FirstNonFinite(losses);
  at::Tensor loss = at::full({1}, local_sum / static_cast<double>(count), at::kDouble);
  Communicator& replicas = mesh_.weight_replicas();
  replicas.AllReduceSum(loss);
  log.loss = loss.item<double>() / static_cast<double>(replicas.size());
  engine_.Step();
  log.time_s = timer_.Stop();  // CUDA: waits for the step's last kernel
  EndPhase("optimizer", log);
  log.step = ++step_;
  return log;
}

int64_t Trainer::FirstNonFinite(const std::vector<std::pair<int64_t, at::Tensor>>& losses) {
  for (const auto& [microbatch, loss] : losses)
    if (!std::isfinite(loss.item<double>())) return microbatch;
  return -1;
}

// ---------------------------------------------------------------------------------------
// Forward of one chunk: [embedding ->] blocks [-> head (final norm, lm_head, cross-entropy)].

at::Tensor Trainer::ForwardChunk(const ChunkGroups& chunk, MicroBatch& mb, at::Tensor x,
                                 at::Tensor* loss) {
  const ParamLayout& layout = engine_.layout();
  const int emb = layout.embedding_group, head = chunk.head_group;
  // The groups this forward acquires, in order: [embedding,] blocks[, head].
  std::vector<int> order;
  if (chunk.embedding_group >= 0) order.push_back(emb);
  for (int64_t i = 0; i < chunk.num_blocks; ++i)
    order.push_back(chunk.first_block_group + static_cast<int>(i));
  if (head >= 0) order.push_back(head);
  size_t at = 0;  // the position of the group computed now
  if (chunk.embedding_group >= 0) {
    const ParamsLease params = engine_.LeaseParams(emb);
    engine_.PrefetchAhead(order, at++);
    x = model_.EmbeddingForward(mb.ids, SlotView(params.params(), layout.groups[emb].slot("wte")));
  }

  // every:N checkpoints by the block's position among the rank's blocks (BlockRecompute).
  int64_t first_ordinal = 0;
  for (const ChunkGroups& c : layout.chunks) {
    if (&c == &chunk) break;
    first_ordinal += c.num_blocks;
  }
  mb.blocks.resize(static_cast<size_t>(chunk.num_blocks));
  for (int64_t i = 0; i < chunk.num_blocks; ++i) {
    const int g = chunk.first_block_group + static_cast<int>(i);
    const ParamsLease params = engine_.LeaseParams(g);
    BlockWeights w = BlockViews(layout.groups[g], params.params());
    const ParamsLease experts = LeaseExperts(g, w);
    engine_.PrefetchAhead(order, at++);
    x = model_.BlockForward(w, x, BlockRecompute(plan_.recompute, first_ordinal + i),
                            &mb.blocks[static_cast<size_t>(i)]);
  }
  if (head < 0) return x;

  // The head (and a tied embedding) stays leased by the micro-batch until its backward.
  const ParamGroup& hg = layout.groups[head];
  mb.head_params = engine_.LeaseParams(head);
  if (spec_.tied_embeddings) mb.tied_embedding_params = engine_.LeaseParams(emb);
  const at::Tensor& hp = mb.head_params.params();
  const at::Tensor lm_head =
      spec_.tied_embeddings
          ? SlotView(mb.tied_embedding_params.params(), layout.groups[emb].slot("wte"))
          : SlotView(hp, hg.slot("lm_head"));
  *loss = model_.HeadForward(SlotView(hp, hg.slot("final_norm")), lm_head, x, mb.targets, &mb.head);
  return {};
}

// ---------------------------------------------------------------------------------------
// Backward of one chunk: [head ->] blocks in reverse [-> embedding]; each group's gradient
// is handed to the engine (its all-reduce / reduce-scatter starts) as soon as it is complete.

at::Tensor Trainer::BackwardChunk(const ChunkGroups& chunk, MicroBatch& mb, at::Tensor dy,
                                  double dloss) {
  const ParamLayout& layout = engine_.layout();
  const int emb = layout.embedding_group, head = chunk.head_group;
  // The groups this backward acquires, in order: [head,] blocks last to first.
  std::vector<int> order;
  if (head >= 0) order.push_back(head);
  for (int64_t i = chunk.num_blocks - 1; i >= 0; --i)
    order.push_back(chunk.first_block_group + static_cast<int>(i));
  size_t at = 0;  // the position of the group computed now
  at::Tensor dx = std::move(dy);
  if (head >= 0) {
    const ParamGroup& hg = layout.groups[head];
    {
      const at::Tensor& hp = mb.head_params.params();  // leased since the forward
      engine_.PrefetchAhead(order, at++);
      const at::Tensor hgrad = engine_.GradBuffer(head);
      at::Tensor dfinal = SlotView(hgrad, hg.slot("final_norm"));
      at::Tensor lm_head, dlm_head;
      if (spec_.tied_embeddings) {
        const ParamSlot& wte = layout.groups[emb].slot("wte");
        lm_head = SlotView(mb.tied_embedding_params.params(), wte);
        dlm_head = SlotView(engine_.GradBuffer(emb), wte);
      } else {
        lm_head = SlotView(hp, hg.slot("lm_head"));
        dlm_head = SlotView(hgrad, hg.slot("lm_head"));
      }
      dx = model_.HeadBackward(SlotView(hp, hg.slot("final_norm")), lm_head, dfinal, dlm_head,
                               dloss, std::move(mb.head));
    }
    mb.head_params.reset();
    mb.tied_embedding_params.reset();
    engine_.GradReady(head);
  }

  for (int64_t i = chunk.num_blocks - 1; i >= 0; --i) {
    const int g = chunk.first_block_group + static_cast<int>(i);
    {
      const ParamsLease params = engine_.LeaseParams(g);
      BlockWeights w = BlockViews(layout.groups[g], params.params());
      const ParamsLease experts = LeaseExperts(g, w);
      engine_.PrefetchAhead(order, at++);
      BlockWeights dw = BlockViews(layout.groups[g], engine_.GradBuffer(g));
      const int eg = layout.groups[g].experts_group;
      if (eg >= 0) ExpertViews(layout.groups[eg], engine_.GradBuffer(eg), dw);
      dx = model_.BlockBackward(w, dw, std::move(dx),
                                 std::move(mb.blocks[static_cast<size_t>(i)]), dloss);
    }
    const int eg = layout.groups[g].experts_group;
    if (eg >= 0) engine_.GradReady(eg);
    engine_.GradReady(g);
  }
  if (chunk.embedding_group < 0) return dx;

  {
    at::Tensor dwte = SlotView(engine_.GradBuffer(emb), layout.groups[emb].slot("wte"));
    model_.EmbeddingBackward(dx, mb.ids, dwte);
  }
  dx.reset();
  engine_.GradReady(emb);
  return {};
}

ParamsLease Trainer::LeaseExperts(int block_group, BlockWeights& w) {
  const ParamLayout& layout = engine_.layout();
  const int eg = layout.groups[static_cast<size_t>(block_group)].experts_group;
  if (eg < 0) return {};
  ParamsLease lease = engine_.LeaseParams(eg);
  ExpertViews(layout.groups[static_cast<size_t>(eg)], lease.params(), w);
  return lease;
}

// ---------------------------------------------------------------------------------------
// Memory per phase

void Trainer::BeginPhase() {
  if (probe_ != nullptr) probe_->ResetPeak();
}

void Trainer::EndPhase(const char* phase, StepLog& log) {
  if (probe_ == nullptr) return;
  const int64_t peak = probe_->peak_bytes();
  log.peak_reserved_bytes = std::max(log.peak_reserved_bytes, probe_->peak_reserved_bytes());
  probe_->ResetPeak();
  auto it = std::find_if(log.phase_peaks.begin(), log.phase_peaks.end(),
                         [&](const PhasePeak& p) { return p.phase == phase; });
  if (it == log.phase_peaks.end()) log.phase_peaks.push_back({phase, peak});
  else it->peak_bytes = std::max(it->peak_bytes, peak);
  log.peak_bytes = std::max(log.peak_bytes, peak);
}

}  // namespace meshplan
