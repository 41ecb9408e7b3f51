// Micro-benchmarks of the executor's ops (see micro_benchmarks.h).
#include "executor/calibration/micro_benchmarks.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "executor/comm/single_rank_communicator.h"
#include "executor/model/fused_attention.h"
#include "executor/model/llama_model.h"
#include "executor/model/ops.h"
#include "executor/model/param_layout.h"
#include "executor/parallel/zero_engine.h"
#include "planner/cost/step_work.h"
#include "planner/parallel_plan.h"

namespace meshplan {

std::string BenchShape::ToString() const { return fmt::format("{}x{}", batch, seq); }

namespace {

// The cost model's work of one micro-batch of `shape` on one rank (no parallelism).
StepWork WorkOf(const ModelSpec& model, const BenchShape& shape, Precision precision,
                Recompute recompute = Recompute::kNone) {
  TrainingSpec training;
  training.global_batch = shape.batch;
  training.seq_len = shape.seq;
  training.precision = precision;
  ParallelPlan plan;
  plan.micro_batch = shape.batch;
  plan.recompute = recompute;
  return BuildStepWork(model, training, plan);
}

// The memory-bound share of one phase of a part: its bytes and kernels less the matmuls
// (as many as the part's weight-gradient kernels) and the attention core (`core`, benchmarked
// on its own).
ComputeWork MemoryShare(const PartWork& part, const ComputeWork& phase, const ComputeWork& core) {
  ComputeWork w;
  w.memory_bytes = phase.memory_bytes - core.memory_bytes;
  w.kernels = phase.kernels - part.backward_weight.kernels - core.kernels;
  return w;
}

at::Tensor Randn(at::IntArrayRef sizes, const BenchContext& ctx, double scale = 1.0) {
  return at::randn(sizes, at::TensorOptions().dtype(at::kFloat)).mul_(scale).to(ctx.device, ctx.dtype);
}

at::Tensor Ones(at::IntArrayRef sizes, const BenchContext& ctx) {
  return at::ones(sizes, at::TensorOptions().device(ctx.device).dtype(ctx.dtype));
}

CalibrationSample Sample(std::string name, const ComputeWork& work, double seconds) {
  CalibrationSample s;
  s.name = std::move(name);
  s.work = work;
  s.seconds = seconds;
  return s;
}

StepSample InStep(CalibrationSample sample, const BenchShape& shape, double per_microbatch,
                  bool detail = true) {
  return {std::move(sample), shape.ToString(), per_microbatch, detail};
}

// RoPE tables as LlamaModel keeps them ((S, D/2) in the activation dtype); the values do
// not matter here.
std::pair<at::Tensor, at::Tensor> RopeTables(int64_t seq, int64_t head_dim, const BenchContext& ctx) {
  const at::Tensor angles =
      at::rand({seq, head_dim / 2}, at::TensorOptions().dtype(at::kFloat)).mul_(3.0);
  return {angles.cos().to(ctx.device, ctx.dtype), angles.sin().to(ctx.device, ctx.dtype)};
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Matmuls

std::vector<StepSample> BenchmarkMatmuls(const ModelSpec& m, const std::vector<BenchShape>& shapes,
                                         const BenchContext& ctx) {
  struct Weight {
    const char* name;
    int64_t in, out;
    double per_microbatch;  // how many of this shape a micro-batch multiplies by
  };
  const int64_t E = m.hidden, KD = m.kv_hidden(), F = m.ffn_hidden, V = m.vocab_size;
  const double L = static_cast<double>(m.layers);
  std::vector<Weight> weights;
  if (KD == E) {
    weights.push_back({"q/k/v/o", E, E, 4 * L});
  } else {
    weights.push_back({"q/o", E, E, 2 * L});
    weights.push_back({"k/v", E, KD, 2 * L});
  }
  weights.push_back({"up/gate", E, F, 2 * L});
  weights.push_back({"down", F, E, L});
  weights.push_back({"lm_head", E, V, 1});
  std::vector<StepSample> out;
  for (const BenchShape& shape : shapes) {
    const int64_t N = shape.batch * shape.seq;
    for (const Weight& wt : weights) {
      const at::Tensor x = Randn({N, wt.in}, ctx);
      const at::Tensor w = Randn({wt.out, wt.in}, ctx, 0.02);
      const at::Tensor dy = Randn({N, wt.out}, ctx);
      at::Tensor dw = at::zeros_like(w);
      // In a step the input activation (forward) or the output gradient (backward) was
      // just written: warm; the weights and the saved input come from further away.
      const double fwd = MedianSeconds([&] { LinearForward(x, w); }, ctx.device, ctx.timing,
                                       [&] { Touch({x}); });
      const double bwd = MedianSeconds([&] { LinearBackward(dy, x, w, dw); }, ctx.device,
                                       ctx.timing, [&] { Touch({dy}); });
      const std::string tag = fmt::format("{} N={}", wt.name, N);
      // The GEMMs with their shapes, as the cost model times them (planner/cost/compute_work.h).
      const double n = static_cast<double>(N), in = static_cast<double>(wt.in),
                   o = static_cast<double>(wt.out);
      ComputeWork forward;
      forward.AddGemm({n, o, in});
      forward.kernels = 1;
      ComputeWork backward;
      backward.AddGemm({n, in, o});  // input gradient
      backward.AddGemm({in, o, n});  // weight gradient
      backward.kernels = 2;
      out.push_back(InStep(Sample("linear_fwd " + tag, forward, fwd), shape, wt.per_microbatch));
      out.push_back(InStep(Sample("linear_bwd " + tag, backward, bwd), shape, wt.per_microbatch));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Attention core

namespace {

struct AttentionInputs {
  at::Tensor q, k, v, dout, mask;
  ComputeWork forward, backward;  // the cost model's attention core of one block
};

AttentionInputs MakeAttentionInputs(const ModelSpec& m, const BenchShape& shape, const BenchContext& ctx) {
  const int64_t H = m.heads, K = m.kv_heads, D = m.head_dim(), B = shape.batch, S = shape.seq;
  AttentionInputs in;
  in.q = Randn({B, H, S, D}, ctx);
  in.k = Randn({B, K, S, D}, ctx);
  in.v = Randn({B, K, S, D}, ctx);
  in.dout = Randn({B, H, S, D}, ctx);
  in.mask = at::ones({S, S}, at::TensorOptions().dtype(at::kBool)).triu_(1).to(ctx.device);
  const StepWork work = WorkOf(m, shape, ctx.precision);
  in.forward = work.block.attention_forward;
  in.backward = work.block.attention_backward;
  return in;
}

// The block's attention core as the trainer runs it on this device (executor/model/llama_model.h):
// fused where UseFusedAttention says so, else naive; with its backward when asked.
void RunAttentionCore(const AttentionInputs& in, const BenchContext& ctx, bool backward) {
  if (UseFusedAttention(ctx.device, ctx.precision)) {
    FusedAttentionGraph graph;
    FusedAttentionForward(in.q, in.k, in.v, &graph);
    if (backward) FusedAttentionBackward(in.dout, std::move(graph));
    return;
  }
  at::Tensor probs;
  AttentionForward(in.q, in.k, in.v, in.mask, &probs);
  if (backward) AttentionBackward(in.dout, in.q, in.k, in.v, std::move(probs));
}

}  // namespace

std::vector<StepSample> BenchmarkAttention(const ModelSpec& m, const std::vector<BenchShape>& shapes,
                                           const BenchContext& ctx) {
  std::vector<StepSample> out;
  for (const BenchShape& shape : shapes) {
    const AttentionInputs in = MakeAttentionInputs(m, shape, ctx);
    const double seconds = MedianSeconds([&] { RunAttentionCore(in, ctx, /*backward=*/true); },
                                         ctx.device, ctx.timing,
                                         [&] { Touch({in.q, in.k, in.v, in.dout}); });
    ComputeWork work = in.forward;
    work += in.backward;
    out.push_back(InStep(Sample("attention_fwd_bwd " + shape.ToString(), work, seconds),
                         shape, static_cast<double>(m.layers)));
  }
  return out;
}

CalibrationSample BenchmarkAttentionForward(const ModelSpec& m, const BenchShape& shape,
                                            const BenchContext& ctx) {
  const AttentionInputs in = MakeAttentionInputs(m, shape, ctx);
  const double seconds = MedianSeconds([&] { RunAttentionCore(in, ctx, /*backward=*/false); },
                                       ctx.device, ctx.timing, [&] { Touch({in.q, in.k, in.v}); });
  return Sample("attention_fwd " + shape.ToString(), in.forward, seconds);
}

// ---------------------------------------------------------------------------------------
// Memory-bound ops

namespace {

// One block's memory-bound ops, forward then backward, in LlamaModel::BlockForward's and
// BlockBackward's order (the GEMMs and the attention core are benchmarked on their own).
void BenchmarkBlockMemoryOps(const ModelSpec& m, const BenchShape& shape, const StepWork& work,
                             const BenchContext& ctx, std::vector<StepSample>* out) {
  const int64_t H = m.heads, K = m.kv_heads, D = m.head_dim(), E = m.hidden, KD = m.kv_hidden(),
                F = m.ffn_hidden;
  const int64_t B = shape.batch, S = shape.seq;
  const auto [cos, sin] = RopeTables(S, D, ctx);
  const at::Tensor norm_w = Ones({E}, ctx);
  at::Tensor dnorm_w = at::zeros_like(norm_w);
  const at::Tensor x = Randn({B, S, E}, ctx), q_proj = Randn({B, S, E}, ctx),
                   k_proj = Randn({B, S, KD}, ctx), v_proj = Randn({B, S, KD}, ctx),
                   attn = Randn({B, H, S, D}, ctx), o_out = Randn({B, S, E}, ctx),
                   gate = Randn({B, S, F}, ctx), up = Randn({B, S, F}, ctx),
                   down_out = Randn({B, S, E}, ctx);
  at::Tensor rstd1, rstd2;
  const double forward = MedianSeconds([&] {
    RMSNormForward(x, norm_w, &rstd1);
    RopeForward(q_proj, H, cos, sin);
    RopeForward(k_proj, K, cos, sin);
    SplitHeads(v_proj, K);
    MergeHeads(attn);
    const at::Tensor x2 = ResidualForward(x, o_out);
    RMSNormForward(x2, norm_w, &rstd2);
    SwiGLUForward(gate, up);
    ResidualForward(x2, down_out);
  }, ctx.device, ctx.timing, [&] { Touch({x, q_proj, k_proj, v_proj, attn, o_out, gate, up, down_out}); });
  const double layers = static_cast<double>(m.layers);
  out->push_back(InStep(Sample("block_memory_fwd " + shape.ToString(),
                               MemoryShare(work.block, work.block.forward, work.block.attention_forward), forward),
                        shape, layers));

  const at::Tensor dy = Randn({B, S, E}, ctx), dact = Randn({B, S, F}, ctx),
                   dh = Randn({B, S, E}, ctx), dattn = Randn({B, S, E}, ctx),
                   dq = Randn({B, H, S, D}, ctx), dk = Randn({B, K, S, D}, ctx),
                   dv = Randn({B, K, S, D}, ctx);
  const double backward = MedianSeconds([&] {
    SwiGLUBackward(dact, gate, up);
    at::Tensor dx2 = RMSNormBackward(dh, x, rstd2, norm_w, dnorm_w);
    dx2.add_(dy);
    SplitHeads(dattn, H);
    RopeBackward(dq, cos, sin);
    RopeBackward(dk, cos, sin);
    MergeHeads(dv);
    at::Tensor dx = RMSNormBackward(dh, x, rstd1, norm_w, dnorm_w);
    dx.add_(dx2);
  }, ctx.device, ctx.timing, [&] { Touch({dact, dh, dy, dattn, dq, dk, dv}); });  // stash cold
  out->push_back(InStep(Sample("block_memory_bwd " + shape.ToString(),
                               MemoryShare(work.block, work.block.backward_input, work.block.attention_backward), backward),
                        shape, layers));
}

// The head's memory-bound ops: final RMSNorm and cross-entropy over (N, V)
// (LlamaModel::HeadForward / HeadBackward).
void BenchmarkHeadMemoryOps(const ModelSpec& m, const BenchShape& shape, const StepWork& work,
                            const BenchContext& ctx, std::vector<StepSample>* out) {
  const int64_t E = m.hidden, V = m.vocab_size, N = shape.batch * shape.seq;
  const at::Tensor norm_w = Ones({E}, ctx);
  at::Tensor dnorm_w = at::zeros_like(norm_w);
  const at::Tensor x = Randn({shape.batch, shape.seq, E}, ctx), dh = Randn({shape.batch, shape.seq, E}, ctx);
  const at::Tensor targets =
      at::randint(V, {N}, at::TensorOptions().dtype(at::kLong)).to(ctx.device);
  const at::Tensor logits_act = Randn({N, V}, ctx);
  at::Tensor logits = logits_act.to(at::kFloat).clone();
  at::Tensor rstd_head;
  const double forward = MedianSeconds([&] {
    RMSNormForward(x, norm_w, &rstd_head);
    if (ctx.dtype != at::kFloat) logits = logits_act.to(at::kFloat);  // the model's up-cast
    CrossEntropyForward(logits, targets);
  }, ctx.device, ctx.timing, [&] { Touch({x, logits_act}); });
  out->push_back(InStep(Sample("head_memory_fwd " + shape.ToString(),
                               MemoryShare(work.head, work.head.forward, {}), forward),
                        shape, 1));
  const double backward = MedianSeconds([&] {
    CrossEntropyBackward(logits, targets, 1.0);
    RMSNormBackward(dh, x, rstd_head, norm_w, dnorm_w);
  }, ctx.device, ctx.timing, [&] { Touch({dh}); });  // the saved probs and x are cold
  out->push_back(InStep(Sample("head_memory_bwd " + shape.ToString(),
                               MemoryShare(work.head, work.head.backward_input, {}), backward),
                        shape, 1));
}

// The embedding lookup and its weight gradient.
void BenchmarkEmbeddingOps(const ModelSpec& m, const BenchShape& shape, const StepWork& work,
                           const BenchContext& ctx, std::vector<StepSample>* out) {
  const int64_t E = m.hidden, V = m.vocab_size;
  const at::Tensor ids =
      at::randint(V, {shape.batch, shape.seq}, at::TensorOptions().dtype(at::kLong)).to(ctx.device);
  const at::Tensor dy = Randn({shape.batch, shape.seq, E}, ctx);
  const at::Tensor wte = Randn({V, E}, ctx, 0.02);
  at::Tensor dwte = at::zeros_like(wte);
  const double forward = MedianSeconds([&] { EmbeddingForward(ids, wte); }, ctx.device,
                                       ctx.timing, [&] { Touch({ids}); });
  const double backward = MedianSeconds([&] { EmbeddingBackward(dy, ids, dwte); }, ctx.device,
                                        ctx.timing, [&] { Touch({dy, ids}); });
  out->push_back(InStep(Sample("embedding_fwd " + shape.ToString(), work.embedding.forward, forward),
                        shape, 1, /*detail=*/false));
  out->push_back(InStep(
      Sample("embedding_bwd " + shape.ToString(), work.embedding.backward_weight, backward), shape,
      1, /*detail=*/false));
}

}  // namespace

std::vector<StepSample> BenchmarkMemoryOps(const ModelSpec& m, const std::vector<BenchShape>& shapes,
                                           const BenchContext& ctx) {
  std::vector<StepSample> out;
  for (const BenchShape& shape : shapes) {
    const StepWork work = WorkOf(m, shape, ctx.precision);
    BenchmarkBlockMemoryOps(m, shape, work, ctx, &out);
    BenchmarkHeadMemoryOps(m, shape, work, ctx, &out);
    BenchmarkEmbeddingOps(m, shape, work, ctx, &out);
  }
  return out;
}

StepSample BenchmarkOptimizer(const ModelSpec& m, const BenchContext& ctx) {
  const StepWork work = WorkOf(m, {1, 1}, ctx.precision);
  SingleRankCommunicator single("dp");
  ZeroEngine engine(BuildParamLayout(m, 1), /*zero_stage=*/0, single, AdamWOptions{}, /*seed=*/1);
  // Each timed update needs a step's gradients: every group's one contribution, untimed.
  const auto gradients_ready = [&] {
    engine.BeginStep(/*microbatches=*/1);
    for (int g = 0; g < static_cast<int>(engine.layout().groups.size()); ++g) engine.GradReady(g);
    engine.EndBackward();
  };
  const double seconds = MedianSeconds([&] { engine.Step(); }, ctx.device, ctx.timing, gradients_ready);
  return {Sample("optimizer_step", OptimizerWork(work, PartsOfStage(work, 0)), seconds), "", 0, false};
}

// ---------------------------------------------------------------------------------------
// A whole block (a check of the fit, not a sample of it)

std::vector<StepSample> BenchmarkBlock(const ModelSpec& m, const BenchShape& shape,
                                       const BenchContext& ctx) {
  const StepWork work = WorkOf(m, shape, ctx.precision);
  const ParamLayout layout = BuildParamLayout(m, 1);
  const ParamGroup& group = layout.groups[static_cast<size_t>(layout.first_block_group)];
  const at::Tensor flat = InitGroup(group, 1).to(ctx.device, ctx.dtype);
  const at::Tensor dflat = at::zeros_like(flat);
  const LlamaModel model(m, shape.seq, TpConfig{}, at::TensorOptions(ctx.dtype).device(ctx.device),
                         ExecutorAttention(ctx.device, ctx.precision));
  const at::Tensor x = Randn({shape.batch, shape.seq, m.hidden}, ctx),
                   dy = Randn({shape.batch, shape.seq, m.hidden}, ctx);
  // As the trainer runs a block: weight views made for the forward, and again (with the
  // gradient views) for the backward.
  const double fwd = MedianSeconds([&] {
    BlockStash stash;
    model.BlockForward(BlockViews(group, flat), x, Recompute::kNone, &stash);
  }, ctx.device, ctx.timing, [&] { Touch({x}); });
  BlockStash stash;
  TimingOptions timing = ctx.timing;
  timing.flush_bytes = 0;  // flushed in `before`, after the untimed forward
  const double bwd = MedianSeconds([&] {
    BlockWeights dw = BlockViews(group, dflat);
    model.BlockBackward(BlockViews(group, flat), dw, dy, std::move(stash));
  }, ctx.device, timing, [&] {
    model.BlockForward(BlockViews(group, flat), x, Recompute::kNone, &stash);
    if (!ctx.device.is_cuda()) FlushCaches(ctx.timing.flush_bytes);
    Touch({dy});
  });
  ComputeWork backward = work.block.backward_input;
  backward += work.block.backward_weight;
  const double L = static_cast<double>(m.layers);
  return {InStep(Sample("block_fwd " + shape.ToString(), work.block.forward, fwd), shape, L, false),
          InStep(Sample("block_bwd " + shape.ToString(), backward, bwd), shape, L, false)};
}

std::vector<StepSample> BenchmarkHead(const ModelSpec& m, const BenchShape& shape,
                                      const BenchContext& ctx) {
  const StepWork work = WorkOf(m, shape, ctx.precision);
  const ParamLayout layout = BuildParamLayout(m, 1);
  const ParamGroup& group = layout.groups[static_cast<size_t>(layout.head_group)];
  const at::Tensor flat = InitGroup(group, 1).to(ctx.device, ctx.dtype);
  const at::Tensor dflat = at::zeros_like(flat);
  // A tied model's lm_head is the embedding matrix: a (V,E) weight all the same.
  const at::Tensor wte = m.tied_embeddings ? Randn({m.vocab_size, m.hidden}, ctx, 0.02) : at::Tensor();
  const at::Tensor dwte = m.tied_embeddings ? at::zeros_like(wte) : at::Tensor();
  const LlamaModel model(m, shape.seq, TpConfig{}, at::TensorOptions(ctx.dtype).device(ctx.device),
                         ExecutorAttention(ctx.device, ctx.precision));
  const at::Tensor x = Randn({shape.batch, shape.seq, m.hidden}, ctx);
  const at::Tensor targets =
      at::randint(m.vocab_size, {shape.batch, shape.seq}, at::TensorOptions().dtype(at::kLong)).to(ctx.device);
  const auto lm_head = [&] { return m.tied_embeddings ? wte : SlotView(flat, group.slot("lm_head")); };
  const double fwd = MedianSeconds([&] {
    HeadStash stash;
    model.HeadForward(SlotView(flat, group.slot("final_norm")), lm_head(), x, targets, &stash);
  }, ctx.device, ctx.timing, [&] { Touch({x}); });
  HeadStash stash;
  TimingOptions timing = ctx.timing;
  timing.flush_bytes = 0;  // flushed in `before`, after the untimed forward
  const double bwd = MedianSeconds([&] {
    at::Tensor dfinal = SlotView(dflat, group.slot("final_norm"));
    at::Tensor dlm = m.tied_embeddings ? dwte : SlotView(dflat, group.slot("lm_head"));
    model.HeadBackward(SlotView(flat, group.slot("final_norm")), lm_head(), dfinal, dlm, 1.0,
                       std::move(stash));
  }, ctx.device, timing, [&] {
    model.HeadForward(SlotView(flat, group.slot("final_norm")), lm_head(), x, targets, &stash);
    if (!ctx.device.is_cuda()) FlushCaches(ctx.timing.flush_bytes);
  });
  ComputeWork backward = work.head.backward_input;
  backward += work.head.backward_weight;
  return {InStep(Sample("head_fwd " + shape.ToString(), work.head.forward, fwd), shape, 1, false),
          InStep(Sample("head_bwd " + shape.ToString(), backward, bwd), shape, 1, false)};
}

// ---------------------------------------------------------------------------------------
// Peaks

double MeasureMatmulFlops(int64_t n, const BenchContext& ctx) {
  const at::Tensor a = Randn({n, n}, ctx), b = Randn({n, n}, ctx);
  at::Tensor c = at::empty({n, n}, a.options());
  const double seconds = MedianSeconds([&] { at::mm_out(c, a, b); }, ctx.device, ctx.timing);
  return 2.0 * std::pow(static_cast<double>(n), 3) / seconds;
}

double MeasureCopyBandwidth(int64_t bytes, const BenchContext& ctx) {
  const auto options = at::TensorOptions().device(ctx.device).dtype(at::kFloat);
  const at::Tensor src = at::ones({bytes / 4}, options);
  at::Tensor dst = at::empty_like(src);
  const double seconds = MedianSeconds([&] { dst.copy_(src); }, ctx.device, ctx.timing);
  return 2.0 * static_cast<double>(src.nbytes()) / seconds;
}

}  // namespace meshplan
