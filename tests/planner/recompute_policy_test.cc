// The recompute policies op (torchtitan's op-level selective checkpointing) and every:N (its
// layer-level one): what a block keeps (hand counts from torchtitan's rules,
// docs/memory_model.md "Recompute policies"), a stage's activations, the replayed FLOPs and
// time, plan strings, pins and the search's list of policies.
#include <catch2/catch.hpp>

#include <string>

#include "planner/config/framework_yaml.h"
#include "planner/cost/activation_memory.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/flops.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/step_work.h"
#include "planner/input_error.h"
#include "planner/names.h"
#include "planner/plan_fields.h"
#include "planner/search/plan_space.h"
#include "planner/search/search.h"
#include "tests/planner/cost_test_specs.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

using Catch::Matchers::WithinRel;
using testing::H100Cluster;
using testing::SpecLlama;
using testing::Training;

// memory_detailed_test's small Llama: E = 1024, H = 8 (D = 128), K = 2, F = 1536, L = 16.
ModelSpec SmallLlama() {
  ModelSpec m = SpecLlama(1024, 8, 16, 1536);
  m.kv_heads = 2;
  return m;
}
constexpr double E = 1024, KD = 2 * 128, F = 1536, H = 8, A = 2;
// One micro-batch of B = 2 sequences of S = 512 in bf16: T = B*S tokens.
constexpr double b = 2, s = 512, T = b * s;
ParallelPlan OneMicroBatch() {
  ParallelPlan p;
  p.micro_batch = 2;
  return p;
}

double Kept(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& p, Recompute r,
            AttentionImpl impl = AttentionImpl::kFused) {
  return BlockSavedTensors(m, MakeRankShape(m, t, p), impl, r).TotalBytes();
}

TEST_CASE("op keeps the block input, the odd-numbered matmuls' outputs and the attention kernel's",
          "[planner][memory][recompute]") {
  const ModelSpec m = SmallLlama();
  const TrainingSpec t = Training(2, 512, Precision::kBf16);
  const ParallelPlan p = OneMicroBatch();
  // torchtitan's _apply_op_sac over wq, wk, wv, wo, w_gate, w_up, w_down: mm 1, 3, 5, 7 kept
  // (wq (T,QD = E), wv (T,KD), w_gate (T,F), w_down (T,E)); the flash kernel's output (T,E)
  // and logsumexp (B,H,S) fp32; and the block input (T,E).
  const double op = A * T * (E + E + KD + F + E + E) + 4 * b * H * s;
  CHECK(Kept(m, t, p, Recompute::kOp) == op);
  // Replayed in the backward: every saved tensor of the list but the input and those the kept
  // outputs are (v = wv's, the attention output and logsumexp, the gate output); the fused
  // list is A*T*(6E + 2KD + 3F) + two fp32 rstd (memory_detailed_test).
  const RankShape sh = MakeRankShape(m, t, p);
  CHECK(BlockRecomputedTensors(m, sh, AttentionImpl::kFused, Recompute::kOp).TotalBytes() ==
        A * T * (4 * E + KD + 2 * F) + 2 * 4 * b * s);
  // Naive attention is bmm, softmax, bmm: nothing of the core is kept, nor wo's input.
  CHECK(Kept(m, t, p, Recompute::kOp, AttentionImpl::kNaive) == A * T * (E + E + KD + F + E));
  // Between full and none, and the other policies unchanged by the op outputs.
  CHECK(Kept(m, t, p, Recompute::kFull) == A * T * E);
  CHECK(Kept(m, t, p, Recompute::kNone) ==
        A * T * (6 * E + 2 * KD + 3 * F) + 2 * 4 * b * s + 4 * b * H * s);
}

TEST_CASE("op with tp and sequence parallel keeps the row-parallel partial sums and the reduce-scatters",
          "[planner][memory][recompute]") {
  const ModelSpec m = SmallLlama();
  const TrainingSpec t = Training(2, 512, Precision::kBf16);
  ParallelPlan p = OneMicroBatch();
  p.tp = 2;
  p.sequence_parallel = true;
  // Per rank: the input (T/2,E); wq (T,E/2), wv (T,KD/2), the attention output (T,E/2), w_gate
  // (T,F/2); w_down's output before its reduce-scatter (T,E); the two reduce-scatters (T/2,E);
  // the logsumexp of H/2 heads.
  const double op = A * T * (E / 2 + E / 2 + KD / 2 + E / 2 + F / 2 + E + 2 * E / 2) +
                    4 * b * (H / 2) * s;
  CHECK(Kept(m, t, p, Recompute::kOp) == op);
}

TEST_CASE("op replays the even-numbered matmuls: its FLOPs and the block's recompute work",
          "[planner][flops][recompute]") {
  const ModelSpec m = SmallLlama();
  const TrainingSpec t = Training(8, 512, Precision::kBf16);
  const double tokens = 8 * 512;
  // wk (E x KD), wo (E x E), w_up (E x F) per block, 2 FLOPs per weight and token.
  const double replayed = 2 * 16 * (E * KD + E * E + E * F);
  CHECK(OpReplayedParams(m, false) == static_cast<int64_t>(E * KD + E * E + E * F));
  CHECK(StepFlopsOf(m, t, Recompute::kOp).recompute == tokens * replayed);
  ParallelPlan p;
  p.recompute = Recompute::kOp;
  const StepWork w = BuildStepWork(m, t, p);
  const ComputeWork& rec = w.block.recompute[static_cast<size_t>(Recompute::kOp)];
  CHECK(rec.attention_flops == 0);  // the flash kernel's outputs are kept
  CHECK_THAT(rec.matmul_flops * 16 * static_cast<double>(w.micro_batches),
             WithinRel(tokens * replayed, 1e-12));
  CHECK(rec.memory_bytes == w.block.forward.memory_bytes);  // every memory-bound op replays
}

// The recompute pass's collectives of one block, by kind.
int Replayed(const StepWork& w, CollectiveKind kind) {
  int n = 0;
  for (const Collective& c : w.block.collectives)
    if (c.phase == StepPhase::kRecompute && c.kind == kind) n += c.count;
  return n;
}

TEST_CASE("op re-runs the TP all-gathers and all-reduces, not the reduce-scatters nor the ring",
          "[planner][step_work][recompute]") {
  const ModelSpec m = SmallLlama();
  const TrainingSpec t = Training(8, 512, Precision::kBf16);
  ParallelPlan p;
  p.tp = 2;
  p.cp = 2;
  p.recompute = Recompute::kOp;
  const StepWork plain = BuildStepWork(m, t, p);
  CHECK(Replayed(plain, CollectiveKind::kAllReduce) == 2);
  CHECK(Replayed(plain, CollectiveKind::kRingExchange) == 0);
  p.sequence_parallel = true;
  const StepWork sp = BuildStepWork(m, t, p);
  CHECK(Replayed(sp, CollectiveKind::kAllGather) == 2);
  CHECK(Replayed(sp, CollectiveKind::kReduceScatter) == 0);
  // every:N replays full's on its checkpointed blocks: the stage's TP bytes count them alone.
  p.recompute = Recompute::kFull;
  const StepWork full = BuildStepWork(m, t, p);
  CHECK(Replayed(full, CollectiveKind::kReduceScatter) == 2);
  CHECK(Replayed(full, CollectiveKind::kRingExchange) == 1);
  p.recompute = Recompute::kNone;
  const double none_tp = CommBytesPerStep(BuildStepWork(m, t, p), 0)[MeshDim::kTp];
  const double full_tp = CommBytesPerStep(full, 0)[MeshDim::kTp];
  p.recompute = RecomputePolicy::Every(4);  // 4 of 16 blocks
  const StepWork every = BuildStepWork(m, t, p);
  CHECK(RecomputedShare(every, 0) == 0.25);
  CHECK_THAT(CommBytesPerStep(every, 0)[MeshDim::kTp],
             WithinRel(none_tp + (full_tp - none_tp) / 4, 1e-12));
}

TEST_CASE("every:N checkpoints the rank's k-th block when k % N == 0", "[planner][recompute]") {
  const RecomputePolicy every2 = RecomputePolicy::Every(2);
  CHECK(BlockRecompute(every2, 0) == Recompute::kNone);
  CHECK(BlockRecompute(every2, 1) == Recompute::kFull);
  CHECK(BlockRecompute(every2, 2) == Recompute::kNone);
  CHECK(BlockRecompute(RecomputePolicy::Every(3), 2) == Recompute::kFull);
  CHECK(BlockRecompute(Recompute::kOp, 5) == Recompute::kOp);
  CHECK(CheckpointedBlocks(RecomputePolicy::Every(3), 7) == 2);
  CHECK(CheckpointedBlocks(every2, 1) == 0);
  CHECK(CheckpointedBlocks(Recompute::kFull, 7) == 7);
  CHECK(CheckpointedBlocks(Recompute::kOp, 7) == 0);
}

TEST_CASE("every:2 keeps half the blocks whole and half as under full", "[planner][memory][recompute]") {
  const ModelSpec m = SmallLlama();
  const TrainingSpec t = Training(2, 512, Precision::kBf16);
  ParallelPlan p = OneMicroBatch();
  // The peak is the lm_head's backward under each (the 50,257-wide logits): every block's
  // tensors are alive.
  auto activations = [&](RecomputePolicy r) {
    p.recompute = r;
    const MemoryBreakdown b = EstimateStageMemory(m, t, p, MemoryModel::kDetailed, 0);
    CHECK(b.peak_phase == "head_backward");
    return b.activations_bytes;
  };
  const double none = activations(Recompute::kNone), full = activations(Recompute::kFull);
  const double every2 = activations(RecomputePolicy::Every(2));
  const double every4 = activations(RecomputePolicy::Every(4));
  const double block_none = Kept(m, t, p, Recompute::kNone);
  const double block_full = Kept(m, t, p, Recompute::kFull);
  // 16 blocks: 8 (every:2) or 4 (every:4) of them keep only their input.
  CHECK_THAT(every2, WithinRel(none - 8 * (block_none - block_full), 1e-12));
  CHECK_THAT(every4, WithinRel(none - 4 * (block_none - block_full), 1e-12));
  CHECK(full < every2);
  CHECK(every2 < every4);
  CHECK(every4 < none);
}

TEST_CASE("every:N counts the blocks of each pipeline rank: FLOPs, time and memory",
          "[planner][flops][recompute]") {
  const ModelSpec m = SpecLlama(1024, 8, 6, 1536);
  const TrainingSpec t = Training(8, 512, Precision::kBf16);
  ParallelPlan p;
  p.pp = 2;  // 3 blocks a stage
  p.recompute = Recompute::kFull;
  const StepFlops full = StepFlopsOf(m, t, p);
  p.recompute = RecomputePolicy::Every(4);  // no stage reaches its 4th block
  CHECK(StepFlopsOf(m, t, p).recompute == 0);
  p.recompute = RecomputePolicy::Every(3);  // the 3rd block of each stage: 2 of 6
  CHECK_THAT(StepFlopsOf(m, t, p).recompute, WithinRel(full.recompute / 3, 1e-12));

  // One stage of 6 blocks: every:2 replays 3 of them, half of full's recompute time.
  ParallelPlan one;
  one.dp = 1;
  one.recompute = Recompute::kFull;
  const ClusterSpec c = H100Cluster(1, 1);
  const double full_s = Estimate(m, c, t, one).time.recompute_s;
  one.recompute = RecomputePolicy::Every(2);
  CHECK_THAT(Estimate(m, c, t, one).time.recompute_s, WithinRel(full_s / 2, 1e-12));
  one.recompute = RecomputePolicy::Every(4);  // 1 of 6
  CHECK_THAT(Estimate(m, c, t, one).time.recompute_s, WithinRel(full_s / 6, 1e-12));
}

TEST_CASE("recompute=op and recompute=every:N round-trip through plan strings and pins",
          "[planner][plan_fields][recompute]") {
  for (const std::string text : {"op", "every:2", "every:16", "none", "selective", "full"}) {
    INFO(text);
    const ParallelPlan plan = ParsePlanString("dp=2,recompute=" + text);
    CHECK(ToString(plan.recompute) == text);
    CHECK(ToPlanString(plan).find("recompute=" + text + ",") != std::string::npos);
    CHECK(ParsePlanString(ToPlanString(plan)) == plan);
    const PlanFieldSpec& field = FieldSpec(PlanField::kRecompute);
    CHECK(FormatFieldValue(field, field.get(plan)) == text);
    CHECK(RecomputeOfCode(RecomputeCode(plan.recompute)) == plan.recompute);
    const PlanPins pins = ParsePlanPins("recompute=" + text);
    CHECK(pins.ToString() == "recompute=" + text);
  }
  CHECK(ParsePlanString("recompute=every:3").recompute == RecomputePolicy::Every(3));
  CHECK(ParsePlanString("recompute=op").recompute == Recompute::kOp);
}

TEST_CASE("a bad recompute value names the allowed ones", "[planner][plan_fields][recompute]") {
  for (const std::string text : {"every:0", "every:1", "every:x", "every:", "every:-2", "every:2x",
                                 "every", "op:2", "Every:2"}) {
    INFO(text);
    const std::string error = test::ErrorOf([&] { ParsePlanString("recompute=" + text); }).what();
    CHECK_THAT(error, Catch::Contains("recompute") &&
                          Catch::Contains("none, selective, full, op, every:N") &&
                          Catch::Contains("'" + text + "'"));
  }
}

TEST_CASE("the search tries the recompute policies its caller names, else its framework's",
          "[planner][search][recompute]") {
  const ModelSpec m = SmallLlama();
  TrainingSpec t = Training(8, 512, Precision::kBf16);
  t.framework = LoadFramework("megatron-core");
  const ClusterSpec c = H100Cluster(1, 2);
  SearchOptions options;
  options.threads = 1;
  options.top_k = 1000;
  const SearchResult base = Search(m, c, t, options);
  CHECK(OfferedRecomputePolicies(t.framework.recompute) ==
        std::vector<RecomputePolicy>{Recompute::kNone, Recompute::kSelective, Recompute::kFull});
  CHECK(OfferedRecomputePolicies(LoadFramework("torchtitan").recompute) ==
        std::vector<RecomputePolicy>{Recompute::kNone, Recompute::kFull, Recompute::kOp,
                                     RecomputePolicy::Every(2)});
  options.space.recomputes = {Recompute::kNone, Recompute::kOp, RecomputePolicy::Every(2),
                              Recompute::kFull};
  const SearchResult titan = Search(m, c, t, options);
  CHECK(titan.candidates * 3 == base.candidates * 4);
  bool op = false, every = false, selective = false;
  for (const RankedPlan& r : titan.top) {
    op = op || r.plan.recompute == Recompute::kOp;
    every = every || r.plan.recompute == RecomputePolicy::Every(2);
    selective = selective || r.plan.recompute == Recompute::kSelective;
  }
  CHECK(op);
  CHECK(every);
  CHECK_FALSE(selective);
  // A pin replaces the list.
  options.space.pins = ParsePlanPins("recompute=every:2");
  const SearchResult pinned = Search(m, c, t, options);
  CHECK(pinned.candidates * 4 == titan.candidates);
  for (const RankedPlan& r : pinned.top) CHECK(r.plan.recompute == RecomputePolicy::Every(2));
}

}  // namespace
}  // namespace meshplan
