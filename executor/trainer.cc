// One rank's training step (see trainer.h). Local tensor handles are scoped so that the
// engine's ReleaseParams / GradReady really free what they release: a view kept alive
// here would keep a gathered parameter group or a full gradient allocated.
#include "executor/trainer.h"

#include <algorithm>
#include <utility>

#include "executor/context_split.h"

namespace meshplan {

namespace {

AdamWOptions AdamWFor(const TrainingSpec& training) {
  AdamWOptions options;
  options.lr = training.learning_rate;
  return options;
}

}  // namespace

Trainer::Trainer(const ModelSpec& model, const TrainingSpec& training, const DeviceMesh& mesh,
                 const TokenSource& data, uint64_t seed, MemoryProbe* probe)
    : spec_(model),
      training_(training),
      plan_(mesh.plan()),
      mesh_(mesh),
      dp_(mesh.comm(MeshDim::kDp)),
      data_(data),
      probe_(probe),
      shard_{training.global_batch, dp_.rank(), dp_.size(), plan_.micro_batch},
      model_(model, training.seq_len,
             TpConfig{&mesh.comm(MeshDim::kTp), plan_.sequence_parallel}),
      engine_(BuildParamLayout(model, mesh.weight_replicas().size(), StageRange{},
                               TpShard{mesh.size(MeshDim::kTp), mesh.coord(MeshDim::kTp)}),
              plan_.zero_stage, mesh.weight_replicas(), AdamWFor(training), seed) {
  model_.UseContextParallel(mesh.comm(MeshDim::kCp));  // cp = 1: nothing changes
}

void Trainer::set_step(int64_t step) {
  step_ = step;
  engine_.set_optimizer_steps(step);
}

// ---------------------------------------------------------------------------------------
// The step

StepLog Trainer::Step() {
  StepLog log;
  timer_.Start();
  const int64_t count = shard_.microbatches();
  double loss_sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    MicroBatch mb;
    {
      const at::Tensor tokens = MicroBatchTokens(data_, shard_, step_, i);  // (B, S+1)
      const int64_t S = training_.seq_len;
      // Context parallel: this cp rank keeps its zigzag chunks (B, S/cp) of both.
      const Communicator& cp = mesh_.comm(MeshDim::kCp);
      mb.ids = SelectLocalTokens(tokens.narrow(1, 0, S).contiguous(), cp.size(), cp.rank());
      mb.targets = SelectLocalTokens(tokens.narrow(1, 1, S).contiguous(), cp.size(), cp.rank());
    }
    engine_.BeginMicrobatch(i, count);
    BeginPhase();
    loss_sum += Forward(mb);
    EndPhase("forward", log);
    Backward(mb, 1.0 / static_cast<double>(count));
    engine_.EndMicrobatch();
    EndPhase("backward", log);
  }
  // The global-batch loss: the mean over micro-batches, cp ranks (each the mean over its
  // S/cp tokens) and dp ranks (equal token counts): one all-reduce over the dp x cp group.
  at::Tensor loss = at::full({1}, loss_sum / static_cast<double>(count), at::kDouble);
  Communicator& replicas = mesh_.weight_replicas();
  replicas.AllReduceSum(loss);
  log.loss = loss.item<double>() / static_cast<double>(replicas.size());
  engine_.Step();
  log.time_s = timer_.Stop();  // CPU ops are synchronous; CUDA will synchronise first
  EndPhase("optimizer", log);
  log.step = ++step_;
  return log;
}

// ---------------------------------------------------------------------------------------
// Forward: embedding -> blocks -> head (final norm, lm_head, cross-entropy).

double Trainer::Forward(MicroBatch& mb) {
  const ParamLayout& layout = engine_.layout();
  const int emb = layout.embedding_group, head = layout.head_group;
  at::Tensor x;
  {
    const at::Tensor params = engine_.AcquireParams(emb);
    x = model_.EmbeddingForward(mb.ids, SlotView(params, layout.groups[emb].slot("wte")));
  }
  engine_.ReleaseParams(emb);

  mb.blocks.resize(static_cast<size_t>(layout.num_blocks));
  for (int64_t i = 0; i < layout.num_blocks; ++i) {
    const int g = layout.first_block_group + static_cast<int>(i);
    {
      const BlockWeights w = BlockViews(layout.groups[g], engine_.AcquireParams(g));
      x = model_.BlockForward(w, x, plan_.recompute, &mb.blocks[static_cast<size_t>(i)]);
    }
    engine_.ReleaseParams(g);
  }

  // The head (and a tied embedding) stays acquired until its backward.
  const ParamGroup& hg = layout.groups[head];
  const at::Tensor hp = engine_.AcquireParams(head);
  const at::Tensor lm_head = spec_.tied_embeddings
                                 ? SlotView(engine_.AcquireParams(emb), layout.groups[emb].slot("wte"))
                                 : SlotView(hp, hg.slot("lm_head"));
  const at::Tensor loss =
      model_.HeadForward(SlotView(hp, hg.slot("final_norm")), lm_head, x, mb.targets, &mb.head);
  return loss.item<double>();
}

// ---------------------------------------------------------------------------------------
// Backward: head -> blocks in reverse -> embedding; each group's gradient is handed to the
// engine (its all-reduce / reduce-scatter starts) as soon as it is complete.

void Trainer::Backward(MicroBatch& mb, double dloss) {
  const ParamLayout& layout = engine_.layout();
  const int emb = layout.embedding_group, head = layout.head_group;
  const ParamGroup& hg = layout.groups[head];
  const ParamSlot& wte = layout.groups[emb].slot("wte");
  at::Tensor dx;
  {
    // Still acquired since the forward.
    const at::Tensor hp = engine_.AcquireParams(head);
    const at::Tensor hgrad = engine_.GradBuffer(head);
    at::Tensor dfinal = SlotView(hgrad, hg.slot("final_norm"));
    at::Tensor lm_head, dlm_head;
    if (spec_.tied_embeddings) {
      lm_head = SlotView(engine_.AcquireParams(emb), wte);
      dlm_head = SlotView(engine_.GradBuffer(emb), wte);
    } else {
      lm_head = SlotView(hp, hg.slot("lm_head"));
      dlm_head = SlotView(hgrad, hg.slot("lm_head"));
    }
    dx = model_.HeadBackward(SlotView(hp, hg.slot("final_norm")), lm_head, dfinal, dlm_head,
                             dloss, std::move(mb.head));
  }
  for (int k = 0; k < 2; ++k) engine_.ReleaseParams(head);  // this acquire and the forward's
  if (spec_.tied_embeddings)
    for (int k = 0; k < 2; ++k) engine_.ReleaseParams(emb);
  engine_.GradReady(head);

  for (int64_t i = layout.num_blocks - 1; i >= 0; --i) {
    const int g = layout.first_block_group + static_cast<int>(i);
    {
      const BlockWeights w = BlockViews(layout.groups[g], engine_.AcquireParams(g));
      BlockWeights dw = BlockViews(layout.groups[g], engine_.GradBuffer(g));
      dx = model_.BlockBackward(w, dw, std::move(dx),
                                 std::move(mb.blocks[static_cast<size_t>(i)]));
    }
    engine_.ReleaseParams(g);
    engine_.GradReady(g);
  }

  {
    at::Tensor dwte = SlotView(engine_.GradBuffer(emb), wte);
    model_.EmbeddingBackward(dx, mb.ids, dwte);
  }
  dx.reset();
  engine_.GradReady(emb);
}

// ---------------------------------------------------------------------------------------
// Memory per phase

void Trainer::BeginPhase() {
  if (probe_ != nullptr) probe_->ResetPeak();
}

void Trainer::EndPhase(const char* phase, StepLog& log) {
  if (probe_ == nullptr) return;
  const int64_t peak = probe_->peak_bytes();
  probe_->ResetPeak();
  auto it = std::find_if(log.phase_peaks.begin(), log.phase_peaks.end(),
                         [&](const PhasePeak& p) { return p.phase == phase; });
  if (it == log.phase_peaks.end()) log.phase_peaks.push_back({phase, peak});
  else it->peak_bytes = std::max(it->peak_bytes, peak);
  log.peak_bytes = std::max(log.peak_bytes, peak);
}

}  // namespace meshplan
