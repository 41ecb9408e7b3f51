// StepGraph: the ops of one training step on each distinct rank (one per pipeline stage),
// with their streams (compute, one per mesh dimension), sizes and dependencies, built from
// the cost model's StepWork (planner/cost/step_work.h) so the analytic estimate and the
// simulation time the same work. Compute ops take TimeOf() of their work; communication ops
// are Transfers (network.h). What the graph encodes (schedules, blocking and overlapped
// collectives, ZeRO-3 prefetch, expert parallel, what offload does not draw yet):
// docs/simulator.md. The graph is plain data; building allocates it (no global state).
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
  // this much slower: GpuSpec::DpOverlapSlowdown() (event_sim.h).
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
