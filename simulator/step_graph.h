// StepGraph: the ops of one training step on each distinct rank, with their streams,
// sizes and dependencies, built from the cost model's StepWork (planner/cost/step_work.h)
// so the analytic estimate and the simulation time the same work.
//
// Ranks: the ranks of one pipeline stage are symmetric (same work, same collectives),
// so the graph holds one simulated rank per stage, 0..pp-1 (the stage's first global
// rank, stage * tp * cp, places it in the cluster). Streams per rank, as on a GPU:
// one compute stream and one communication stream per mesh dimension (SimStream).
// Each stream runs its ops in issue order; an op starts when its stream is free and
// every op it depends on has finished (event_sim.h). Compute ops take TimeOf() of
// their work; communication ops are Transfers (network.h) that take CollectiveTime()
// when alone on their tier.
//
// What the graph encodes (one stage, in its schedule's order, pipeline_schedule.h):
//  * forward, backward (input + weight gradients; zb_h1: weight gradients as separate
//    W ops where its order puts them), recompute (before a part's backward), optimizer
//    (one op per part, after every gradient sync of the stage).
//  * a block's compute is an attention op and an MLP op; the split of the non-core work
//    between them follows the matmul weights, AttentionMatmulParams / BlockMatmulParams:
//    it only places the TP collectives, the totals are the StepWork's.
//  * blocking communication (Collective::overlappable false: TP unless tp_comm_overlap,
//    pipeline send/recv, the tied-embedding sync) sits on the data path: the next op
//    that needs its result waits for it. Pipeline sends block the sender for the
//    transfer (Megatron's non-overlapped p2p) and release the receiver's pass.
//  * overlaps: TP with tp_comm_overlap runs beside the compute of its part's pass, the
//    next part waits for it (the cost model's rule), and that pass computes
//    OverlapStretch() times longer (planner/cost/step_time.h: the GPU's
//    comm_overlap_slowdown). CP's ring exchange runs behind the
//    attention core, split into cp steps: step j's K/V arrive while step j-1 computes.
//    DP: DDP / ZeRO-1 gradient buckets (one per part) start when the part's last
//    backward (zb_h1: its last W) ends; ZeRO-2 reduce-scatters after every micro-batch's;
//    with dp_overlap=0 every gradient sync waits for the stage's last backward.
//    ZeRO-3 all-gathers a part's parameters before each forward and backward, prefetched
//    `prefetch` parts ahead (issued when the current part starts; FSDP's default is one;
//    0: each gather on the data path), and reduce-scatters its gradient behind the
//    following backward. While a rank's dp op runs, its compute runs
//    (1 + StepGraph::dp_comm_slowdown) times slower (event_sim.h).
//  * offload (offload_opt, offload_act, offload_params) is not drawn yet: the graph runs
//    such a plan as if nothing were offloaded (`simulate` says so). ZeRO-1/2 all-gather
//    each part's updated parameters after its optimizer op, behind the remaining
//    optimizer ops (the step ends when the last gather does).
//  * expert parallel (ep > 1): a MoE block's dispatch all-to-all (then its tp all-gather)
//    runs after the block's attention and before its MLP op, the combine (after the tp
//    reduce-scatter) after the MLP op, on the ep stream and on the data path (no overlap:
//    the experts wait for their rows, the next op for their outputs); the backward runs
//    the combine's gradient exchange first. The router's compute is part of the MLP op.
//  * every op of a mesh dimension runs on that dimension's stream, one at a time; the
//    gradient sync of context-parallel ranks (dp x cp) counts as dp.
// The graph is plain data; building allocates it (no global state).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/cost/step_work.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"
#include "simulator/network.h"

namespace meshplan {

// The streams of a simulated rank: compute, then one per mesh dimension.
enum class SimStream : uint8_t { kCompute = 0, kDp = 1, kPp = 2, kCp = 3, kTp = 4, kEp = 5 };
inline constexpr int kNumSimStreams = 6;
const char* ToString(SimStream stream);  // compute | dp | pp | cp | tp | ep
SimStream StreamOf(MeshDim dim);
MeshDim DimOf(SimStream stream);  // for a communication stream

enum class SimOpKind : uint8_t {
  kForward,
  kBackward,        // input and weight gradients together (every schedule but zb_h1)
  kBackwardInput,   // zb_h1 "B"
  kBackwardWeight,  // zb_h1 "W"
  kRecompute,
  kOptimizer,
  kCollective,      // a collective on a mesh dimension's communicator
  kSendRecv,        // pipeline point-to-point
};
const char* ToString(SimOpKind kind);
enum class SimPart : uint8_t { kEmbedding, kBlock, kHead, kStage };
// Which piece of a part a compute op is.
enum class SimPiece : uint8_t { kWhole, kAttention, kAttentionCore, kMlp };

struct SimOp {
  // Timing.
  double duration_s = 0;  // compute ops
  Transfer transfer;      // communication ops
  double flops = 0;       // compute ops: matmul + attention FLOPs (trace)
  double buffer_bytes = 0;  // communication ops: buffer (planner/cost/collective_time.h convention)
  // Placement.
  int32_t rank = 0;  // simulated rank = pipeline stage
  SimStream stream = SimStream::kCompute;
  SimOpKind kind = SimOpKind::kForward;
  // Labels.
  SimPart part = SimPart::kStage;
  SimPiece piece = SimPiece::kWhole;
  CollectiveKind collective = CollectiveKind::kAllReduce;
  CollectivePosition position = CollectivePosition::kAfterPart;
  StepPhase phase = StepPhase::kForward;
  int32_t layer = -1;       // global block index (blocks), else -1
  int32_t microbatch = -1;  // -1 for per-step ops
  int16_t chunk = 0;        // model chunk on the stage (interleaved)
  int16_t step = 0;         // CP ring step / count of identical collectives
  bool is_compute() const { return stream == SimStream::kCompute; }
};

struct StepGraph {
  int64_t ranks = 0;         // simulated ranks = pipeline stages
  std::vector<int64_t> global_rank;  // of each simulated rank
  std::vector<SimOp> ops;
  // Dependencies as CSR: the ops op i waits for are preds[pred_begin[i] .. pred_begin[i+1]).
  std::vector<int32_t> pred_begin;
  std::vector<int32_t> preds;
  // Issue order per (rank, stream), index rank * kNumSimStreams + stream, as CSR:
  // stream_ops[stream_begin[s] .. stream_begin[s+1]).
  std::vector<int32_t> stream_begin;
  std::vector<int32_t> stream_ops;
  // Link bandwidths per (rank, tier), index rank * kNumTiers + tier.
  std::vector<double> link_bandwidth_Bps;
  // While a dp-stream op of a rank runs (gradient syncs, ZeRO gathers), its compute runs
  // this much slower: GpuSpec::comm_overlap_slowdown (event_sim.h).
  double dp_comm_slowdown = 0;
};

// A step too large to simulate: more than kMaxSimOps ops (planner/limits.h), or a timeline
// of more than kMaxTraceOps. Thrown before the graph is built when the step's block passes
// alone (2 x micro-batches x layers) exceed the bound, else as soon as the ops do, so the
// memory spent is bounded either way. what() names the bound; the CLI adds the flags that
// change it and exits with code 2.
class SimulationTooLarge : public std::length_error {
 public:
  explicit SimulationTooLarge(const std::string& what) : std::length_error(what) {}
};

// The step of a valid plan (Validate() empty). Ops are numbered in build order.
// Throws SimulationTooLarge past kMaxSimOps.
StepGraph BuildStepGraph(const ModelSpec& model, const ClusterSpec& cluster,
                         const TrainingSpec& training, const ParallelPlan& plan);
// The same from a StepWork (which tests may edit: e.g. zero the embedding and head
// for equal stages). `model` only supplies the attention / MLP split of a block.
StepGraph BuildStepGraphFromWork(const StepWork& work, const ModelSpec& model,
                                 const ClusterSpec& cluster, Precision precision);

}  // namespace meshplan
