#include "simulator/step_graph.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "planner/checked_math.h"
#include "planner/cost/flops.h"
#include "planner/cost/step_time.h"
#include "planner/limits.h"
#include "planner/pipeline_schedule.h"

namespace meshplan {

const char* ToString(SimStream stream) {
  constexpr const char* kNames[] = {"compute", "dp", "pp", "cp", "tp", "ep"};
  return kNames[static_cast<int>(stream)];
}

SimStream StreamOf(MeshDim dim) {
  switch (dim) {
    case MeshDim::kDp: return SimStream::kDp;
    case MeshDim::kPp: return SimStream::kPp;
    case MeshDim::kCp: return SimStream::kCp;
    case MeshDim::kTp: return SimStream::kTp;
    case MeshDim::kEp: return SimStream::kEp;
  }
  return SimStream::kDp;
}

MeshDim DimOf(SimStream stream) {
  switch (stream) {
    case SimStream::kPp: return MeshDim::kPp;
    case SimStream::kCp: return MeshDim::kCp;
    case SimStream::kTp: return MeshDim::kTp;
    case SimStream::kEp: return MeshDim::kEp;
    default: return MeshDim::kDp;
  }
}

const char* ToString(SimOpKind kind) {
  switch (kind) {
    case SimOpKind::kForward: return "forward";
    case SimOpKind::kBackward: return "backward";
    case SimOpKind::kBackwardInput: return "backward_input";
    case SimOpKind::kBackwardWeight: return "backward_weight";
    case SimOpKind::kRecompute: return "recompute";
    case SimOpKind::kOptimizer: return "optimizer";
    case SimOpKind::kCollective: return "collective";
    case SimOpKind::kSendRecv: return "send_recv";
  }
  return "?";
}

namespace {

constexpr int32_t kNone = -1;

ComputeTime Sum(const ComputeTime& a, const ComputeTime& b) {
  return {a.matmul_s + b.matmul_s, a.attention_s + b.attention_s, a.memory_s + b.memory_s,
          a.overhead_s + b.overhead_s};
}

// Share of a block's non-core work that belongs to the attention sublayer, by matmul
// weights (Q, K, V, O against the whole block): places the TP collectives only.
double AttentionShare(const ModelSpec& model) {
  const double all = static_cast<double>(BlockMatmulParams(model));
  return all > 0 ? static_cast<double>(AttentionMatmulParams(model)) / all : 0.5;
}

// One pass of one part on one micro-batch, in a stage's issue order.
struct PartRun {
  SimPart part = SimPart::kBlock;
  int32_t layer = -1;
  int32_t ordinal = -1;  // a block's position among its rank's blocks (over its chunks)
  int32_t microbatch = 0;
  int16_t chunk = 0;
  int32_t virtual_stage = 0;
  PipelinePass pass = PipelinePass::kForward;
  bool first_of_item = false;  // first part of its schedule item (receives)
  bool last_of_item = false;   // last part of its schedule item (sends)
  bool grads_final = false;    // its gradients are complete after this run (per-step syncs)
  int32_t input_pass = -1;     // zb_h1 W runs: the index of the B run of the same part
  bool backward() const { return pass == PipelinePass::kBackward; }
  // Where the part's gradients come out: B, or W when the schedule splits them off.
  bool makes_grads(bool split_w) const {
    return pass == (split_w ? PipelinePass::kWeight : PipelinePass::kBackward);
  }
};

// A pass's compute: its time by kernel class and its FLOPs.
struct PassWork {
  ComputeTime time;
  double matmul_flops = 0;
  double attention_flops = 0;
};

class GraphBuilder {
 public:
  GraphBuilder(const StepWork& work, const ModelSpec& model, const ClusterSpec& cluster,
               Precision precision)
      : work_(work), cluster_(cluster), rates_(RatesFor(cluster.gpu, precision, work.calibration)),
        attention_share_(AttentionShare(model)) {}

  StepGraph Build();

 private:
  // Per simulated rank while its program is built.
  struct RankState {
    int32_t rank = 0;
    int32_t critical = kNone;       // last op on the data path
    std::vector<int32_t> joins;     // the next compute op waits for these
    std::vector<int32_t> deferred;  // overlapped TP ops of the current pass
    int32_t dp_tail = kNone;        // last op issued on the dp stream
    int32_t tied_source = kNone;    // tied-embedding gradient ready
    std::vector<int32_t> input_end;  // per run: the last op of a B run (zb_h1 W waits for it)
    std::vector<std::pair<SimPart, int32_t>> optimizer_order;  // part, layer
    // dp_overlap=0: the gradient syncs, issued after the stage's last backward.
    std::vector<std::pair<PartRun, const Collective*>> held_syncs;
  };

  const PartWork& Part(SimPart part) const {
    return part == SimPart::kEmbedding ? work_.embedding
           : part == SimPart::kHead    ? work_.head
                                       : work_.block;
  }
  int32_t NewOp(const SimOp& op) {
    if (static_cast<int64_t>(ops_.size()) >= kMaxSimOps)  // op ids are int32_t: far below 2^31
      throw SimulationTooLarge(fmt::format(
          "simulating this step takes more than {} ops ({} micro-batches per pipeline stage); "
          "expected at most {} (kMaxSimOps, docs/limits.md)",
          kMaxSimOps, work_.micro_batches, kMaxSimOps));
    ops_.push_back(op);
    return static_cast<int32_t>(ops_.size() - 1);
  }
  void Edge(int32_t from, int32_t to) {
    if (from != kNone && from != to) edges_.push_back({from, to});
  }
  void Issue(int32_t id) {
    const SimOp& op = ops_[id];
    streams_[op.rank * kNumSimStreams + static_cast<int>(op.stream)].push_back(id);
  }
  int32_t& Send(PipelinePass pass, int32_t microbatch, int32_t virtual_stage) {
    const int64_t V = work_.pp * work_.virtual_stages;
    return sends_[static_cast<int>(pass)][microbatch * V + virtual_stage];
  }
  // The send op of (pass, micro-batch, virtual stage): reserved by whichever of sender
  // and receiver is built first, filled by the sender.
  int32_t SendId(PipelinePass pass, int32_t microbatch, int32_t virtual_stage) {
    int32_t& id = Send(pass, microbatch, virtual_stage);
    if (id == kNone) id = NewOp(SimOp{});
    return id;
  }

  std::vector<PartRun> StageRuns(int64_t stage) const;
  void BuildRank(RankState& rank, const std::vector<PartRun>& runs);
  int32_t EmitGradSync(RankState& rank, const PartRun& run, const Collective& c, int32_t after);
  void RunPart(RankState& rank, const std::vector<PartRun>& runs, size_t k,
               std::vector<int32_t>& gathers);
  void EmitPass(RankState& rank, const PartRun& run, StepPhase phase);
  void EmitCollectivesAt(RankState& rank, const PartRun& run, StepPhase phase,
                         CollectivePosition position, int32_t pass_start);
  void EmitAttention(RankState& rank, const PartRun& run, StepPhase phase, const PassWork& w,
                     double lin_s, SimOpKind kind);
  int32_t EmitCompute(RankState& rank, const PartRun& run, SimOpKind kind, SimPiece piece,
                      double duration_s, double flops, bool force = false);
  int32_t NewComm(const RankState& rank, const PartRun* run, const Collective& c,
                  const Transfer& transfer, SimOpKind kind);
  int32_t IssueDpCollectives(RankState& rank, const PartRun& run, int32_t after,
                             CollectivePosition position, std::optional<StepPhase> phase);
  int32_t IssueGather(RankState& rank, const PartRun& run, int32_t after);
  int32_t IssueParamGather(RankState& rank, const PartRun& run, int32_t after);
  void EmitSend(RankState& rank, const PartRun& run);
  void EmitTiedSync();
  void EmitOptimizer(RankState& rank);
  PassWork WorkOf(const PartWork& part, StepPhase phase) const;
  // Whether the run's backward replays its forward first: every:N on its checkpointed
  // blocks only (BlockRecompute), the other policies on every part but under none.
  bool Replays(const PartRun& run) const {
    if (work_.recompute.kind != Recompute::kEvery) return work_.recompute != Recompute::kNone;
    return run.part == SimPart::kBlock && BlockRecompute(work_.recompute, run.ordinal) == Recompute::kFull;
  }

  const StepWork& work_;
  const ClusterSpec& cluster_;
  const ComputeRates rates_;
  const double attention_share_;
  bool split_w_ = false;
  bool gathers_ = false;  // ZeRO-3 gathers blocks' parameters before each pass
  // ZeRO-1/2 with StepWork::param_gather_in_forward and dp_overlap: the updated parameters'
  // all-gathers (kAfterOptimizer) run before each part's first forward of the step instead
  // of after the optimizer, the next one issued as a part starts.
  bool param_gathers_ = false;
  std::vector<size_t> next_first_forward_;  // per run: the next run that is a first forward

  std::vector<SimOp> ops_;
  std::vector<std::pair<int32_t, int32_t>> edges_;  // (from, to)
  std::vector<std::vector<int32_t>> streams_;
  std::vector<int32_t> sends_[2];
  std::vector<int64_t> global_rank_;
  std::vector<RankState> ranks_;
};

PassWork GraphBuilder::WorkOf(const PartWork& part, StepPhase phase) const {
  PassWork w;
  double column_gemms_s = 0;  // the backward's column-parallel GEMMs (ColumnGemmSeconds)
  auto add = [&](const ComputeWork& c) {
    const ComputeTime time = TimeOf(c, rates_);
    w.time = Sum(w.time, time);
    column_gemms_s += ColumnGemmSeconds(c, time);
    w.matmul_flops += c.matmul_flops;
    w.attention_flops += c.attention_flops;
  };
  switch (phase) {
    case StepPhase::kForward: add(part.forward); break;
    case StepPhase::kRecompute: add(RecomputeWork(part, work_.recompute)); break;
    case StepPhase::kBackward:
      add(part.backward_input);
      if (!split_w_) add(part.backward_weight);
      break;
    case StepPhase::kOptimizer: break;
  }
  // tp_overlap: the pass runs slower beside its TP communication (planner/cost/step_time.h).
  const double stretch = OverlapStretch(work_, part, phase, cluster_.gpu);
  if (stretch != 1) {
    w.time.matmul_s *= stretch;
    w.time.attention_s *= stretch;
    w.time.memory_s *= stretch;
    w.time.overhead_s *= stretch;
  }
  // Without it, the collectives the framework issues behind the column-parallel GEMMs slow
  // those GEMMs as the analytic model has it (TpBehindGemms); they run beside the pass.
  double comm_s = 0;
  for (const Collective& c : part.collectives)
    if (c.phase == phase && RunsBehindGemms(c, work_))
      comm_s += static_cast<double>(c.count) * CollectiveTime(c.kind, c.bytes, c.group, cluster_);
  if (comm_s > 0)
    w.time.matmul_s +=
        TpBehindGemms(comm_s, column_gemms_s, cluster_.gpu.comm_overlap_slowdown).slowed;
  return w;
}

std::vector<PartRun> GraphBuilder::StageRuns(int64_t stage) const {
  const int64_t pp = work_.pp, v = std::max<int64_t>(work_.virtual_stages, 1);
  const int64_t V = pp * v;
  const int64_t m = work_.micro_batches;
  // The blocks of each chunk (planner/stage_layers.h: uneven ends give up their end chunks').
  const StageLayers& split = work_.stage_layers;
  // One stage has no pipeline: zb_h1 then runs W inside B like the others.
  const PipelineSchedule schedule =
      SplitsWeightGradients(work_.schedule) && !split_w_ ? PipelineSchedule::k1F1B : work_.schedule;
  const std::vector<ScheduleItem> order = StageOrder(schedule, pp, v, m, stage);

  // The gradients of a chunk are final after its last B (zb_h1: its last W).
  const PipelinePass grads_pass = split_w_ ? PipelinePass::kWeight : PipelinePass::kBackward;
  std::vector<size_t> last_grads(v, 0);
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i].pass == grads_pass) last_grads[order[i].chunk] = i;

  std::vector<PartRun> runs;
  runs.reserve(order.size() * (split.LargestChunkOf(stage) + 2));
  std::vector<size_t> input_items;  // first run of each B item, in B order
  size_t weights = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const ScheduleItem& item = order[i];
    const int64_t vs = item.chunk * pp + stage;
    PartRun base;
    base.microbatch = item.microbatch;
    base.chunk = static_cast<int16_t>(item.chunk);
    base.virtual_stage = static_cast<int32_t>(vs);
    base.pass = item.pass;
    base.grads_final = item.pass == grads_pass && last_grads[item.chunk] == i;
    const size_t begin = runs.size();
    auto push = [&](SimPart part, int64_t layer) {
      PartRun r = base;
      r.part = part;
      r.layer = static_cast<int32_t>(layer);
      runs.push_back(r);
    };
    const int64_t blocks = split.ChunkOf(stage, item.chunk);
    const int64_t first_layer = split.FirstBlockOfChunk(stage, item.chunk);
    int64_t first_ordinal = 0;  // the rank's blocks in its earlier chunks
    for (int64_t c = 0; c < item.chunk; ++c) first_ordinal += split.ChunkOf(stage, c);
    auto push_block = [&](int64_t j) {
      push(SimPart::kBlock, first_layer + j);
      runs.back().ordinal = static_cast<int32_t>(first_ordinal + j);
    };
    if (item.pass == PipelinePass::kForward) {
      if (vs == 0) push(SimPart::kEmbedding, -1);
      for (int64_t j = 0; j < blocks; ++j) push_block(j);
      if (vs == V - 1) push(SimPart::kHead, -1);
    } else {
      if (vs == V - 1) push(SimPart::kHead, -1);
      for (int64_t j = blocks - 1; j >= 0; --j) push_block(j);
      if (vs == 0) push(SimPart::kEmbedding, -1);
    }
    if (item.pass == PipelinePass::kBackward) input_items.push_back(begin);
    if (item.pass == PipelinePass::kWeight) {  // W items follow B items in the same order
      const size_t b = input_items[weights++];
      for (size_t j = begin; j < runs.size(); ++j)
        runs[j].input_pass = static_cast<int32_t>(b + (j - begin));
    }
    if (runs.size() > begin) {
      runs[begin].first_of_item = true;
      runs.back().last_of_item = true;
    }
  }
  return runs;
}

int32_t GraphBuilder::EmitCompute(RankState& rank, const PartRun& run, SimOpKind kind,
                                  SimPiece piece, double duration_s, double flops, bool force) {
  if (!(duration_s > 0) && !force) return kNone;
  SimOp op;
  op.duration_s = std::max(0.0, duration_s);
  op.flops = flops;
  op.rank = rank.rank;
  op.stream = SimStream::kCompute;
  op.kind = kind;
  op.part = run.part;
  op.piece = piece;
  op.layer = run.layer;
  op.microbatch = run.microbatch;
  op.chunk = run.chunk;
  const int32_t id = NewOp(op);
  Edge(rank.critical, id);
  for (int32_t j : rank.joins) Edge(j, id);
  rank.joins.clear();
  rank.critical = id;
  Issue(id);
  return id;
}

int32_t GraphBuilder::NewComm(const RankState& rank, const PartRun* run, const Collective& c,
                              const Transfer& transfer, SimOpKind kind) {
  SimOp op;
  op.transfer = transfer;
  op.buffer_bytes = c.bytes;
  op.rank = rank.rank;
  op.stream = StreamOf(c.dim);
  op.kind = kind;
  op.collective = c.kind;
  op.position = c.position;
  op.phase = c.phase;
  op.step = static_cast<int16_t>(c.count);
  if (run != nullptr) {
    op.part = run->part;
    op.layer = run->layer;
    op.microbatch = run->microbatch;
    op.chunk = run->chunk;
  }
  const int32_t id = NewOp(op);
  Issue(id);
  return id;
}

void GraphBuilder::EmitCollectivesAt(RankState& rank, const PartRun& run, StepPhase phase,
                                     CollectivePosition position, int32_t pass_start) {
  for (const Collective& c : Part(run.part).collectives) {
    if (c.phase != phase || c.position != position) continue;
    if (c.dim == MeshDim::kDp || c.dim == MeshDim::kPp) continue;  // part-level, see RunPart
    if (c.group.size() <= 1) continue;
    const Transfer t = CollectiveTransfer(c.kind, c.bytes, c.group, c.count, cluster_);
    const int32_t id = NewComm(rank, &run, c, t, SimOpKind::kCollective);
    if (c.overlappable) {  // beside the pass's compute; the next part waits for it
      Edge(pass_start, id);
      rank.deferred.push_back(id);
    } else {  // on the data path
      Edge(rank.critical, id);
      rank.critical = id;
    }
  }
}

// The attention sublayer of a block pass: its share of the non-core work, then the
// attention core (behind which CP's ring exchange runs, step by step).
void GraphBuilder::EmitAttention(RankState& rank, const PartRun& run, StepPhase phase,
                                 const PassWork& w, double lin_s, SimOpKind kind) {
  const double core_s = w.time.attention_s;
  const double lin_flops = attention_share_ * w.matmul_flops;
  const Collective* ring = nullptr;
  for (const Collective& c : Part(run.part).collectives)
    if (c.phase == phase && c.position == CollectivePosition::kDuringAttention &&
        c.group.size() > 1)
      ring = &c;
  if (ring == nullptr || !ring->overlappable || !(core_s > 0)) {
    if (ring != nullptr)
      EmitCollectivesAt(rank, run, phase, CollectivePosition::kDuringAttention, rank.critical);
    EmitCompute(rank, run, kind, SimPiece::kAttention, lin_s + core_s,
                lin_flops + w.attention_flops);
    return;
  }
  EmitCompute(rank, run, kind, SimPiece::kAttention, lin_s, lin_flops);
  // Ring attention over n ranks: n core steps, one per K/V chunk; the chunk of step j
  // arrives by exchange j (j >= 1), which runs while step j-1 computes.
  const int64_t n = ring->group.size();
  const Transfer whole = CollectiveTransfer(ring->kind, ring->bytes, ring->group, ring->count, cluster_);
  Transfer step = whole;
  step.latency_s = whole.latency_s / static_cast<double>(n - 1);
  step.bytes = whole.bytes / static_cast<double>(n - 1);
  step.link_bytes = whole.link_bytes / static_cast<double>(n - 1);
  const int32_t start = rank.critical;
  for (int64_t j = 0; j < n; ++j) {
    int32_t exchange = kNone;
    if (j > 0) {
      exchange = NewComm(rank, &run, *ring, step, SimOpKind::kCollective);
      ops_[exchange].step = static_cast<int16_t>(j);
      Edge(start, exchange);
    }
    const int32_t id = EmitCompute(rank, run, kind, SimPiece::kAttentionCore,
                                   core_s / static_cast<double>(n),
                                   w.attention_flops / static_cast<double>(n), true);
    ops_[id].step = static_cast<int16_t>(j);
    Edge(exchange, id);
  }
}

void GraphBuilder::EmitPass(RankState& rank, const PartRun& run, StepPhase phase) {
  const PassWork w = WorkOf(Part(run.part), phase);
  const SimOpKind kind = phase == StepPhase::kForward     ? SimOpKind::kForward
                         : phase == StepPhase::kRecompute ? SimOpKind::kRecompute
                         : split_w_                       ? SimOpKind::kBackwardInput
                                                          : SimOpKind::kBackward;
  const int32_t start = rank.critical;
  using P = CollectivePosition;
  auto at = [&](P position) { EmitCollectivesAt(rank, run, phase, position, start); };
  const double total_s = w.time.total();
  const double flops = w.matmul_flops + w.attention_flops;
  switch (run.part) {
    case SimPart::kBlock: {
      const double lin_s = total_s - w.time.attention_s;
      const double attention_lin_s = attention_share_ * lin_s;
      const double mlp_s = lin_s - attention_lin_s;
      const double mlp_flops = (1 - attention_share_) * w.matmul_flops;
      if (phase != StepPhase::kBackward) {
        at(P::kBeforeAttention);
        EmitAttention(rank, run, phase, w, attention_lin_s, kind);
        at(P::kAfterAttention);
        at(P::kBeforeMlp);
        at(P::kExpertDispatch);
        EmitCompute(rank, run, kind, SimPiece::kMlp, mlp_s, mlp_flops);
        at(P::kExpertCombine);
        at(P::kAfterMlp);
      } else {
        at(P::kBeforeMlp);
        at(P::kExpertCombine);  // the gradient goes back to the experts first
        EmitCompute(rank, run, kind, SimPiece::kMlp, mlp_s, mlp_flops);
        at(P::kExpertDispatch);
        at(P::kAfterMlp);
        at(P::kBeforeAttention);
        EmitAttention(rank, run, phase, w, attention_lin_s, kind);
        at(P::kAfterAttention);
      }
      break;
    }
    case SimPart::kEmbedding:
      if (phase == StepPhase::kBackward) at(P::kEmbeddingOutput);
      EmitCompute(rank, run, kind, SimPiece::kWhole, total_s, flops);
      if (phase == StepPhase::kForward) at(P::kEmbeddingOutput);
      break;
    case SimPart::kHead:
      if (phase == StepPhase::kForward) at(P::kLmHeadInput);
      EmitCompute(rank, run, kind, SimPiece::kWhole, total_s, flops);
      if (phase == StepPhase::kForward) at(P::kInLoss);
      if (phase == StepPhase::kBackward) at(P::kLmHeadInput);
      break;
    case SimPart::kStage:
      break;
  }
  // Overlapped TP communication of this pass: the next part's compute waits for it.
  rank.joins.insert(rank.joins.end(), rank.deferred.begin(), rank.deferred.end());
  rank.deferred.clear();
}

// Every DP collective of `run`'s part at `position` (and, when given, in `phase`) over more
// than one rank, issued after op `after`: the dense weights' and, with ep > 1, the routed
// experts' (their own group). They queue on the dp stream in order, so the last one issued
// ends last; returns it (kNone: none).
int32_t GraphBuilder::IssueDpCollectives(RankState& rank, const PartRun& run, int32_t after,
                                         CollectivePosition position,
                                         std::optional<StepPhase> phase) {
  int32_t last = kNone;
  for (const Collective& c : Part(run.part).collectives) {
    if (c.dim != MeshDim::kDp || c.position != position || (phase && c.phase != *phase) ||
        c.group.size() <= 1)
      continue;
    const Transfer t = CollectiveTransfer(c.kind, c.bytes, c.group, c.count, cluster_);
    last = NewComm(rank, &run, c, t, SimOpKind::kCollective);
    Edge(after, last);
  }
  return last;
}

// ZeRO-3: the all-gathers of `run`'s parameters for its pass, issued after op `after`.
int32_t GraphBuilder::IssueGather(RankState& rank, const PartRun& run, int32_t after) {
  if (run.pass == PipelinePass::kWeight) return kNone;
  const StepPhase phase = run.backward() ? StepPhase::kBackward : StepPhase::kForward;
  const int32_t id = IssueDpCollectives(rank, run, after, CollectivePosition::kBeforePart, phase);
  if (id != kNone) rank.dp_tail = id;
  return id;
}

// ZeRO-1/2 (param_gathers_): the all-gathers of `run`'s updated parameters, before its first
// forward of the step, issued after op `after`.
int32_t GraphBuilder::IssueParamGather(RankState& rank, const PartRun& run, int32_t after) {
  return IssueDpCollectives(rank, run, after, CollectivePosition::kAfterOptimizer, std::nullopt);
}

void GraphBuilder::EmitSend(RankState& rank, const PartRun& run) {
  const int64_t V = work_.pp * work_.virtual_stages;
  if (run.pass == PipelinePass::kWeight) return;
  const bool forward = run.pass == PipelinePass::kForward;
  const int32_t vs = run.virtual_stage;
  if (forward ? vs >= V - 1 : vs <= 0) return;
  const Collective& c = forward ? work_.pp_activation : work_.pp_gradient;
  const int64_t to = (forward ? vs + 1 : vs - 1) % work_.pp;
  Transfer t = SendTransfer(c.bytes, global_rank_[rank.rank], global_rank_[to], cluster_);
  // Megatron's scatter/gather: the receiver's tp all-gather rides with the send as fixed time.
  const Collective& regather = work_.pp_regather;
  t.latency_s += CollectiveTime(regather.kind, regather.bytes, regather.group, cluster_);
  const int32_t id = SendId(forward ? PipelinePass::kForward : PipelinePass::kBackward,
                            run.microbatch, vs);
  SimOp& op = ops_[id];
  op = SimOp{};
  op.transfer = t;
  op.buffer_bytes = c.bytes;
  op.rank = rank.rank;
  op.stream = SimStream::kPp;
  op.kind = SimOpKind::kSendRecv;
  op.collective = c.kind;
  op.position = c.position;
  op.phase = c.phase;
  op.part = run.part;
  op.microbatch = run.microbatch;
  op.chunk = run.chunk;
  op.step = 1;
  Issue(id);
  Edge(rank.critical, id);
  if (!c.overlappable) rank.critical = id;  // the sender waits for its send
}

void GraphBuilder::RunPart(RankState& rank, const std::vector<PartRun>& runs, size_t k,
                           std::vector<int32_t>& gathers) {
  const PartRun& run = runs[k];
  const PartWork& part = Part(run.part);
  const int64_t V = work_.pp * work_.virtual_stages;

  if (run.first_of_item && run.pass != PipelinePass::kWeight) {
    // Receive: the previous virtual stage's activation / the next one's gradient.
    const bool forward = run.pass == PipelinePass::kForward;
    const int32_t vs = run.virtual_stage;
    if (forward ? vs > 0 : vs < V - 1) {
      const int32_t recv = SendId(forward ? PipelinePass::kForward : PipelinePass::kBackward,
                                  run.microbatch, forward ? vs - 1 : vs + 1);
      if (rank.critical != kNone && !ops_[rank.critical].is_compute())
        rank.joins.push_back(rank.critical);
      rank.critical = recv;
    }
  }

  if (gathers_ && run.pass != PipelinePass::kWeight) {
    // Gather this part's parameters (unless prefetched) and prefetch the next
    // zero3_prefetch parts' (FSDP's limit is one), issued as this part starts.
    if (gathers[k] == kNone) gathers[k] = IssueGather(rank, run, rank.critical);
    // The next runs that gather (W runs and parts without parameters do not).
    int64_t ahead = 0;
    for (size_t next = k + 1; next < runs.size() && ahead < work_.zero3_prefetch; ++next) {
      if (runs[next].pass == PipelinePass::kWeight) continue;
      if (gathers[next] == kNone) gathers[next] = IssueGather(rank, runs[next], rank.critical);
      if (gathers[next] != kNone) ++ahead;
    }
    if (gathers[k] != kNone) rank.joins.push_back(gathers[k]);
  }
  if (param_gathers_ && run.pass == PipelinePass::kForward && run.microbatch == 0) {
    // This part's gather (unless issued ahead) and the next first forward's, issued now.
    if (gathers[k] == kNone) gathers[k] = IssueParamGather(rank, run, rank.critical);
    const size_t next = next_first_forward_[k];
    if (next < runs.size() && gathers[next] == kNone)
      gathers[next] = IssueParamGather(rank, runs[next], rank.critical);
    if (gathers[k] != kNone) rank.joins.push_back(gathers[k]);
  }

  int32_t grads = kNone;  // the op after which this part's gradients exist
  switch (run.pass) {
    case PipelinePass::kForward:
      EmitPass(rank, run, StepPhase::kForward);
      break;
    case PipelinePass::kBackward:
      if (Replays(run)) EmitPass(rank, run, StepPhase::kRecompute);
      EmitPass(rank, run, StepPhase::kBackward);
      rank.input_end[k] = rank.critical;
      grads = rank.critical;
      break;
    case PipelinePass::kWeight: {  // zb_h1: after its B, where the order puts it
      const int32_t input = rank.input_end[run.input_pass];
      const int32_t id = EmitCompute(rank, run, SimOpKind::kBackwardWeight, SimPiece::kWhole,
                                     TimeOf(part.backward_weight, rates_).total() *
                                         OverlapStretch(work_, part, StepPhase::kBackward, cluster_.gpu),
                                     part.backward_weight.matmul_flops);
      if (id != kNone) Edge(input, id);
      else if (input != kNone) rank.joins.push_back(input);
      grads = id != kNone ? id : input;
      break;
    }
  }

  if (run.makes_grads(split_w_)) {
    for (const Collective& c : part.collectives) {
      if (c.dim != MeshDim::kDp || c.phase != StepPhase::kBackward ||
          c.position != CollectivePosition::kAfterPart || c.group.size() <= 1)
        continue;
      if (c.cadence == Cadence::kPerStep && !run.grads_final) continue;
      if (work_.dp_overlap) EmitGradSync(rank, run, c, grads);
      else rank.held_syncs.push_back({run, &c});
    }
    if (run.grads_final) {
      if (run.part != SimPart::kBlock) rank.tied_source = grads;
      rank.optimizer_order.push_back({run.part, run.layer});
    }
  }
  if (run.last_of_item) EmitSend(rank, run);
}

int32_t GraphBuilder::EmitGradSync(RankState& rank, const PartRun& run, const Collective& c,
                                   int32_t after) {
  const Transfer t = CollectiveTransfer(c.kind, c.bytes, c.group, c.count, cluster_);
  const int32_t id = NewComm(rank, &run, c, t, SimOpKind::kCollective);
  Edge(after, id);
  rank.dp_tail = id;
  return id;
}

void GraphBuilder::BuildRank(RankState& rank, const std::vector<PartRun>& runs) {
  std::vector<int32_t> gathers(runs.size(), kNone);
  rank.input_end.assign(runs.size(), kNone);
  if (param_gathers_) {
    next_first_forward_.assign(runs.size(), runs.size());
    for (size_t k = runs.size(); k-- > 1;) {
      const bool first = runs[k].pass == PipelinePass::kForward && runs[k].microbatch == 0;
      next_first_forward_[k - 1] = first ? k : next_first_forward_[k];
    }
  }
  for (size_t k = 0; k < runs.size(); ++k) RunPart(rank, runs, k, gathers);
  // dp_overlap=0: every gradient sync after the last backward, in the order they came.
  const int32_t last = rank.critical;
  for (const auto& [run, c] : rank.held_syncs) EmitGradSync(rank, run, *c, last);
  rank.held_syncs.clear();
}

// Tied embeddings over pipeline stages: the first and last stage all-reduce the shared
// matrix's gradient once both have it; their optimizers wait for it.
void GraphBuilder::EmitTiedSync() {
  if (work_.pp <= 1) return;
  RankState& first = ranks_.front();
  RankState& last = ranks_.back();
  const std::pair<RankState*, const PartWork*> ends[] = {{&first, &work_.embedding},
                                                          {&last, &work_.head}};
  for (const auto& [rank, part] : ends) {
    for (const Collective& c : part->collectives) {
      if (c.dim != MeshDim::kPp || c.group.size() <= 1) continue;
      const Transfer t = CollectiveTransfer(c.kind, c.bytes, c.group, c.count, cluster_);
      PartRun run;
      run.part = rank == &first ? SimPart::kEmbedding : SimPart::kHead;
      run.microbatch = -1;
      const int32_t id = NewComm(*rank, &run, c, t, SimOpKind::kCollective);
      Edge(first.tied_source, id);
      Edge(last.tied_source, id);
      rank->joins.push_back(id);
    }
  }
}

void GraphBuilder::EmitOptimizer(RankState& rank) {
  // The optimizer starts once every gradient of the stage is synced.
  if (rank.dp_tail != kNone) rank.joins.push_back(rank.dp_tail);
  rank.joins.insert(rank.joins.end(), rank.deferred.begin(), rank.deferred.end());
  rank.deferred.clear();
  PartRun run;
  run.microbatch = -1;
  for (const auto& [part, layer] : rank.optimizer_order) {
    StageParts parts;
    parts.embedding = part == SimPart::kEmbedding;
    parts.head = part == SimPart::kHead;
    parts.blocks = part == SimPart::kBlock ? 1 : 0;
    run.part = part;
    run.layer = layer;
    EmitCompute(rank, run, SimOpKind::kOptimizer, SimPiece::kWhole,
                TimeOf(OptimizerWork(work_, parts), rates_).total(), 0);
    // ZeRO-1/2: all-gather the updated parameters behind the remaining updates (or, with
    // param_gathers_, in the next step's first forward: RunPart).
    if (param_gathers_) continue;
    for (const Collective& c : Part(part).collectives) {
      if (c.position != CollectivePosition::kAfterOptimizer || c.group.size() <= 1) continue;
      const Transfer t = CollectiveTransfer(c.kind, c.bytes, c.group, c.count, cluster_);
      const int32_t id = NewComm(rank, &run, c, t, SimOpKind::kCollective);
      Edge(rank.critical, id);
      for (int32_t j : rank.joins) Edge(j, id);
    }
  }
}

StepGraph GraphBuilder::Build() {
  const int64_t pp = std::max<int64_t>(work_.pp, 1);
  // Every micro-batch passes forward and backward through every block, one op at least
  // each: refuse before allocating anything of that size.
  const int64_t layers = work_.stage_layers.Total();
  const std::optional<int64_t> passes = CheckedProduct({2, work_.micro_batches, layers});
  if (!passes || *passes > kMaxSimOps)
    throw SimulationTooLarge(fmt::format(
        "simulating this step takes at least {} ops ({} micro-batches per pipeline stage x {} "
        "layers x forward and backward); expected at most {} (kMaxSimOps, docs/limits.md)",
        passes ? std::to_string(*passes) : "2^63", work_.micro_batches, layers, kMaxSimOps));
  split_w_ = SplitsWeightGradients(work_.schedule) && pp > 1;
  for (const Collective& c : work_.block.collectives)
    if (c.dim == MeshDim::kDp && c.position == CollectivePosition::kBeforePart &&
        c.group.size() > 1)
      gathers_ = true;
  param_gathers_ = work_.param_gather_in_forward && work_.dp_overlap;
  const int64_t V = pp * std::max<int64_t>(work_.virtual_stages, 1);
  streams_.assign(pp * kNumSimStreams, {});
  for (auto& s : sends_) s.assign(work_.micro_batches * V, kNone);
  const int64_t stride = pp > 1 ? work_.pp_activation.group.inner.stride : 0;
  global_rank_.resize(pp);
  for (int64_t r = 0; r < pp; ++r) global_rank_[r] = r * stride;

  ranks_.resize(pp);
  std::vector<std::vector<PartRun>> runs(pp);
  size_t expected = 0;
  for (int64_t r = 0; r < pp; ++r) {
    ranks_[r].rank = static_cast<int32_t>(r);
    runs[r] = StageRuns(r);
    expected += runs[r].size();
  }
  ops_.reserve(expected * 6 + 64);
  edges_.reserve(expected * 8 + 64);
  for (int64_t r = 0; r < pp; ++r) BuildRank(ranks_[r], runs[r]);
  EmitTiedSync();
  for (int64_t r = 0; r < pp; ++r) EmitOptimizer(ranks_[r]);

  StepGraph g;
  g.ranks = pp;
  g.global_rank = global_rank_;
  const size_t n = ops_.size();
  g.pred_begin.assign(n + 1, 0);
  for (const auto& [from, to] : edges_) ++g.pred_begin[to + 1];
  for (size_t i = 0; i < n; ++i) g.pred_begin[i + 1] += g.pred_begin[i];
  g.preds.resize(edges_.size());
  std::vector<int32_t> fill(g.pred_begin.begin(), g.pred_begin.end() - 1);
  for (const auto& [from, to] : edges_) g.preds[fill[to]++] = from;

  auto flatten = [](const std::vector<std::vector<int32_t>>& lists, std::vector<int32_t>* begin,
                    std::vector<int32_t>* items) {
    begin->assign(lists.size() + 1, 0);
    for (size_t i = 0; i < lists.size(); ++i)
      (*begin)[i + 1] = (*begin)[i] + static_cast<int32_t>(lists[i].size());
    items->clear();
    items->reserve((*begin)[lists.size()]);
    for (const auto& l : lists) items->insert(items->end(), l.begin(), l.end());
  };
  flatten(streams_, &g.stream_begin, &g.stream_ops);
  g.link_bandwidth_Bps.resize(pp * kNumTiers);
  for (int64_t r = 0; r < pp; ++r)
    for (int t = 0; t < kNumTiers; ++t)
      g.link_bandwidth_Bps[r * kNumTiers + t] =
          TierOf(cluster_, static_cast<TierId>(t)).bus_bandwidth_Bps();
  g.dp_comm_slowdown = cluster_.gpu.DpOverlapSlowdown();
  g.ops = std::move(ops_);
  return g;
}

}  // namespace

StepGraph BuildStepGraphFromWork(const StepWork& work, const ModelSpec& model,
                                 const ClusterSpec& cluster, Precision precision) {
  StepWork serialized;
  return GraphBuilder(WorkAsRun(work, cluster.gpu, &serialized), model, cluster, precision).Build();
}

StepGraph BuildStepGraph(const ModelSpec& model, const ClusterSpec& cluster,
                         const TrainingSpec& training, const ParallelPlan& plan) {
  return BuildStepGraphFromWork(BuildStepWork(model, training, plan), model, cluster,
                                training.precision);
}

}  // namespace meshplan
