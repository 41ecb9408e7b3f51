// StepWork (the shared description of a step's work) and the overlap clock.
#include <catch2/catch.hpp>

#include <algorithm>

#include "planner/config/framework_yaml.h"
#include "planner/cost/block_ops.h"
#include "planner/cost/flops.h"
#include "planner/cost/rank_shape.h"
#include "planner/cost/step_time.h"
#include "planner/cost/step_work.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::Spec7b;
using testing::Training;

double Flops(const ComputeWork& w) { return w.matmul_flops + w.attention_flops; }
double PartFlops(const PartWork& p, Recompute r) {
  return Flops(p.forward) + Flops(p.backward_input) + Flops(p.backward_weight) +
         Flops(p.recompute[static_cast<int>(r)]);
}

int Count(const PartWork& part, MeshDim dim, StepPhase phase) {
  int n = 0;
  for (const Collective& c : part.collectives)
    if (c.dim == dim && c.phase == phase) n += static_cast<int>(c.count);
  return n;
}

TEST_CASE("the work of every rank adds up to the step's hardware FLOPs", "[planner][step_work]") {
  const ModelSpec m = Spec7b();
  const TrainingSpec t = Training(16, 2048);
  ParallelPlan p;
  p.tp = GENERATE(1, 2, 8);
  p.cp = GENERATE(1, 2);
  p.pp = GENERATE(1, 4);
  p.dp = 2;
  p.micro_batch = 2;
  p.recompute = GENERATE(Recompute::kNone, Recompute::kSelective, Recompute::kFull, Recompute::kOp);
  const StepWork w = BuildStepWork(m, t, p);
  CHECK(w.micro_batches == 4);
  CHECK(w.tokens_per_microbatch == 2 * 2048 / p.cp);
  // Sum over stages of one rank's work, times the ranks that split each stage's tokens
  // and weights (dp * cp * tp) and the micro-batches.
  const Recompute r = p.recompute.kind;
  const double per_replica = static_cast<double>(m.layers) * PartFlops(w.block, r) +
                             PartFlops(w.embedding, r) + PartFlops(w.head, r);
  const double total = per_replica * static_cast<double>(p.dp * p.cp * p.tp * w.micro_batches);
  // The FLOPs convention also counts 6 per norm weight (not a matmul) and the unpadded
  // vocabulary: a relative difference far below 1e-3.
  CHECK_THAT(total, Catch::Matchers::WithinRel(StepFlopsOf(m, t, p).hardware, 1e-3));
}

TEST_CASE("TP: two all-reduces per block forward and two backward, SP swaps each for AG + RS and re-gathers in backward",
          "[planner][step_work]") {
  const ModelSpec m = Spec7b();
  ParallelPlan p;
  p.tp = 4;
  const StepWork plain = BuildStepWork(m, Training(8, 1024), p);
  CHECK(Count(plain.block, MeshDim::kTp, StepPhase::kForward) == 2);
  CHECK(Count(plain.block, MeshDim::kTp, StepPhase::kBackward) == 2);
  CHECK(Count(plain.block, MeshDim::kTp, StepPhase::kRecompute) == 0);
  for (const Collective& c : plain.block.collectives)
    if (c.dim == MeshDim::kTp) CHECK(c.kind == CollectiveKind::kAllReduce);

  p.sequence_parallel = true;
  p.recompute = Recompute::kFull;
  const StepWork sp = BuildStepWork(m, Training(8, 1024), p);
  CHECK(Count(sp.block, MeshDim::kTp, StepPhase::kForward) == 4);
  // Backward: AG of the output gradient, AG of the saved sharded input, RS of the input
  // gradient, per region.
  CHECK(Count(sp.block, MeshDim::kTp, StepPhase::kBackward) == 6);
  CHECK(Count(sp.block, MeshDim::kTp, StepPhase::kRecompute) == 4);  // full recompute replays them
  const double buffer = 1.0 * 1024 * 4096 * 2;  // (T, E) bf16
  for (const Collective& c : sp.block.collectives) CHECK(c.bytes == buffer);
}

TEST_CASE("DP sync per ZeRO stage", "[planner][step_work]") {
  const ModelSpec m = Spec7b();
  ParallelPlan p;
  p.dp = 8;
  auto dp_collectives = [&](int zero) {
    p.zero_stage = zero;
    const StepWork w = BuildStepWork(m, Training(8, 1024), p);
    std::vector<Collective> out;
    for (const Collective& c : w.block.collectives)
      if (c.dim == MeshDim::kDp) out.push_back(c);
    return out;
  };
  const auto z0 = dp_collectives(0);
  REQUIRE(z0.size() == 1);
  CHECK(z0[0].kind == CollectiveKind::kAllReduce);
  CHECK(z0[0].cadence == Cadence::kPerStep);
  CHECK(z0[0].overlappable);
  const auto z1 = dp_collectives(1);
  REQUIRE(z1.size() == 2);
  CHECK(z1[0].kind == CollectiveKind::kReduceScatter);
  CHECK(z1[1].kind == CollectiveKind::kAllGather);
  CHECK(z1[1].position == CollectivePosition::kAfterOptimizer);
  const auto z2 = dp_collectives(2);
  REQUIRE(z2.size() == 2);
  CHECK(z2[0].cadence == Cadence::kPerMicrobatch);  // only a gradient shard is kept
  const auto z3 = dp_collectives(3);
  REQUIRE(z3.size() == 3);
  CHECK(z3[0].kind == CollectiveKind::kAllGather);
  CHECK(z3[0].phase == StepPhase::kForward);
  CHECK(z3[1].kind == CollectiveKind::kAllGather);
  CHECK(z3[1].phase == StepPhase::kBackward);
  CHECK(z3[2].kind == CollectiveKind::kReduceScatter);
  for (const Collective& c : z3) CHECK(c.group.size() == 8);
}

TEST_CASE("separate gradient accumulation: 3 gradient bytes per accumulated element per "
          "micro-batch after the first, as weight-gradient traffic",
          "[planner][step_work]") {
  const ModelSpec m = Spec7b();
  TrainingSpec fused = Training(16, 2048), separate = fused;
  separate.framework.grad_accumulation = GradAccumulation::kSeparate;
  ParallelPlan p;
  p.dp = 2;
  p.tp = 2;
  p.zero_stage = GENERATE(0, 1, 2, 3);
  p.micro_batch = GENERATE(1, 2, 8);  // 8, 4 and 1 micro-batches per dp rank
  INFO("zero " << p.zero_stage << " mbs " << p.micro_batch);
  const StepWork a = BuildStepWork(m, fused, p), b = BuildStepWork(m, separate, p);
  const double mb = static_cast<double>(a.micro_batches);
  const double shards = p.zero_stage >= 2 ? 2.0 : 1.0;  // ZeRO-2/3 accumulate the dp shard
  for (const auto& [x, y] : {std::pair{&a.block, &b.block}, std::pair{&a.embedding, &b.embedding},
                             std::pair{&a.head, &b.head}}) {
    const double want = (mb - 1) / mb * 3 * 2 * static_cast<double>(x->params) / shards;
    CHECK(y->backward_weight.memory_bytes - x->backward_weight.memory_bytes ==
          Approx(want).margin(1e-6));
    CHECK(y->backward_weight.matmul_flops == x->backward_weight.matmul_flops);
    CHECK(y->forward.memory_bytes == x->forward.memory_bytes);
  }
  if (a.micro_batches > 1) CHECK(b.block.backward_weight.memory_bytes > a.block.backward_weight.memory_bytes);
}

// A gpt block (Megatron-LM GPT: LayerNorm, biases, GeLU MLP of 4E, dropout), MHA.
ModelSpec SmallGpt() {
  ModelSpec m = testing::SpecLlama(1024, 16, 2, 4096, /*tied=*/true);
  m.block = BlockKind::kGpt;
  m.vocab_size = 1024;
  return m;
}

// The software of the gpt tests below: Megatron-LM 2022's kernels, attention and optimizer.
TrainingSpec Megatron2022(TrainingSpec t) {
  t.framework = LoadFramework("megatron-lm-2022");
  return t;
}

TEST_CASE("gpt block: Megatron-LM's memory-bound kernels op by op, the backward its own",
          "[planner][step_work]") {
  // tp = 2 without SP: T = 2 x 512 tokens, fp16 activations (a = 2), bytes in units of T*E.
  ParallelPlan p;
  p.tp = 2;
  p.micro_batch = 2;
  const StepWork w = BuildStepWork(SmallGpt(), Megatron2022(Training(2, 512)), p);
  const double TE = 1024.0 * 1024.0;
  // Forward: 2 LayerNorms 2 x 2a, the QKV bias add_ 2a x 3E/tp, the context's
  // permute-contiguous copy 2a x E/tp, 2 bias-dropout-adds 2 x (3a + 1), bias-GeLU 2a x 4E/tp.
  const double fwd = 8 + 6 + 2 + 14 + 8;
  // Backward: 2 bias-dropout-adds 2 x (3a + 1), 2 residual gradient sums 2 x 3a,
  // 2 LayerNorms 2 x 5a, bias-GeLU 4a x 4E/tp, the q and k gradients x alpha 2a x 2E/tp,
  // the q, k, v cat 2a x 3E/tp, the QKV bias gradient a x 3E/tp.
  const double bwd = 14 + 12 + 20 + 16 + 4 + 6 + 3;
  CHECK(w.block.forward.memory_bytes - w.block.attention_forward.memory_bytes == Approx(fwd * TE));
  CHECK(w.block.backward_input.memory_bytes - w.block.attention_backward.memory_bytes ==
        Approx(bwd * TE));
  // Kernels: 4 linear GEMMs in each pass, 7 memory-bound forward and 18 backward.
  CHECK(w.block.forward.kernels - w.block.attention_forward.kernels == 4 + 7);
  CHECK(w.block.backward_input.kernels - w.block.attention_backward.kernels == 4 + 18);
  // Full recompute replays the forward, memory-bound kernels included.
  CHECK(w.block.recompute[static_cast<int>(Recompute::kFull)].memory_bytes ==
        w.block.forward.memory_bytes);

  // A llama block keeps its backward at twice the forward's bytes.
  const StepWork l = BuildStepWork(testing::SpecLlama(1024, 16, 2, 2816), Training(2, 512), p);
  CHECK(l.block.backward_input.memory_bytes - l.block.attention_backward.memory_bytes ==
        Approx(2 * (l.block.forward.memory_bytes - l.block.attention_forward.memory_bytes)));
}

TEST_CASE("selective recompute replays Transformer Engine's copies inside the attention call",
          "[planner][step_work]") {
  // Megatron-Core's selective recompute checkpoints TE's DotProductAttention call: its v copy,
  // its transposes to and from [b, s, h, d] (flash-attn, two sequences) and its CP ring copies
  // replay with the flash kernel, whose own memory traffic is none. Megatron's q reshape and
  // the split's backward cat stay outside.
  TrainingSpec t = Training(8, 512);
  t.framework.kernels = KernelSet::kFused;
  t.framework.attention_kernel = AttentionKernel::kFlash2;
  const ModelSpec m = testing::SpecLlama(1024, 8, 2, 2816);
  ParallelPlan p;
  p.dp = 2;
  p.cp = 2;
  p.micro_batch = 2;
  p.recompute = Recompute::kSelective;
  const StepWork w = BuildStepWork(m, t, p);
  const RankShape shape = MakeRankShape(m, t, p);
  double in_call = 0;
  for (const BlockOp& op : BuildBlockOps(m, shape, LoweringOf(shape, AttentionImpl::kFused)))
    if (op.in_attention_call) in_call += op.forward.bytes;
  CHECK(in_call > 0);
  CHECK(w.block.recompute[static_cast<int>(Recompute::kSelective)].memory_bytes ==
        Approx(in_call));
  // The executor's kernels make none of them: selective replays the flash kernel alone.
  t.framework.kernels = KernelSet::kEager;
  CHECK(BuildStepWork(m, t, p).block.recompute[static_cast<int>(Recompute::kSelective)]
            .memory_bytes == 0);
}

TEST_CASE("gpt attention core: Megatron-LM's fused causal softmax reads the lower triangle only",
          "[planner][step_work]") {
  // 2 x 16/2 heads x 512 x 512 scores in fp16: the softmax reads (512 + 1) / 1024 of each
  // row and writes all of it; the dropout reads and writes all of it with a 1-byte mask.
  ParallelPlan p;
  p.tp = 2;
  p.micro_batch = 2;
  const StepWork w = BuildStepWork(SmallGpt(), Megatron2022(Training(2, 512)), p, AttentionImpl::kNaive);
  const double scores = 2.0 * 8 * 512 * 512, read = 513.0 / 1024;
  CHECK(w.block.attention_forward.memory_bytes == Approx(scores * ((read + 1) * 2 + 5)));
  CHECK(w.block.attention_backward.memory_bytes == Approx(scores * ((2 * read + 1) * 2 + 5)));
  // fp32 scores take PyTorch's softmax, which reads every score.
  const StepWork f = BuildStepWork(SmallGpt(), Megatron2022(Training(2, 512, Precision::kFp32)), p);
  CHECK(f.block.attention_forward.memory_bytes == Approx(scores * (2 * 4 + 9)));
  CHECK(f.block.attention_backward.memory_bytes == Approx(scores * (3 * 4 + 9)));
}

TEST_CASE("the head's loss: Megatron-LM's (and the executor's) cross-entropy on an fp32 copy of the logits", "[planner][step_work]") {
  // T = 2 x 512 tokens, V/tp = 1024/2 logits per token, E = 1024, fp16 activations.
  ParallelPlan p;
  p.tp = 2;
  p.micro_batch = 2;
  const double T = 1024, logits = T * 512, norm = 2 * T * 1024 * 2;
  const StepWork w = BuildStepWork(SmallGpt(), Megatron2022(Training(2, 512)), p);
  // Forward: cast 2 + 4, max 4, sub_ 8, exp 8, sum 4, div_ 8; backward: mul_ 8, cast 4 + 2.
  // The final norm is the blocks' fused LayerNorm: read + write forward, backward 5 per
  // element (dy and x read twice, dx written) in 3 kernels.
  CHECK(w.head.forward.memory_bytes == Approx(norm + logits * 38));
  CHECK(w.head.backward_input.memory_bytes == Approx(2.5 * norm + logits * 14));
  CHECK(w.head.forward.kernels == 1 + 1 + 6);
  CHECK(w.head.backward_input.kernels == 3 + 1 + 2);
  // fp32 logits need no cast.
  const StepWork f = BuildStepWork(SmallGpt(), Megatron2022(Training(2, 512, Precision::kFp32)), p);
  CHECK(f.head.forward.memory_bytes == Approx(2 * norm + logits * 32));
  CHECK(f.head.backward_input.memory_bytes == Approx(5 * norm + logits * 8));
  // A llama head runs the same loss: the executor's CrossEntropyForward / Backward (and
  // VocabParallelCrossEntropy* with tp > 1) make the same passes.
  ModelSpec llama = testing::SpecLlama(1024, 16, 2, 2816, true);
  llama.vocab_size = 1024;
  const StepWork l = BuildStepWork(llama, Training(2, 512), p);
  CHECK(l.head.forward.memory_bytes == Approx(norm + logits * 38));
  CHECK(l.head.backward_input.memory_bytes == Approx(2 * norm + logits * 14));
  // Launches: the executor's RMSNorm (7, + rstd's cast in 16-bit), the lm_head, the loss's 6.
  CHECK(l.head.forward.kernels == 8 + 1 + 6);
  CHECK(l.head.backward_input.kernels == 11 + 1 + 2);
}

TEST_CASE("gpt in mixed precision: Megatron-LM's fp16 optimizer step moves 52 bytes per parameter",
          "[planner][step_work]") {
  // Gradient to fp32 6, unscale 8, grad-norm 4, Adam 28, fp32 -> fp16 params 6.
  ParallelPlan p;
  p.dp = 2;
  const StepWork gpt = BuildStepWork(SmallGpt(), Megatron2022(Training(2, 512)), p);
  const StageParts all = PartsOfStage(gpt, 0);
  const double params = static_cast<double>(2 * gpt.block.params + gpt.embedding.params + gpt.head.params);
  CHECK(OptimizerWork(gpt, all).memory_bytes == Approx(52 * params));
  p.zero_stage = 1;  // the dp shard
  CHECK(OptimizerWork(BuildStepWork(SmallGpt(), Megatron2022(Training(2, 512)), p), all).memory_bytes ==
        Approx(52 * params / 2));
  // A llama block keeps the fused mixed-precision step: 28 bytes.
  p.zero_stage = 0;
  ModelSpec llama = testing::SpecLlama(1024, 16, 2, 2816, true);
  const StepWork l = BuildStepWork(llama, Training(2, 512), p);
  const double lparams = static_cast<double>(2 * l.block.params + l.embedding.params + l.head.params);
  CHECK(OptimizerWork(l, PartsOfStage(l, 0)).memory_bytes == Approx(28 * lparams));
  CHECK(BuildStepWork(SmallGpt(), Megatron2022(Training(2, 512, Precision::kBf16)), p).optimizer_bytes_per_param == 14);
  // torch.optim.AdamW's foreach path: weight decay (2w), lerp m (3), v * beta2 (2), addcmul
  // v (3), d = sqrt(v) (2), d / bc2 and d + eps (2 + 2), addcdiv w (4): 4w + 12s + 2g.
  TrainingSpec foreach = Training(2, 512, Precision::kBf16);
  foreach.framework.optimizer = OptimizerStep::kForeachAdam;
  CHECK(BuildStepWork(llama, foreach, p).optimizer_bytes_per_param == 4 * 2 + 12 * 2 + 2 * 2);
  foreach.precision = Precision::kFp32;
  CHECK(BuildStepWork(llama, foreach, p).optimizer_bytes_per_param == 4 * 4 + 12 * 4 + 2 * 4);
  foreach.precision = Precision::kMixed;  // on the fp32 master, then its bf16 copy
  CHECK(BuildStepWork(llama, foreach, p).optimizer_bytes_per_param == 4 * 4 + 12 * 4 + 2 * 2 + 2);
}

TEST_CASE("the busiest block fits the fixed collective list", "[planner][step_work]") {
  ParallelPlan p;
  p.tp = 2;
  p.cp = 2;
  p.dp = 2;
  p.sequence_parallel = true;
  p.recompute = Recompute::kFull;
  p.zero_stage = 3;
  const StepWork w = BuildStepWork(Spec7b(), Training(8, 1024), p);
  CHECK(w.block.collectives.size == 12 + 3 + 3);  // TP fwd/bwd/recompute, CP, ZeRO-3
  CHECK(w.block.collectives.size <= kMaxCollectivesPerPart);
  CHECK(w.head.collectives.size <= kMaxCollectivesPerPart);
  CHECK(w.embedding.collectives.size <= kMaxCollectivesPerPart);
}

TEST_CASE("pipeline sends per micro-batch and stage", "[planner][step_work]") {
  ParallelPlan p;
  p.pp = 4;
  p.virtual_stages = 2;
  p.schedule = PipelineSchedule::kInterleaved;
  const StepWork w = BuildStepWork(Spec7b(), Training(8, 1024), p);
  CHECK(PpActivationSends(w, 0) == 2);
  CHECK(PpActivationSends(w, 3) == 1);  // the last chunk's output goes to the loss
  CHECK(PpGradientSends(w, 0) == 1);    // the first chunk's input gradient goes nowhere
  CHECK(PpGradientSends(w, 3) == 2);
  CHECK(w.pp_activation.bytes == 1024.0 * 4096 * 2);
  CHECK(w.stage_layers.Of(1) == 12);
}

// Reference: the two streams simulated chunk by chunk.
OverlapClock Simulated(bool prefetch, int64_t n, double compute, double comm, OverlapClock c) {
  for (int64_t j = 0; j < n; ++j) {
    if (prefetch) {
      c.comm_end += comm;
      c.compute_end = std::max(c.compute_end, c.comm_end) + compute;
    } else {
      c.compute_end += compute;
      c.comm_end = std::max(c.comm_end, c.compute_end) + comm;
    }
    c.compute_sum += compute;
  }
  return c;
}

TEST_CASE("the overlap clock's closed forms match a chunk-by-chunk simulation",
          "[planner][step_time]") {
  const bool prefetch = GENERATE(true, false);
  const int64_t n = GENERATE(1, 2, 7, 32);
  const double compute = GENERATE(1.0, 3.0);
  const double comm = GENERATE(0.5, 1.0, 2.5, 6.0);
  const double start_comm = GENERATE(0.0, 4.0);
  OverlapClock start;
  start.compute_end = 2.0;
  start.comm_end = start_comm;
  start.compute_sum = 2.0;
  OverlapClock fast = start;
  if (prefetch) fast.Prefetch(n, compute, comm);
  else fast.Drain(n, compute, comm);
  const OverlapClock slow = Simulated(prefetch, n, compute, comm, start);
  CHECK(fast.compute_end == Approx(slow.compute_end));
  CHECK(fast.comm_end == Approx(slow.comm_end));
  CHECK(fast.exposed() == Approx(slow.exposed()));
}

TEST_CASE("gradient buckets: only the last bucket's tail shows when comm is shorter",
          "[planner][step_time]") {
  OverlapClock c;
  c.Drain(10, 1.0, 0.4);
  CHECK(c.exposed() == Approx(0.4));
  OverlapClock slow;
  slow.Drain(10, 1.0, 2.0);  // sync longer than the backward after the first bucket
  CHECK(slow.exposed() == Approx(10 * 2.0 - 9 * 1.0));
}

}  // namespace
}  // namespace meshplan
