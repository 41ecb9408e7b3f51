// The detailed memory model: Megatron's activation formula from the op list,
// the Llama op list, pipeline micro-batches in flight, ZeRO, buffers and phases.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>

#include "planner/config/framework_yaml.h"
#include "planner/cost/activation_memory.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/param_count.h"
#include "planner/cost/pipeline_in_flight.h"
#include "planner/cost/rank_shape.h"
#include "planner/names.h"

namespace meshplan {
namespace {

using Catch::Matchers::WithinRel;

ModelSpec Llama(int64_t E, int64_t H, int64_t L, int64_t F, bool tied = false) {
  ModelSpec m;
  m.vocab_size = 50257;
  m.hidden = E;
  m.heads = H;
  m.kv_heads = H;
  m.layers = L;
  m.ffn_hidden = F;
  m.tied_embeddings = tied;
  return m;
}

ModelSpec Gpt(int64_t h, int64_t a, int64_t L) {
  ModelSpec m = Llama(h, a, L, 4 * h, true);
  m.block = BlockKind::kGpt;
  m.max_seq = 2048;
  return m;
}

MemoryBreakdown Detailed(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& p,
                         int64_t stage, AttentionImpl impl = AttentionImpl::kAuto) {
  return EstimateStageMemory(m, t, p, MemoryModel::kDetailed, stage, MemoryOptions{impl});
}

double FieldSum(const MemoryBreakdown& b) {
  return b.params_bytes + b.grads_bytes + b.optimizer_bytes + b.activations_bytes + b.logits_bytes +
         b.comm_buffer_bytes + b.gathered_params_bytes + b.transient_bytes;
}

TEST_CASE("Megatron closed form is docs/cost_model.md 2(d) verbatim",
          "[planner][memory][megatron]") {
  const double s = 2048, b = 4, h = 2048, a = 16;
  CHECK(MegatronActivationBytesPerLayer(2048, 4, 2048, 16, 1, false, Recompute::kNone) ==
        s * b * h * (34 + 5 * a * s / h));
  const double t = GENERATE(1, 2, 4, 8);
  const auto T = static_cast<int64_t>(t);
  CHECK_THAT(MegatronActivationBytesPerLayer(2048, 4, 2048, 16, T, false, Recompute::kNone),
             WithinRel(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), 1e-14));
  CHECK_THAT(MegatronActivationBytesPerLayer(2048, 4, 2048, 16, T, true, Recompute::kNone),
             WithinRel(s * b * h * (34 + 5 * a * s / h) / t, 1e-14));
  CHECK_THAT(MegatronActivationBytesPerLayer(2048, 4, 2048, 16, T, true, Recompute::kSelective),
             WithinRel(34 * s * b * h / t, 1e-14));
  CHECK(MegatronActivationBytesPerLayer(2048, 4, 2048, 16, T, false, Recompute::kFull) ==
        2 * s * b * h);
}

TEST_CASE("GPT op list sums to Megatron's formula", "[planner][memory][megatron]") {
  const ModelSpec m = Gpt(2048, 16, 24);
  const int64_t t = GENERATE(1, 2, 4, 8);
  const bool sp = GENERATE(false, true);
  const Recompute recompute = GENERATE(Recompute::kNone, Recompute::kSelective, Recompute::kFull);
  CAPTURE(t, sp, ToString(recompute));
  TrainingSpec training{.global_batch = 8, .seq_len = 2048, .precision = Precision::kBf16};
  training.framework = LoadFramework("megatron-lm-2022");  // the paper's unfused attention
  ParallelPlan plan;
  plan.tp = t;
  plan.sequence_parallel = sp && t > 1;
  plan.micro_batch = 4;
  plan.recompute = recompute;
  const RankShape shape = MakeRankShape(m, training, plan);
  REQUIRE(ResolveAttentionImpl(AttentionImpl::kAuto, training.framework, training.precision) ==
          AttentionImpl::kNaive);
  const SavedTensorList saved = BlockSavedTensors(m, shape, AttentionImpl::kNaive, recompute);
  CHECK_THAT(saved.MegatronBytes(),
             WithinRel(MegatronActivationBytesPerLayer(2048, 4, 2048, 16, t, plan.sequence_parallel,
                                                       recompute),
                       1e-14));
  // What the formula leaves out: LayerNorm mean and rstd, fp32 per row (B, Sn), two norms.
  const double rows = 4.0 * 2048 / (plan.sequence_parallel ? t : 1);
  const double statistics = recompute == Recompute::kFull ? 0.0 : 2 * 2 * 4 * rows;
  CHECK(saved.TotalBytes() - saved.MegatronBytes() == statistics);
  // Saved + recomputed = the whole no-recompute set.
  CHECK(saved.TotalBytes() +
            BlockRecomputedTensors(m, shape, AttentionImpl::kNaive, recompute).TotalBytes() ==
        BlockSavedTensors(m, shape, AttentionImpl::kNaive, Recompute::kNone).TotalBytes());
}

TEST_CASE("detailed model stores L layers of the op list on one GPU", "[planner][memory]") {
  const ModelSpec m = Gpt(2048, 16, 24);
  TrainingSpec training{.global_batch = 4, .seq_len = 2048, .precision = Precision::kBf16};
  training.framework = LoadFramework("megatron-lm-2022");  // the paper's unfused attention
  ParallelPlan plan;
  plan.micro_batch = 4;
  const MemoryBreakdown b = Detailed(m, training, plan, 0);
  const RankShape shape = MakeRankShape(m, training, plan);
  const double layers =
      24 * BlockSavedTensors(m, shape, AttentionImpl::kNaive, Recompute::kNone).TotalBytes();
  const double ends =
      FirstStageSavedTensors(m, shape).TotalBytes() + LastStageSavedTensors(m, shape).TotalBytes();
  CHECK(b.peak_phase != "optimizer");  // a backward phase: every activation is alive
  CHECK_THAT(b.activations_bytes, WithinRel(layers + ends, 1e-14));
  CHECK_THAT(
      b.activations_bytes,
      WithinRel(24 * MegatronActivationBytesPerLayer(2048, 4, 2048, 16, 1, false, Recompute::kNone),
                0.01));  // the rest: norm statistics, token ids, final norm, lm_head input
  CHECK(b.total_bytes == FieldSum(b));
}

TEST_CASE("Llama op list: RMSNorm, GQA, SwiGLU, naive vs fused attention", "[planner][memory]") {
  ModelSpec m = Llama(1024, 8, 16, 1536);
  m.kv_heads = 2;  // GQA: K and V are (B, S, K*D)
  TrainingSpec training{.global_batch = 2, .seq_len = 512, .precision = Precision::kBf16};
  ParallelPlan plan;
  plan.micro_batch = 2;
  const RankShape sh = MakeRankShape(m, training, plan);
  const double b = 2, s = 512, E = 1024, KD = 2 * 128, F = 1536, H = 8, A = 2;
  const double naive =
      BlockSavedTensors(m, sh, AttentionImpl::kNaive, Recompute::kNone).TotalBytes();
  const double fused =
      BlockSavedTensors(m, sh, AttentionImpl::kFused, Recompute::kNone).TotalBytes();
  // x, normed x, q, attention output, h, normed h: (B,S,E); k, v: (B,S,K*D);
  // gate, up, down input: (B,S,F); two fp32 rstd (B,S).
  const double common = A * b * s * (6 * E + 2 * KD + 3 * F) + 2 * 4 * b * s;
  CHECK(naive == common + A * b * H * s * s);  // + the softmax output P
  CHECK(fused == common + 4 * b * H * s);      // + the fp32 logsumexp
  CHECK(BlockSavedTensors(m, sh, AttentionImpl::kFused, Recompute::kSelective).TotalBytes() ==
        common);
  CHECK(BlockSavedTensors(m, sh, AttentionImpl::kNaive, Recompute::kFull).TotalBytes() ==
        A * b * s * E);
  // fp32 doubles every activation but the fp32 statistics.
  training.precision = Precision::kFp32;
  const RankShape sh32 = MakeRankShape(m, training, plan);
  CHECK(BlockSavedTensors(m, sh32, AttentionImpl::kNaive, Recompute::kNone).TotalBytes() ==
        2 * (naive - 2 * 4 * b * s) + 2 * 4 * b * s);
  // Auto: naive on fp32 (the CPU executor), fused in bf16 / mixed.
  const FrameworkSpec executor;  // attention auto
  CHECK(ResolveAttentionImpl(AttentionImpl::kAuto, executor, Precision::kFp32) == AttentionImpl::kNaive);
  CHECK(ResolveAttentionImpl(AttentionImpl::kAuto, executor, Precision::kMixed) == AttentionImpl::kFused);
}

TEST_CASE("context parallel splits the sequence, ring attention keeps no probabilities",
          "[planner][memory]") {
  const ModelSpec m = Llama(1024, 8, 16, 1536);
  TrainingSpec training{.global_batch = 1, .seq_len = 4096, .precision = Precision::kBf16};
  ParallelPlan plan;
  const RankShape one = MakeRankShape(m, training, plan);
  plan.cp = 4;
  const RankShape four = MakeRankShape(m, training, plan);
  const double fused1 =
      BlockSavedTensors(m, one, AttentionImpl::kFused, Recompute::kNone).TotalBytes();
  const double fused4 =
      BlockSavedTensors(m, four, AttentionImpl::kFused, Recompute::kNone).TotalBytes();
  CHECK(fused4 == fused1 / 4);
  // The executor's ring attention (executor/parallel/ring_attention.h) is flash-style whatever the
  // single-rank attention: local (B,S/4,E) terms, q, k, v of the local chunk and the
  // logsumexp (B,H,S/4) fp32; nothing of S/4 x S.
  const double naive4 =
      BlockSavedTensors(m, four, AttentionImpl::kNaive, Recompute::kNone).TotalBytes();
  const double sc = 1024, E = 1024, F = 1536, KD = 8 * 128;  // K = H = 8 heads of 128
  CHECK(naive4 == 2 * sc * (6 * E + 2 * KD + 3 * F) + 2 * 4 * sc + 4 * 8 * sc);
  CHECK(naive4 == fused4);
  // Selective recompute recomputes nothing of the ring (its logsumexp stays).
  CHECK(BlockSavedTensors(m, four, AttentionImpl::kNaive, Recompute::kSelective).TotalBytes() ==
        naive4);
  CHECK(BlockSavedTensors(m, one, AttentionImpl::kNaive, Recompute::kSelective).TotalBytes() <
        BlockSavedTensors(m, one, AttentionImpl::kNaive, Recompute::kNone).TotalBytes());
}

TEST_CASE("pipeline micro-batches in flight", "[planner][memory][pipeline]") {
  ParallelPlan plan;
  plan.pp = 4;
  // 16 layers: 4 per stage, or 2 per chunk with vpp = 2 (equal chunks).
  auto CountMicrobatchesInFlight = [](const ParallelPlan& p, int64_t m, int64_t stage) {
    return meshplan::CountMicrobatchesInFlight(p, 16, m, stage);
  };
  SECTION("1F1B: stage i holds min(m, pp - i); the last holds 1") {
    for (int64_t stage = 0; stage < 4; ++stage)
      CHECK(CountMicrobatchesInFlight(plan, 8, stage).blocks == 4 - stage);
    CHECK(CountMicrobatchesInFlight(plan, 2, 0).blocks == 2);
    CHECK(CountMicrobatchesInFlight(plan, 8, 3).last_stage == 1);
    plan.schedule = PipelineSchedule::kZeroBubbleH1;
    CHECK(CountMicrobatchesInFlight(plan, 8, 0).blocks == 4);
  }
  SECTION("GPipe holds all m") {
    plan.schedule = PipelineSchedule::kGpipe;
    for (int64_t stage = 0; stage < 4; ++stage) {
      CHECK(CountMicrobatchesInFlight(plan, 8, stage).blocks == 8);
      CHECK(CountMicrobatchesInFlight(plan, 8, stage).last_stage == 8);
    }
  }
  SECTION("interleaved: stage 0 holds pp + (pp - 1) / vpp (Korthikanti et al.)") {
    plan.schedule = PipelineSchedule::kInterleaved;
    plan.virtual_stages = 2;
    CHECK(CountMicrobatchesInFlight(plan, 16, 0).blocks == 4 + 3.0 / 2);
    CHECK(CountMicrobatchesInFlight(plan, 16, 3).blocks == 5.0 / 2);  // ((vpp-1)*pp + 1)/vpp
    CHECK(CountMicrobatchesInFlight(plan, 16, 3).last_stage == 1);
    CHECK(CountMicrobatchesInFlight(plan, 4, 2).blocks == 4);  // m == pp: all forwards first
  }
  SECTION("interleaved, uneven ends: the most layers alive as a backward starts") {
    plan.schedule = PipelineSchedule::kInterleaved;
    plan.virtual_stages = 2;
    plan.first_stage_layers = plan.last_stage_layers = 3;  // 14 layers: 3 + 4 + 4 + 3
    const StageLayers split = SplitLayers(14, plan);
    REQUIRE(split.ChunkOf(0, 0) == 1);
    REQUIRE(split.ChunkOf(0, 1) == 2);
    // Stage 0, m = 8: forwards run chunks 0,0,0,0,1,1,1,1,0,0,0,0,1,1,1,1 and backwards
    // 1,1,1,1,0,0,0,0,1,... after 10 warm-up forwards (4x1 + 4x2 + 2x1 = 14 layers), one
    // forward then one backward: 15 before the first backward (and again before the sixth:
    // F15 adds 2 after B4 removed 1). The equal-chunk count would say 11 / 2 = 5.5 stages.
    CHECK(meshplan::CountMicrobatchesInFlight(plan, 14, 8, 0).blocks == Approx(15.0 / 3));
    // Middle stages' chunks are equal: the closed form.
    CHECK(meshplan::CountMicrobatchesInFlight(plan, 14, 8, 1).blocks == Approx(4 + 1.0 / 2));
  }
  SECTION("no pipeline: one micro-batch at a time") {
    plan.pp = 1;
    plan.schedule = PipelineSchedule::kGpipe;
    CHECK(CountMicrobatchesInFlight(plan, 32, 0).blocks == 1);
  }
}

TEST_CASE("1F1B activations per stage follow the micro-batches in flight",
          "[planner][memory][pipeline]") {
  const ModelSpec m = Llama(4096, 32, 48, 6144);
  TrainingSpec training{.global_batch = 16, .seq_len = 2048, .precision = Precision::kBf16};
  ParallelPlan plan;
  plan.pp = 4;
  const MemoryBreakdown s1 = Detailed(m, training, plan, 1), s2 = Detailed(m, training, plan, 2);
  REQUIRE(s1.peak_phase == "layer_backward");
  REQUIRE(s2.peak_phase == "layer_backward");
  CHECK_THAT(s1.activations_bytes / s2.activations_bytes, WithinRel(3.0 / 2.0, 1e-14));
  const MemoryBreakdown worst = EstimateMemory(m, training, plan, MemoryModel::kDetailed);
  CHECK(worst.worst_stage == 0);
  plan.schedule = PipelineSchedule::kGpipe;
  CHECK(Detailed(m, training, plan, 1).activations_bytes ==
        Approx(s1.activations_bytes * 16 / 3).epsilon(1e-14));
}

TEST_CASE("the worst stage is the most loaded of all stages", "[planner][memory][pipeline]") {
  const ModelSpec m = Llama(1024, 8, 16, 1536);
  const PipelineSchedule schedule =
      GENERATE(PipelineSchedule::kGpipe, PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved);
  const int64_t seq = GENERATE(64, 2048);
  const MemoryModel model = GENERATE(MemoryModel::kSeed, MemoryModel::kDetailed);
  TrainingSpec training{.global_batch = 16, .seq_len = seq, .precision = Precision::kMixed};
  ParallelPlan plan;
  plan.pp = 4;
  plan.schedule = schedule;
  if (schedule == PipelineSchedule::kInterleaved) plan.virtual_stages = 2;
  double most = 0;
  int64_t most_stage = -1;
  for (int64_t stage = 0; stage < plan.pp; ++stage) {
    const double total = EstimateStageMemory(m, training, plan, model, stage).total_bytes;
    if (total > most) most = total, most_stage = stage;
  }
  const MemoryBreakdown worst = EstimateMemory(m, training, plan, model);
  CHECK(worst.total_bytes == most);
  CHECK(worst.worst_stage == most_stage);
}

TEST_CASE("ZeRO stages decrease model-state memory monotonically", "[planner][memory][zero]") {
  const ModelSpec m = Llama(4096, 32, 48, 6144);
  const Precision precision = GENERATE(Precision::kBf16, Precision::kMixed, Precision::kFp32);
  TrainingSpec training{.global_batch = 64, .seq_len = 2048, .precision = precision};
  ParallelPlan plan;
  plan.dp = 8;
  double previous = 0;
  for (int zero = 0; zero <= 3; ++zero) {
    plan.zero_stage = zero;
    const MemoryBreakdown b = Detailed(m, training, plan, 0);
    const double states = b.params_bytes + b.grads_bytes + b.optimizer_bytes;
    if (zero > 0) CHECK(states < previous);
    previous = states;
    CHECK(b.total_bytes == FieldSum(b));
  }
}

TEST_CASE("detailed model states: the seed's plus the executor's layout", "[planner][memory][zero]") {
  const ModelSpec m = Llama(4096, 32, 48, 6144);
  const int zero = GENERATE(0, 1, 2, 3);
  TrainingSpec training{.global_batch = 64, .seq_len = 2048, .precision = Precision::kMixed};
  ParallelPlan plan;
  plan.dp = 8;
  plan.tp = 2;
  plan.pp = 2;
  plan.zero_stage = zero;
  // Model buffers: causal mask (S,S) bool + RoPE cos/sin (S, D/2) in the activation dtype
  // (bf16 under mixed; D = 128).
  const double buffers = 2048.0 * 2048 + 2 * 2048.0 * 64 * 2;
  // Padding: each group (embedding, 24 blocks, head) to a multiple of 8, 2-byte weights.
  const double padding = 26 * 7 * 2.0;
  for (int64_t stage = 0; stage < 2; ++stage) {
    const MemoryBreakdown d = Detailed(m, training, plan, stage);
    const MemoryBreakdown s = EstimateStageMemory(m, training, plan, MemoryModel::kSeed, stage);
    CHECK(d.params_bytes - s.params_bytes >= buffers);
    CHECK(d.params_bytes - s.params_bytes <= buffers + padding);
    // ZeRO-1 keeps the reduce-scattered gradient shard besides the full gradients.
    const double shard = zero == 1 ? s.grads_bytes / 8 : 0.0;
    CHECK(d.grads_bytes - s.grads_bytes - shard >= 0);
    CHECK(d.grads_bytes - s.grads_bytes - shard <= padding);
    const double rank_params = double(CountStageParams(m, plan, stage).total());
    // Mixed precision: the fp32 master, m and v are 12 bytes per (sharded) parameter.
    CHECK(d.optimizer_bytes == Approx(12 * rank_params / (zero >= 1 ? 8 : 1)).epsilon(1e-6));
  }
}

TEST_CASE("memory decreases with tensor parallel", "[planner][memory]") {
  const ModelSpec m = Llama(4096, 32, 48, 6144);
  const bool sp = GENERATE(false, true);
  TrainingSpec training{.global_batch = 8, .seq_len = 2048, .precision = Precision::kMixed};
  ParallelPlan plan;
  double previous = 0;
  for (int64_t tp : {1, 2, 4, 8}) {
    plan.tp = tp;
    plan.sequence_parallel = sp && tp > 1;
    const MemoryBreakdown b = EstimateMemory(m, training, plan, MemoryModel::kDetailed);
    if (tp > 1) {
      CHECK(b.total_bytes < previous);
    }
    previous = b.total_bytes;
  }
}

TEST_CASE("buffers: in-place gradient all-reduce, ZeRO-3 gathers the computing and the next group",
          "[planner][memory][zero]") {
  const ModelSpec m = Llama(4096, 32, 48, 6144);
  TrainingSpec training{.global_batch = 64, .seq_len = 2048, .precision = Precision::kMixed};
  ParallelPlan plan;
  plan.dp = 8;
  const MemoryBreakdown ddp = Detailed(m, training, plan, 0);
  CHECK(ddp.comm_buffer_bytes == 0);  // each group's gradient is all-reduced in place
  CHECK(ddp.gathered_params_bytes == 0);
  plan.zero_stage = 3;
  const MemoryBreakdown z3 = Detailed(m, training, plan, 0);
  // The lm_head backward: the head group (final norm + the 50257 x 4096 lm_head, padded
  // to a multiple of 8) and the last block, prefetched as the head's backward starts, are
  // gathered, bf16; the head's full bf16 gradient.
  const double head_unit = std::ceil((4096 + 50257.0 * 4096) / 8) * 8;
  const double block_unit = std::ceil(double(BlockParamsPerTpRank(m, 1)) / 8) * 8;
  REQUIRE(z3.peak_phase == "head_backward");
  CHECK(z3.gathered_params_bytes == 2.0 * (head_unit + block_unit));
  CHECK(z3.comm_buffer_bytes == 2.0 * head_unit);
  plan.dp = 1;  // nothing to shard with one data-parallel rank
  const MemoryBreakdown single = Detailed(m, training, plan, 0);
  CHECK(single.gathered_params_bytes == 0);
  CHECK(single.comm_buffer_bytes == 0);
}

TEST_CASE("a PyTorch cross-entropy keeps the caller's logits and log_softmax's output through "
          "the backward (torchtitan 2024: in fp32)", "[planner][memory]") {
  ModelSpec m = Llama(256, 4, 2, 512, true);
  m.vocab_size = 128'256;
  TrainingSpec training{.global_batch = 1, .seq_len = 1024, .precision = Precision::kBf16};
  const double logits = 1024.0 * 128'256;  // B x S x V
  const MemoryBreakdown executor = Detailed(m, training, ParallelPlan{}, 0, AttentionImpl::kFused);
  training.framework.loss = LossKernel::kCrossEntropyFp32;
  const RankShape shape = MakeRankShape(m, training, ParallelPlan{});
  // pred = self.output(h).float() and log_softmax's output, 4 bytes each; the loss backward's
  // two fp32 gradients; pred outlives the backward (train.py drops it at the next forward).
  CHECK(LossSavedTensors(shape).TotalBytes() == 8 * logits);
  CHECK(HeadBackwardWorkspace(shape).TotalBytes() == 8 * logits);
  CHECK(LossHeldBytes(shape) == 4 * logits);
  const MemoryBreakdown b = Detailed(m, training, ParallelPlan{}, 0, AttentionImpl::kFused);
  CHECK(b.peak_phase == "head_backward");
  CHECK(b.logits_bytes == 8 * logits);
  CHECK(b.transient_bytes == 8 * logits);
  CHECK(b.total_bytes == FieldSum(b));
  // The executor's in-place fp32 buffer and its 16-bit copy: 6 bytes per logit at most.
  CHECK(executor.logits_bytes + executor.transient_bytes <= 6 * logits);
  // Plain PyTorch: the same over the model's bf16 logits.
  training.framework.loss = LossKernel::kCrossEntropy;
  const RankShape bf16 = MakeRankShape(m, training, ParallelPlan{});
  CHECK(LossSavedTensors(bf16).TotalBytes() == 4 * logits);
  CHECK(HeadBackwardWorkspace(bf16).TotalBytes() == 4 * logits);
  CHECK(LossHeldBytes(bf16) == 2 * logits);
  training.framework.loss = LossKernel::kFp32InPlace;
  CHECK(LossHeldBytes(MakeRankShape(m, training, ParallelPlan{})) == 0);
  // torchtitan since June 2024: the loss casts the bf16 logits to fp32 and train.py deletes
  // `pred` before the backward: log_softmax's fp32 output is kept, the same two fp32
  // gradients in the loss backward, and the peak is the fp32 logits' size lower.
  training.framework.loss = LossKernel::kCrossEntropyFp32Freed;
  const RankShape freed = MakeRankShape(m, training, ParallelPlan{});
  CHECK(LossSavedTensors(freed).TotalBytes() == 4 * logits);
  CHECK(HeadBackwardWorkspace(freed).TotalBytes() == 8 * logits);
  CHECK(LossHeldBytes(freed) == 0);
  const MemoryBreakdown f = Detailed(m, training, ParallelPlan{}, 0, AttentionImpl::kFused);
  CHECK(f.peak_phase == "head_backward");
  CHECK(f.logits_bytes == 4 * logits);
  CHECK(f.transient_bytes == 8 * logits);
  CHECK(b.total_bytes - f.total_bytes >= 4 * logits);  // less the allocator's share of it
}

TEST_CASE("the peak phase is named and the fields sum to it", "[planner][memory]") {
  ParallelPlan plan;
  SECTION("long sequences: the backward of the last layer") {
    ModelSpec m = Llama(1024, 8, 16, 1536);
    m.vocab_size = 32000;
    TrainingSpec training{.global_batch = 1, .seq_len = 16384, .precision = Precision::kFp32};
    const MemoryBreakdown b = Detailed(m, training, plan, 0);
    CHECK(b.peak_phase == "layer_backward");
    CHECK(b.transient_bytes > 0);
    CHECK(b.total_bytes == FieldSum(b));
  }
  SECTION("tiny batch: the optimizer step with Adam's temporaries") {
    const ModelSpec m = Llama(1024, 8, 16, 1536);
    TrainingSpec training{.global_batch = 1, .seq_len = 8, .precision = Precision::kMixed};
    const MemoryBreakdown b = Detailed(m, training, plan, 0);
    CHECK(b.peak_phase == "optimizer");
    CHECK(b.activations_bytes == 0);
    // Adam's denominator (fp32) + the fp32 gradient: 8 bytes per element of the largest
    // parameter group, the head (final norm + the 50257 x 1024 lm_head).
    CHECK(b.transient_bytes == 8.0 * (1024 + 50257 * 1024));
    CHECK(b.total_bytes == FieldSum(b));
    // torch.optim.AdamW's foreach path: one denominator over every parameter of the rank,
    // in bf16 (a bf16 model: no fp32 gradient copy); ZeRO-1 over 2 ranks holds half.
    training.precision = Precision::kBf16;
    training.framework.optimizer = OptimizerStep::kForeachAdam;
    const MemoryBreakdown foreach = Detailed(m, training, plan, 0);
    CHECK(foreach.peak_phase == "optimizer");
    const double params = double(CountParams(m));
    CHECK(foreach.transient_bytes == Approx(2.0 * params).epsilon(1e-6));
    plan.dp = 2;
    plan.zero_stage = 1;
    training.global_batch = 2;
    CHECK(Detailed(m, training, plan, 0).transient_bytes == Approx(params).epsilon(1e-4));
  }
  SECTION("small model, large vocabulary: the loss on the last stage") {
    ModelSpec m = Llama(256, 4, 2, 512, true);
    m.vocab_size = 256'000;
    TrainingSpec training{.global_batch = 4, .seq_len = 1024, .precision = Precision::kBf16};
    plan.micro_batch = 4;
    const MemoryBreakdown b = Detailed(m, training, plan, 0, AttentionImpl::kFused);
    CHECK(b.peak_phase == "head_backward");
    // The fp32 logits buffer (softmax and its gradient in place) ...
    CHECK(b.logits_bytes == 4.0 * 4 * 1024 * 256'000);
    // ... and its bf16 copy for the lm_head backward (the executor casts d(logits) to bf16;
    // the fp32 buffer is freed before the bf16 grad of the lm_head input is allocated, so
    // the copy is the transient peak).
    CHECK(b.transient_bytes == 2.0 * 4 * 1024 * 256'000);
    CHECK(b.total_bytes == FieldSum(b));
  }
}

// Not a CTest test (hidden tag): prints seed vs detailed for the spec-* models (configs/models/).
//   build-*/tests/planner_tests "[.table]"
TEST_CASE("seed vs detailed table for the spec models", "[.table]") {
  struct Row {
    const char* name;
    ModelSpec model;
  };
  const Row rows[] = {{"spec-194m-tied", Llama(1024, 8, 16, 1536, true)},
                      {"spec-246m", Llama(1024, 8, 16, 1536, false)},
                      {"spec-7b", Llama(4096, 32, 48, 6144, false)}};
  std::printf("| model | precision | seq | seed GB | detailed GB | detailed peak phase |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Row& row : rows)
    for (Precision precision : {Precision::kBf16, Precision::kMixed})
      for (int64_t seq : {256, 2048}) {
        TrainingSpec training{.global_batch = 1, .seq_len = seq, .precision = precision};
        const ParallelPlan plan;
        const MemoryBreakdown seed = EstimateMemory(row.model, training, plan, MemoryModel::kSeed);
        const MemoryBreakdown detailed =
            EstimateMemory(row.model, training, plan, MemoryModel::kDetailed);
        std::printf("| %s | %s | %lld | %.2f | %.2f | %s |\n", row.name, ToString(precision),
                    static_cast<long long>(seq), seed.total_bytes / 1e9, detailed.total_bytes / 1e9,
                    detailed.peak_phase.c_str());
        if (precision == Precision::kBf16)
          CHECK(
              seed.total_bytes ==
              Approx(SeedTrainingBytes(row.model, CountParams(row.model), 1, seq)).epsilon(1e-15));
      }
}

}  // namespace
}  // namespace meshplan
