// The attention half of a block as BlockOpsBuilder lowers it (block_ops_builder.h): the
// attention core per kernel and CP ring, the half's norms, projections and residual, and
// the copies Transformer Engine makes around its attention.
#include <algorithm>
#include <cstdint>

#include "planner/cost/block_ops_builder.h"
#include "planner/cost/te_ring_copies.h"

namespace meshplan {

void BlockOpsBuilder::AttentionCore(bool v_saved_by_op) {
  const bool ring = RunsRingAttention(sh_, lowering_);
  if (sh_.cp > 1) {
    // CP ring attention (executor/parallel/ring_attention.h): every rank's K (B,S,K*D/tp) and
    // V (B,S,K*Dv/tp) pass around the ring (cp-1 steps) in the forward; the backward passes
    // K, V and their gradients (two exchanges). The ring kernel keeps its logsumexp, which the
    // op policy saves with its output: only full recompute replays the exchange.
    const double kv_width = static_cast<double>(m_.kv_hidden()) +
                            static_cast<double>(m_.kv_heads * m_.v_head_dim());
    const double kv_bytes = static_cast<double>(sh_.b) * static_cast<double>(sh_.s) * kv_width / tp_ * a_;
    Collective("attention.cp_ring", MeshDim::kCp, kv_bytes,
               {CollectiveKind::kRingExchange, 1, P::kDuringAttention},
               {CollectiveKind::kRingExchange, 2, P::kDuringAttention}, /*saved_by_op=*/true);
  }
  const bool naive = lowering_.attention == AttentionImpl::kNaive && !ring;
  const double A = a_, b = double(sh_.b), Sc = double(sh_.s_local), Skv = Sc;
  const double q = b * Sc * sh_.heads * sh_.head_dim;  // (B,Sc,Ht*D)
  const double kv = b * Skv * sh_.kv_heads * sh_.head_dim;
  const double v = b * Skv * sh_.kv_heads * sh_.v_head_dim;
  const double probs = b * sh_.heads * Sc * Skv;  // (B,Ht,Sc,Skv)
  const bool dropout = m_.block == BlockKind::kGpt;
  BlockOp& op = Add("attention", OpKind::kAttentionCore, G::kSoftmax);
  // The op policy saves the flash (SDPA) kernel's outputs; naive attention runs as bmm,
  // softmax and bmm, none of which its save list holds (aten.bmm is not aten.mm).
  op.output_saved_by_op = !naive;
  if (!naive) {
    OpOutput("attention", "output (B,Sc,Ht*Dv)", b * Sc * sh_.heads * sh_.v_head_dim, A);
    OpOutput("attention", "logsumexp (B,Ht,Sc) fp32", b * sh_.heads * Sc, kFp32Bytes);
  }
  out_.core_ = {static_cast<double>(sh_.b) * static_cast<double>(m_.heads) / tp_,
             static_cast<double>(sh_.s) / static_cast<double>(sh_.cp),
             static_cast<double>(sh_.s), static_cast<double>(m_.head_dim()),
                static_cast<double>(m_.v_head_dim()), /*causal=*/true, dropout};
  if (naive) {
    Save("attention.qk", "q (B,Ht,Sc,D)", q, A);
    Save("attention.qk", "k (B,Kt,Skv,D)", kv, A);
    Core(Save("attention.softmax", "output P (B,Ht,Sc,Skv)", probs, A));
    if (dropout) {
      Core(Save("attention.dropout", "mask (B,Ht,Sc,Skv) 1 byte", probs, kMaskBytes));
      Core(Save("attention.dropout", "output (B,Ht,Sc,Skv)", probs, A));
    }
    SaveOutputOf(v_saved_by_op, "attention.pv", "v (B,Kt,Skv,Dv)", v, A);
    // executor/model/ops.h AttentionBackward: dv, then dP and a temporary of the same shape.
    Temporary("attention.pv backward", "dv (B,Kt,Sc,D)", kv, A);
    Temporary("attention.pv backward", "dP (B,Ht,Sc,Skv)", probs, A);
    Temporary("attention.softmax backward", "dScores (B,Ht,Sc,Skv)", probs, A);
  } else if (ring) {
    // executor/parallel/ring_attention.h: the logsumexp is kept in every mode but full
    // recompute (the backward recomputes each ring step's probabilities from it): nothing
    // is recomputed under selective.
    Save("attention.ring", "q (B,Ht,Sc,D)", q, A);
    Save("attention.ring", "k (B,Kt,Sc,D)", kv, A);
    SaveOutputOf(v_saved_by_op, "attention.ring", "v (B,Kt,Sc,Dv)", v, A);
    Statistic(SaveOutputOf(true, "attention.ring", "logsumexp (B,Ht,Sc) fp32",
                           b * sh_.heads * Sc, kFp32Bytes));
    // Its backward at step 0 (the local Sc x Sc block, the largest): the fp32 dq accumulator,
    // the step's probabilities and score gradients (fp32), the next K/V being received, this
    // block's fp32 dK/dV accumulator and its partial dK/dV.
    Temporary("attention.ring backward", "dq accumulator (B,Ht,Sc,D) fp32", q, kFp32Bytes);
    Temporary("attention.ring backward", "P (B,Ht,Sc,Sc) fp32", probs, kFp32Bytes);
    Temporary("attention.ring backward", "dScores (B,Ht,Sc,Sc) fp32", probs, kFp32Bytes);
    Temporary("attention.ring backward", "next K, V (B,Kt,Sc,D) x 2", 2 * kv, A);
    Temporary("attention.ring backward", "dK, dV accumulator (B,Kt,Sc,D) x 2 fp32", 2 * kv,
              kFp32Bytes);
    Temporary("attention.ring backward", "partial dK, dV (B,Kt,Sc,D) x 2", 2 * kv, A);
  } else {
    // SDPA on torchtitan's repeat_kv copies keeps k and v with every q head, and its
    // backward writes their gradients so (before repeat_kv's sum).
    const bool repeated = RepeatsKv();
    const double kv_heads = static_cast<double>(repeated ? sh_.heads : sh_.kv_heads);
    const double k = b * Skv * kv_heads * sh_.head_dim, v_kept = b * Skv * kv_heads * sh_.v_head_dim;
    Save("attention.flash", "q (B,Sc,Ht,D)", q, A);
    Save("attention.flash", repeated ? "k repeated to every head (B,Sc,Ht,D)" : "k (B,Sc,Kt,D)", k, A);
    SaveOutputOf(v_saved_by_op && !repeated, "attention.flash",
                 repeated ? "v repeated to every head (B,Sc,Ht,Dv)" : "v (B,Sc,Kt,Dv)", v_kept, A);
    Core(Statistic(SaveOutputOf(true, "attention.flash", "logsumexp (B,Ht,Sc) fp32",
                                b * sh_.heads * Sc, kFp32Bytes)));
    Temporary("attention.flash backward", "dq (B,Sc,Ht,D)", q, A);
    Temporary("attention.flash backward", repeated ? "dk (B,Sc,Ht,D)" : "dk (B,Sc,Kt,D)", k, A);
    Temporary("attention.flash backward", repeated ? "dv (B,Sc,Ht,Dv)" : "dv (B,Sc,Kt,Dv)", v_kept, A);
    Temporary("attention.flash backward", "dq accumulator (B,Sc,Ht,D) fp32", q, kFp32Bytes);
  }
}

// norm -> q, k, v projections (MLA: low-rank with latent norms) -> q/k norms -> RoPE ->
// attention core -> o projection -> residual. gpt: LayerNorm, one QKV linear with its bias,
// learned positions (no RoPE), bias-dropout-add. docs/cost_model.md sections 1 and 5.
void BlockOpsBuilder::AttentionHalf() {
  const double a = a_, L = sh_.linear_input_bytes, b = double(sh_.b), Sc = double(sh_.s_local);
  const double T = sh_.T, KD = static_cast<double>(m_.kv_hidden());
  const double normed = b * sh_.s_norm * sh_.hidden;  // (B,Sn,E)
  const bool gpt = m_.block == BlockKind::kGpt;
  Norm("attention_norm", /*layer_input=*/true);
  TpHalfCollectives(/*entering=*/true);
  // wq, wq_a or gpt's qkv: reads the normed input, saved once for q, k, v
  const bool q_saved = Linear();
  bool k_saved = false, v_saved = false;  // by the op policy (gpt's qkv: q's)
  Save("wq/wk/wv", "input: normed x (B,Sn,E)", normed, L);
  if (gpt && !fused_) {
    // Megatron-LM's QKV bias: ColumnParallelLinear without skip_bias_add calls F.linear on
    // the 3-D [s, b, h] input, which PyTorch runs as matmul + add_(bias)
    // (aten/src/ATen/native/Linear.cpp: only 2-D inputs take the fused addmm); backward the
    // bias gradient, a reduction of the output gradient.
    const double qkv = T * (E_ + 2 * KD) / tp_;
    Memory("qkv.bias", G::kBias, {2 * a * qkv, 1}, {a * qkv, 1});
    QkvSplit(qkv);
  } else if (gpt) {
    // Transformer Engine adds the bias in the GEMM's epilogue; the split: TeAttentionLayout.
  } else if (m_.mla.enabled()) {
    const double rows = b * Sc;
    if (sh_.q_lora_rank > 0) {
      // The latent norms' own kernels are not counted in the step's work (they were not).
      Memory("q_a_norm", G::kNorm, {}, {});
      SaveOutputOf(q_saved, "q_a_norm", "input (B,Sc,Rq)", rows * sh_.q_lora_rank, a);
      Statistic(Save("q_a_norm", "rstd (B,Sc) fp32", rows, kFp32Bytes));
      Linear();  // wq_b
      Save("wq_b", "input: normed q latent (B,Sc,Rq)", rows * sh_.q_lora_rank, a);
    }
    const bool kv_a_saved = Linear();  // wkv_a (reads x, as wq(_a))
    Memory("kv_a_norm", G::kNorm, {}, {});
    SaveOutputOf(kv_a_saved, "kv_a_norm", "input (B,Sc,Rkv)", rows * sh_.kv_lora_rank, a);
    Statistic(Save("kv_a_norm", "rstd (B,Sc) fp32", rows, kFp32Bytes));
    Linear();  // wkv_b
    Save("wkv_b", "input: normed kv latent (B,Sc,Rkv)", rows * sh_.kv_lora_rank, a);
  } else {
    k_saved = Linear();  // wk
    v_saved = Linear();  // wv
    if (torchtitan_) InputGradientSums("wq/wk/wv.input_grad_sum", 2);
  }
  const double QD = static_cast<double>(m_.q_hidden());
  if (m_.qk_norm) {  // q_norm, k_norm: read + write q and k; RMSNorm over each head
    Elementwise("q_norm/k_norm", G::kNorm, 2 * T * (QD + KD) / tp_ * a, 2, 2);
    const double q = b * Sc * sh_.heads * sh_.head_dim, kv = b * Sc * sh_.kv_heads * sh_.head_dim;
    SaveOutputOf(q_saved && !m_.mla.enabled(), "q_norm", "input q (B,Sc,Ht*D)", q, a);
    SaveOutputOf(k_saved, "k_norm", "input k (B,Skv,Kt*D)", kv, a);
    Statistic(Save("q_norm/k_norm", "rstd (B,Sc,Ht+Kt) fp32", b * Sc * (sh_.heads + sh_.kv_heads),
                   kFp32Bytes));
  }
  if (!gpt && fused_) {
    // One fused RoPE kernel per tensor each way (Megatron-Core's apply_rope_fusion); the
    // fused attention reads q, k, v in the projections' layout: no head split.
    Elementwise("rope", G::kRope, 2 * T * (QD + KD) / tp_ * a, 2, 2);
  } else if (!gpt && torchtitan_) {
    // torchtitan's apply_rotary_emb (models/llama/model.py at 157a12c56):
    // view_as_complex(x.float()) * freqs_cis, then view_as_real and type_as(x), on q and k.
    // Per element the cast (A + 4), the complex multiply (4 + 4) and the cast back (4 + A),
    // 3 launches per tensor; backward the same three in reverse. Nothing saved (the
    // multiply's backward needs only freqs_cis). SDPA reads q, k, v through transposed
    // views and writes its output in the layout the o projection reads: no copies.
    const double elements = T * (QD + KD) / tp_;
    Memory("rope", G::kRope, {(2 * a + 16) * elements, 6}, {(2 * a + 16) * elements, 6});
    // repeat_kv: with fewer k/v heads than q heads, x[:, :, :, None, :].expand(...).reshape
    // copies k and v to every q head (read (T, Kt*D), write (T, Ht*D) each); backward sums
    // the copies back.
    if (RepeatsKv()) {
      const double copy = 2 * a * T * (KD + QD) / tp_;
      Memory("repeat_kv", G::kLayout, {copy, 2}, {copy, 2});
    }
  } else if (!gpt) {
    // RoPE on q (T, H*D/tp) and k (T, KD/tp): 4 launches per tensor each way; saves nothing.
    Elementwise("rope", G::kRope, 2 * T * (QD + KD) / tp_ * a, 2 * 4, 2 * 4);
    // v's head split forward (and the naive output's head merge); backward the output
    // gradient's split and dv's merge.
    Elementwise("attention.heads", G::kLayout, 0,
             1 + (lowering_.attention != AttentionImpl::kFused ? 1 : 0), 2);
  }
  if (fused_ && !m_.mla.enabled() && lowering_.attention == AttentionImpl::kFused)
    TeAttentionLayout(gpt);
  AttentionCore(v_saved);
  if (megatron_) {
    // baddbmm's backward multiplies the q and k gradients by alpha = 1/norm_factor in a
    // kernel each (PyTorch derivatives.yaml, baddbmm: grad.bmm(batch2^T) * alpha).
    Memory("attention.scale", G::kSoftmax, {0, 0}, {2 * a * T * (E_ + KD) / tp_, 2});
    // The context's permute(2, 0, 1, 3).contiguous() of [b, np, s, hn] to [s, b, np, hn]
    // before the o projection (ParallelSelfAttention.forward): read + write (T, E/tp).
    Memory("attention.context", G::kLayout, {2 * a * (T * E_ / tp_), 1}, {0, 0});
  }
  // Naive attention's backward reads P and v, not its output: the o projection alone saves
  // it (L). Flash and ring attention save the output too (A), and fp8 adds wo's FP8 copy.
  const bool naive = lowering_.attention == AttentionImpl::kNaive && !RunsRingAttention(sh_, lowering_);
  const double out_heads = b * Sc * sh_.heads * sh_.v_head_dim;  // (B,Sc,Ht*Dv)
  Linear();  // wo
  // The flash and ring kernels' output, which the op policy saves.
  SaveOutputOf(!naive, "wo", "input: attention output (B,Sc,Ht*Dv)", out_heads, naive ? L : a);
  if (!naive && L != a) Save("wo", "input: FP8 copy of the attention output (B,Sc,Ht*Dv)", out_heads, L);
  TpHalfCollectives(/*entering=*/false);
  Residual("attention.residual", "attention.residual_dropout");
}

// Megatron-Core's SelfAttention splits the QKV linear's [s, b, ...] output into q, k and v
// views with Transformer Engine's SplitAlongDim, whose backward skips its torch.cat when the
// gradients come back as views of one tensor in that layout (get_query_key_value_tensors in
// megatron/core/transformer/attention.py; _SplitAlongDim in TE 1.8
// transformer_engine/pytorch/attention.py). TE 1.8's DotProductAttention then lays them out
// for its backend, each copy a read and a write:
// - gpt: q, k, v interleaved per head ("sbh3d"). cuDNN's FusedAttention reads them in place
//   and writes their gradients packed; the flash-attn package takes [b, s, h, d], so they are
//   copied (_PrepareQKVForFA's fa_prepare_fwd, or transpose(0, 1).contiguous()) and their
//   gradients copied back packed (fa_prepare_bwd) or, unpacked, cat by the split.
// - llama: RoPE (and q/k norms) write q and k anew; v, still a view of the QKV output, fails
//   _get_qkv_layout's stride check, which copies it (.contiguous()); with several query
//   groups of several heads on the rank, query.reshape to [s, b, heads, d] copies q first.
//   Backward, q's, k's and v's gradients are separate tensors, which the split cats.
// - flash-attn with a micro-batch over 1: FlashAttention.forward's transpose(0, 1).contiguous()
//   of q, k and v to [b, s, h, d] (gpt: done above), and of its output back to [s, b, h*d];
//   backward, the output gradient's copy (the view's backward reshapes the transposed one).
void BlockOpsBuilder::TeAttentionLayout(bool gpt) {
  const double a = a_, T = sh_.T;
  const double q = T * static_cast<double>(sh_.heads * sh_.head_dim);
  const double k = T * static_cast<double>(sh_.kv_heads * sh_.head_dim);
  const double v = T * static_cast<double>(sh_.kv_heads * sh_.v_head_dim);
  const double qkv = q + k + v;
  const bool flash = lowering_.flash != AttentionKernel::kCudnn;
  const bool batched = sh_.b > 1;
  // Megatron's split and reshape run before TE's call; the rest inside it (in_attention_call).
  auto in_call = [this](const char* name, OpPass fwd, OpPass bwd) {
    Memory(name, G::kLayout, fwd, bwd);
    (out_.ops_.end() - 1)->in_attention_call = true;
  };
  if (gpt) {
    if (flash) in_call("attention.fa_prepare", {2 * a * qkv, 1}, {2 * a * qkv, 1});
  } else {
    if (sh_.kv_heads > 1 && sh_.heads > sh_.kv_heads)
      Memory("attention.q_reshape", G::kLayout, {2 * a * q, 1}, {0, 0});
    in_call("attention.v_contiguous", {2 * a * v, 1}, {0, 0});
    if (flash && batched) in_call("attention.to_bshd", {2 * a * qkv, 3}, {0, 0});
    Memory("qkv.split", G::kLayout, {0, 0}, {2 * a * qkv, 1});
  }
  const double out = T * static_cast<double>(sh_.heads * sh_.v_head_dim);
  if (flash && batched) in_call("attention.to_sbhd", {2 * a * out, 1}, {2 * a * out, 1});
  if (sh_.cp > 1) {  // TE's ring over the cp ranks (te_ring_copies.h)
    const TeRingCopies ring = TeRingAttentionCopies(sh_.cp, q, k + v, a, !flash);
    in_call("attention.cp_ring_copies", ring.forward, ring.backward);
  }
}

}  // namespace meshplan
