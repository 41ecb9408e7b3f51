#include "planner/cost/block_ops.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <utility>

#include "planner/cost/fp8_convention.h"
#include "planner/cost/te_ring_copies.h"

namespace meshplan {

Lowering LoweringOf(const RankShape& shape, AttentionImpl resolved_attention) {
  return {shape.kernels, resolved_attention, shape.fused_norm, shape.attention_kernel};
}

TensorFate FateUnder(const SavedTensor& t, Recompute recompute) {
  if (t.checkpoint_only && (recompute == Recompute::kNone || recompute == Recompute::kSelective))
    return TensorFate::kNotSaved;
  bool kept = true;
  switch (recompute) {
    case Recompute::kNone: break;
    case Recompute::kSelective: kept = !t.core_attention; break;
    case Recompute::kFull: kept = t.layer_input; break;
    case Recompute::kOp:
      if (t.op_output && !t.layer_input) return TensorFate::kInOpOutputs;
      kept = t.layer_input;
      break;
    case Recompute::kEvery: assert(false && "a plan's policy: BlockRecompute resolves it"); break;
  }
  return kept ? TensorFate::kKept : TensorFate::kRecomputed;
}

bool KeptUnder(const SavedTensor& t, Recompute recompute) {
  return FateUnder(t, recompute) == TensorFate::kKept;
}

void SavedTensorList::Add(const SavedTensor& tensor) {
  if (items_.size == static_cast<int>(kCapacity)) std::abort();  // outgrew kCapacity: raise it
  items_.push_back(tensor);
}

double SavedTensorList::TotalBytes() const {
  double sum = 0;
  for (const SavedTensor& t : *this) sum += t.bytes();
  return sum;
}

double SavedTensorList::MegatronBytes() const {
  double sum = 0;
  for (const SavedTensor& t : *this)
    if (!t.row_statistic) sum += t.bytes();
  return sum;
}

namespace {

constexpr double kFp32Bytes = 4, kMaskBytes = 1, kIdBytes = 8;
using G = FusionGroup;
using P = CollectivePosition;

}  // namespace

// Builds one BlockOps in place: the model, the rank's shape, the lowering, the list being
// built and which half of the block it is in. Sizes follow the legend (docs/architecture.md).
class BlockOpsBuilder {
 public:
  BlockOpsBuilder(const ModelSpec& m, const RankShape& sh, const Lowering& lowering,
                  BlockOps* out)
      : m_(m), sh_(sh), lowering_(lowering), out_(*out),
        megatron_(lowering.kernels == KernelSet::kMegatron2021),
        fused_(lowering.kernels == KernelSet::kFused),
        torchtitan_(lowering.kernels == KernelSet::kTorchtitan2024),
        E_(static_cast<double>(m.hidden)), tp_(static_cast<double>(sh.tp)), a_(sh.act_bytes) {}

  void Build() {
    out_.linears_ = BlockLinearsOf(m_, sh_.experts > 0);
    AttentionHalf();
    mlp_ = true;
    MlpHalf();
    const double b = double(sh_.b);
    for (SavedTensorList& workspace : out_.workspace_) {
      workspace.Add({"block backward", "grad of the residual stream (B,Sn,E)",
                     b * sh_.s_norm * sh_.hidden, a_});
      workspace.Add({"block backward", "grad of the branch output (B,Sc,E)",
                     b * double(sh_.s_local) * sh_.hidden, a_});
    }
  }
  void Embedding();
  void Head();

 private:
  // Appends an op (beyond capacity is a programming error: raise kCapacity).
  BlockOp& Add(const char* name, OpKind kind, G group) {
    if (out_.ops_.size == BlockOps::kCapacity) std::abort();
    out_.ops_.push_back({});
    BlockOp& op = *(out_.ops_.end() - 1);
    op.name = name;
    op.kind = kind;
    op.group = group;
    op.attention_half = !mlp_;
    op.saved_begin = op.saved_end = static_cast<uint8_t>(out_.saved_.size());
    return op;
  }
  // A memory-bound op; the executor's backward moves twice the forward's bytes
  // (docs/cost_model.md section 5), Megatron's kernels are listed op by op.
  void Memory(const char* name, G group, OpPass fwd, OpPass bwd) {
    BlockOp& op = Add(name, OpKind::kMemoryBound, group);
    op.forward = fwd;
    op.backward = bwd;
  }
  void Elementwise(const char* name, G group, double fwd_bytes, int64_t fwd_kernels,
                   int64_t bwd_kernels) {
    Memory(name, group, {fwd_bytes, fwd_kernels}, {2 * fwd_bytes, bwd_kernels});
  }
  // A collective op here (BlockOp::comm); `saved_by_op`: the op policy saves its output.
  void Collective(const char* name, MeshDim dim, double bytes, CollectivePass fwd,
                  CollectivePass bwd, bool saved_by_op = false) {
    BlockOp& op = Add(name, OpKind::kCollective, G::kNone);
    op.comm = {dim, bytes, fwd, bwd};
    op.output_saved_by_op = saved_by_op;
  }
  void TpHalfCollectives(bool entering);  // after a half's norm / before its residual
  // The names of the collectives where a tp-split linear reads its input: with sequence
  // parallel the all-gather and the backward's re-gather, else Megatron's f.
  struct TpInputNames {
    const char *sp_gather, *sp_regather, *tp_input;
  };
  void TpInputCollectives(const TpInputNames& names, CollectivePosition before,
                          CollectivePosition after);
  // A tensor the op added last saves.
  void Save(SavedTensor t) {
    t.mlp_half = mlp_;
    out_.saved_.Add(t);
    (out_.ops_.end() - 1)->saved_end = static_cast<uint8_t>(out_.saved_.size());
  }
  // The same, when it is the output of an op the op policy saves (`saved_by_op`).
  void SaveOutputOf(bool saved_by_op, SavedTensor t) {
    t.op_output = saved_by_op;
    Save(t);
  }
  // A temporary of this half's backward step (BlockOps::backward_workspace).
  void Temporary(const SavedTensor& t) { out_.workspace_[mlp_ ? 1 : 0].Add(t); }
  // An output the op policy keeps (BlockOps::op_outputs).
  void OpOutput(SavedTensor t) {
    t.mlp_half = mlp_;
    out_.op_outputs_.Add(t);
  }

  // The next linear: its GEMM on this rank. A matrix with copies > 1 (experts) is a grouped
  // GEMM of `copies` products, each over the tokens of one copy: the rank's X/ep routed
  // experts share the rows it computes, T*r*u (expert_parallel.h), a shared expert all T.
  // Returns whether the op policy saves its output (OpPolicySavesOutput; then in op_outputs).
  bool Linear() {
    const int index = next_linear_++;
    const BlockLinear& l = out_.linears_[index];
    BlockOp& op = Add(l.name, OpKind::kLinear, G::kNone);
    op.linear = static_cast<int8_t>(index);
    const bool routed = l.role == LinearRole::kRoutedExpert;
    const double copies =
        static_cast<double>(routed ? sh_.expert_work.local_experts : l.copies);
    const double rows = routed ? sh_.expert_work.rows_computed / copies : sh_.T;
    op.gemm = {rows, static_cast<double>(l.out_per_rank(sh_.tp)),
               static_cast<double>(l.in_per_rank(sh_.tp)), copies, false,
               sh_.fp8 && l.role != LinearRole::kRouter};  // the router stays bf16
    op.output_saved_by_op = OpPolicySavesOutput(l, &matmuls_);
    if (op.output_saved_by_op)
      OpOutput({l.name, "matmul output (T, out/tp)", op.gemm.m * op.gemm.n * op.gemm.batch, a_});
    return op.output_saved_by_op;
  }

  // A norm (a block's two, the head's final one) as the lowering runs it. Megatron's fused
  // LayerNorm: forward read + write (Tn, E), 1 kernel; backward cuComputePartGradGammaBeta
  // reads dy and x, cuComputeGradInput reads dy and x and writes dx, 3 kernels. A one-kernel
  // norm (Transformer Engine's, PyTorch's nn.LayerNorm): forward read + write, backward reads
  // dy and x and writes dx in one kernel, then reduces the weight's partial gradients in a
  // second. The executor's RMSNorm: RmsNormLaunches. torchtitan's eager RMSNorm
  // (torchtitan/models/norms.py, RMSNorm at 157a12c56):
  // (x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x) * weight. Per element
  // of (Tn, E), forward: the cast to fp32 (read A, write 4), pow (4, 4), mean (4), x * rstd
  // (4, 4), the cast back (4, A), * weight (A, A): 4A + 28 bytes in 8 launches (with the
  // row-sized add and rsqrt). Backward, as autograd runs it: dy * w (2A) and the weight's
  // dy * n summed (4A), the casts back (A + 4, 4 + A), x * rstd's dx (8) and its rstd
  // gradient (dy * x).sum (16), mean's expand (4), pow's 2x * d (12), x's two gradients
  // added (12): 8A + 60 bytes in 11 launches.
  void NormOp(const char* name) {
    const double TnE = sh_.Tn * E_, bytes = 2 * TnE * a_;
    if (TorchtitanNorm()) {
      Memory(name, G::kNorm, {(4 * a_ + 28) * TnE, 8}, {(8 * a_ + 60) * TnE, 11});
    } else if (megatron_) {
      Memory(name, G::kNorm, {bytes, 1}, {5 * a_ * TnE, 3});
    } else if (fused_ || m_.block == BlockKind::kGpt || lowering_.fused_norm) {
      Memory(name, G::kNorm, {bytes, 1}, {3 * a_ * TnE, 2});
    } else {
      const NormLaunches launches = RmsNormLaunches(sh_);
      Elementwise(name, G::kNorm, bytes, launches.fwd, launches.bwd);
    }
  }
  bool TorchtitanNorm() const {
    return torchtitan_ && !lowering_.fused_norm && m_.block != BlockKind::kGpt;
  }
  // A block's norm saves its input and its per-row statistics (RMSNorm: rstd; LayerNorm:
  // mean, rstd). torchtitan's autograd keeps x in fp32 and the cast-back output, not x
  // itself: only a checkpoint holds the block's input.
  void Norm(const char* name, bool layer_input) {
    NormOp(name);
    const double rows = double(sh_.b) * sh_.s_norm;
    if (TorchtitanNorm()) {
      if (layer_input) {
        SavedTensor input{name, "input (B,Sn,E), held by a checkpoint", rows * sh_.hidden, a_};
        input.layer_input = input.checkpoint_only = true;
        Save(input);
      }
      Save({name, "input in fp32 (B,Sn,E)", rows * sh_.hidden, kFp32Bytes});
      Save({name, "normed input before the weight (B,Sn,E)", rows * sh_.hidden, a_});
      Save(Statistic({name, "rstd (B,Sn) fp32", rows, kFp32Bytes}));
      return;
    }
    SavedTensor input{name, "input (B,Sn,E)", rows * sh_.hidden, a_};
    input.layer_input = layer_input;
    Save(input);
    if (m_.block == BlockKind::kGpt) Save(Statistic({name, "mean (B,Sn) fp32", rows, kFp32Bytes}));
    Save(Statistic({name, "rstd (B,Sn) fp32", rows, kFp32Bytes}));
  }
  // torchtitan's repeat_kv copies k and v to every q head (fewer k/v heads than q heads).
  bool RepeatsKv() const { return torchtitan_ && sh_.kv_heads < sh_.heads; }
  static SavedTensor Statistic(SavedTensor t) {
    t.row_statistic = true;
    return t;
  }
  static SavedTensor Core(SavedTensor t) {
    t.core_attention = true;
    return t;
  }

  // The residual connection: the executor's add (read 2, write 1 (Tn, E)); gpt's jit-fused
  // bias-dropout-add (read x and the residual, write the sum and a 1-byte mask; backward:
  // mask x scale, then the bias gradient, and autograd's sum of the residual's two
  // gradients (torch/csrc/autograd/input_buffer.cpp: read 2, write 1)).
  void Residual(const char* name, const char* mask_op) {
    const double TnE = sh_.Tn * E_;
    if (m_.block == BlockKind::kGpt) {
      Memory(name, G::kBiasDropoutAdd, {(3 * a_ + 1) * TnE, 1},
             {(3 * a_ + 1) * TnE + 3 * a_ * TnE, 2 + 1});
      Save({mask_op, "mask (B,Sn,E) 1 byte", double(sh_.b) * sh_.s_norm * sh_.hidden, kMaskBytes});
    } else {
      Elementwise(name, G::kResidual, 3 * sh_.Tn * E_ * a_, 1, 1);
    }
  }

  // The q, k, v split (split_tensor_along_last_dim = torch.split) of the (T, qkv) output:
  // its backward cats the three gradients into one tensor.
  void QkvSplit(double qkv) { Memory("qkv.split", G::kLayout, {0, 0}, {2 * a_ * qkv, 1}); }

  void AttentionHalf();
  // `v_saved_by_op`: v is the output of a matmul the op policy saves.
  void AttentionCore(bool v_saved_by_op);
  // The copies around Transformer Engine's attention under Megatron-Core (`kernels: fused`).
  void TeAttentionLayout(bool gpt);
  void MlpHalf();
  void MoeFfn();
  struct ExpertNames {
    const char *swiglu, *gate_output, *up_output, *down, *down_input;
  };
  void ExpertSwiGlu(const ExpertNames& names, double elements);

  const ModelSpec& m_;
  const RankShape& sh_;
  const Lowering& lowering_;
  BlockOps& out_;
  const bool megatron_, fused_, torchtitan_;
  const double E_, tp_, a_;
  int next_linear_ = 0;  // the next of out_.linears_ (forward order) to add
  int matmuls_ = 0;      // the block's aten.mm calls so far (Linear)
  bool mlp_ = false;
};

// The tensor-parallel collectives where a tp-split linear reads its (T, E) input (a half's
// first linears, the lm_head). Sequence parallel: an all-gather of the normed input, whose
// backward reduce-scatters the input's gradient and re-gathers the saved sharded input for the
// weight gradients (Megatron, and the executor: executor/model/llama_model.h). Else Megatron's
// f: identity forward, all-reduce of the input's gradient.
void BlockOpsBuilder::TpInputCollectives(const TpInputNames& names, CollectivePosition before,
                                         CollectivePosition after) {
  if (sh_.tp <= 1) return;
  using K = CollectiveKind;
  const double bytes = sh_.T * E_ * a_;
  if (sh_.sequence_parallel) {
    Collective(names.sp_gather, MeshDim::kTp, bytes, {K::kAllGather, 1, before},
               {K::kReduceScatter, 1, after});
    Collective(names.sp_regather, MeshDim::kTp, bytes, {K::kAllGather, 0, before},
               {K::kAllGather, 1, before});
  } else {
    Collective(names.tp_input, MeshDim::kTp, bytes, {K::kAllReduce, 0, before},
               {K::kAllReduce, 1, after});
  }
}

// Those entering a half (after its norm: TpInputCollectives) or leaving it (after its last
// linear), over the (T, E) activation: with sequence parallel a reduce-scatter of the output
// (backward: an all-gather of its gradient), whose output the op policy saves; else
// Megatron's g (all-reduce forward, identity backward).
void BlockOpsBuilder::TpHalfCollectives(bool entering) {
  if (sh_.tp <= 1) return;
  using K = CollectiveKind;
  const CollectivePosition before = mlp_ ? P::kBeforeMlp : P::kBeforeAttention;
  const CollectivePosition after = mlp_ ? P::kAfterMlp : P::kAfterAttention;
  if (entering) {
    TpInputCollectives(mlp_ ? TpInputNames{"mlp.sp_gather", "mlp.sp_regather", "mlp.tp_input"}
                            : TpInputNames{"attention.sp_gather", "attention.sp_regather",
                                           "attention.tp_input"},
                       before, after);
    return;
  }
  const double bytes = sh_.T * E_ * a_;
  if (sh_.sequence_parallel) {
    Collective(mlp_ ? "mlp.sp_scatter" : "attention.sp_scatter", MeshDim::kTp, bytes,
               {K::kReduceScatter, 1, after}, {K::kAllGather, 1, before}, /*saved_by_op=*/true);
    OpOutput({"reduce_scatter", "output (B,Sn,E)", double(sh_.b) * sh_.s_norm * sh_.hidden, a_});
  } else {
    Collective(mlp_ ? "mlp.tp_output" : "attention.tp_output", MeshDim::kTp, bytes,
               {K::kAllReduce, 1, after}, {K::kAllReduce, 0, before});
  }
}

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
    OpOutput({"attention", "output (B,Sc,Ht*Dv)", b * Sc * sh_.heads * sh_.v_head_dim, A});
    OpOutput({"attention", "logsumexp (B,Ht,Sc) fp32", b * sh_.heads * Sc, kFp32Bytes});
  }
  out_.core_ = {static_cast<double>(sh_.b) * static_cast<double>(m_.heads) / tp_,
             static_cast<double>(sh_.s) / static_cast<double>(sh_.cp),
             static_cast<double>(sh_.s), static_cast<double>(m_.head_dim()),
                static_cast<double>(m_.v_head_dim()), /*causal=*/true, dropout};
  if (naive) {
    Save({"attention.qk", "q (B,Ht,Sc,D)", q, A});
    Save({"attention.qk", "k (B,Kt,Skv,D)", kv, A});
    Save(Core({"attention.softmax", "output P (B,Ht,Sc,Skv)", probs, A}));
    if (dropout) {
      Save(Core({"attention.dropout", "mask (B,Ht,Sc,Skv) 1 byte", probs, kMaskBytes}));
      Save(Core({"attention.dropout", "output (B,Ht,Sc,Skv)", probs, A}));
    }
    SaveOutputOf(v_saved_by_op, {"attention.pv", "v (B,Kt,Skv,Dv)", v, A});
    // executor/model/ops.h AttentionBackward: dv, then dP and a temporary of the same shape.
    Temporary({"attention.pv backward", "dv (B,Kt,Sc,D)", kv, A});
    Temporary({"attention.pv backward", "dP (B,Ht,Sc,Skv)", probs, A});
    Temporary({"attention.softmax backward", "dScores (B,Ht,Sc,Skv)", probs, A});
  } else if (ring) {
    // executor/parallel/ring_attention.h: the logsumexp is kept in every mode but full
    // recompute (the backward recomputes each ring step's probabilities from it): nothing
    // is recomputed under selective.
    Save({"attention.ring", "q (B,Ht,Sc,D)", q, A});
    Save({"attention.ring", "k (B,Kt,Sc,D)", kv, A});
    SaveOutputOf(v_saved_by_op, {"attention.ring", "v (B,Kt,Sc,Dv)", v, A});
    SaveOutputOf(true, Statistic({"attention.ring", "logsumexp (B,Ht,Sc) fp32", b * sh_.heads * Sc,
                                  kFp32Bytes}));
    // Its backward at step 0 (the local Sc x Sc block, the largest): the fp32 dq accumulator,
    // the step's probabilities and score gradients (fp32), the next K/V being received, this
    // block's fp32 dK/dV accumulator and its partial dK/dV.
    Temporary({"attention.ring backward", "dq accumulator (B,Ht,Sc,D) fp32", q, kFp32Bytes});
    Temporary({"attention.ring backward", "P (B,Ht,Sc,Sc) fp32", probs, kFp32Bytes});
    Temporary({"attention.ring backward", "dScores (B,Ht,Sc,Sc) fp32", probs, kFp32Bytes});
    Temporary({"attention.ring backward", "next K, V (B,Kt,Sc,D) x 2", 2 * kv, A});
    Temporary({"attention.ring backward", "dK, dV accumulator (B,Kt,Sc,D) x 2 fp32", 2 * kv,
               kFp32Bytes});
    Temporary({"attention.ring backward", "partial dK, dV (B,Kt,Sc,D) x 2", 2 * kv, A});
  } else {
    // SDPA on torchtitan's repeat_kv copies keeps k and v with every q head, and its
    // backward writes their gradients so (before repeat_kv's sum).
    const bool repeated = RepeatsKv();
    const double kv_heads = static_cast<double>(repeated ? sh_.heads : sh_.kv_heads);
    const double k = b * Skv * kv_heads * sh_.head_dim, v_kept = b * Skv * kv_heads * sh_.v_head_dim;
    Save({"attention.flash", "q (B,Sc,Ht,D)", q, A});
    Save({"attention.flash", repeated ? "k repeated to every head (B,Sc,Ht,D)" : "k (B,Sc,Kt,D)", k, A});
    SaveOutputOf(v_saved_by_op && !repeated,
                 {"attention.flash", repeated ? "v repeated to every head (B,Sc,Ht,Dv)" : "v (B,Sc,Kt,Dv)",
                  v_kept, A});
    SaveOutputOf(true, Core(Statistic({"attention.flash", "logsumexp (B,Ht,Sc) fp32",
                                       b * sh_.heads * Sc, kFp32Bytes})));
    Temporary({"attention.flash backward", "dq (B,Sc,Ht,D)", q, A});
    Temporary({"attention.flash backward", repeated ? "dk (B,Sc,Ht,D)" : "dk (B,Sc,Kt,D)", k, A});
    Temporary({"attention.flash backward", repeated ? "dv (B,Sc,Ht,Dv)" : "dv (B,Sc,Kt,Dv)", v_kept, A});
    Temporary({"attention.flash backward", "dq accumulator (B,Sc,Ht,D) fp32", q, kFp32Bytes});
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
  Save({"wq/wk/wv", "input: normed x (B,Sn,E)", normed, L});
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
      SaveOutputOf(q_saved, {"q_a_norm", "input (B,Sc,Rq)", rows * sh_.q_lora_rank, a});
      Save(Statistic({"q_a_norm", "rstd (B,Sc) fp32", rows, kFp32Bytes}));
      Linear();  // wq_b
      Save({"wq_b", "input: normed q latent (B,Sc,Rq)", rows * sh_.q_lora_rank, a});
    }
    const bool kv_a_saved = Linear();  // wkv_a (reads x, as wq(_a))
    Memory("kv_a_norm", G::kNorm, {}, {});
    SaveOutputOf(kv_a_saved, {"kv_a_norm", "input (B,Sc,Rkv)", rows * sh_.kv_lora_rank, a});
    Save(Statistic({"kv_a_norm", "rstd (B,Sc) fp32", rows, kFp32Bytes}));
    Linear();  // wkv_b
    Save({"wkv_b", "input: normed kv latent (B,Sc,Rkv)", rows * sh_.kv_lora_rank, a});
  } else {
    k_saved = Linear();  // wk
    v_saved = Linear();  // wv
  }
  const double QD = static_cast<double>(m_.q_hidden());
  if (m_.qk_norm) {  // q_norm, k_norm: read + write q and k; RMSNorm over each head
    Elementwise("q_norm/k_norm", G::kNorm, 2 * T * (QD + KD) / tp_ * a, 2, 2);
    const double q = b * Sc * sh_.heads * sh_.head_dim, kv = b * Sc * sh_.kv_heads * sh_.head_dim;
    SaveOutputOf(q_saved && !m_.mla.enabled(), {"q_norm", "input q (B,Sc,Ht*D)", q, a});
    SaveOutputOf(k_saved, {"k_norm", "input k (B,Skv,Kt*D)", kv, a});
    Save(Statistic({"q_norm/k_norm", "rstd (B,Sc,Ht+Kt) fp32", b * Sc * (sh_.heads + sh_.kv_heads),
                    kFp32Bytes}));
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
  SaveOutputOf(!naive, {"wo", "input: attention output (B,Sc,Ht*Dv)", out_heads, naive ? L : a});
  if (!naive && L != a) Save({"wo", "input: FP8 copy of the attention output (B,Sc,Ht*Dv)", out_heads, L});
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

void BlockOpsBuilder::MlpHalf() {
  const double a = a_, L = sh_.linear_input_bytes, b = double(sh_.b), Sc = double(sh_.s_local);
  const double normed = b * sh_.s_norm * sh_.hidden, inner = b * Sc * sh_.ffn;  // (B,Sc,Ft)
  const double T = sh_.T;
  Norm("ffn_norm", /*layer_input=*/false);
  TpHalfCollectives(/*entering=*/true);
  const bool gpt = m_.block == BlockKind::kGpt;
  if (gpt) {
    const double ffn = T * static_cast<double>(m_.ffn_hidden) / tp_;
    const bool fc1_saved = Linear();  // fc1
    Save({"fc1", "input: normed h (B,Sn,E)", normed, L});
    // bias-GeLU (jit-fused): read + write (T, F/tp); backward bias_gelu_back reads dy and x,
    // writes dx; the bias gradient reduces dx.
    Memory("bias_gelu", G::kActivation, {2 * a * ffn, 1}, {4 * a * ffn, 2});
    SaveOutputOf(fc1_saved, {"gelu", "input: fc1 output (B,Sc,Ft)", inner, a});
    Linear();  // fc2
    Save({"fc2", "input: GeLU output (B,Sc,Ft)", inner, L});
    Temporary({"fc2 backward", "d(fc2 input) (B,Sc,Ft)", inner, a});
    Temporary({"gelu backward", "d(fc1 output) (B,Sc,Ft)", inner, a});
    TpHalfCollectives(/*entering=*/false);
    Residual("mlp.residual", "mlp.residual_dropout");
    return;
  }
  if (sh_.experts > 0) {
    MoeFfn();
  } else {
    const bool gate_saved = Linear();  // w_gate
    Save({"w_up/w_gate", "input: normed h (B,Sn,E)", normed, L});
    const bool up_saved = Linear();  // w_up
    const double ffn = T * static_cast<double>(m_.ffn_hidden) / tp_;
    if (torchtitan_) {
      // torchtitan's FeedForward: w2(F.silu(w1(x)) * w3(x)). Forward silu (2A) and the
      // product (3A); backward the product's two gradients (3A each) and silu_backward
      // (3A). Autograd keeps w1's output (silu's input), silu's output and w3's output.
      Memory("swiglu", G::kActivation, {5 * a * ffn, 2}, {9 * a * ffn, 3});
      Save({"swiglu", "silu output (B,Sc,Ft)", inner, a});
    } else {
      // SwiGLU (custom autograd function): read gate, up, write (T, F/tp); it saves the gate
      // and up outputs and recomputes silu(gate) in backward. Fused (Megatron-Core's
      // bias_swiglu_impl, torch.compile): one kernel each way.
      Elementwise("swiglu", G::kActivation, 3 * T * static_cast<double>(m_.ffn_hidden) / tp_ * a,
                  fused_ ? 1 : 2, fused_ ? 1 : 10);
    }
    SaveOutputOf(gate_saved, {"swiglu", "gate output (B,Sc,Ft)", inner, a});
    SaveOutputOf(up_saved, {"swiglu", "up output (B,Sc,Ft)", inner, a});
    Linear();  // w_down
    Save({"w_down", "input: silu(gate)*up (B,Sc,Ft)", inner, L});
    // executor/model/ops.h SwiGLUBackward: d up first holds sigmoid(gate) (no extra buffer).
    Temporary({"w_down backward", "d(down input) (B,Sc,Ft)", inner, a});
    Temporary({"swiglu backward", "d gate (B,Sc,Ft)", inner, a});
    Temporary({"swiglu backward", "d up (B,Sc,Ft)", inner, a});
  }
  TpHalfCollectives(/*entering=*/false);
  Residual("mlp.residual", "mlp.residual_dropout");
}

// A MoE FFN (activation_memory.h, "MoE FFN"; R = expert_rows). Its memory-bound bytes sit
// on the routing op, summed as one term: the router's softmax and top-k over (T, X) fp32,
// the permutation of each token to its k experts (read (T, E), write (T*r, E),
// r = ExpertRowsPerToken) and back with the routing weights (read (T*r, E), write (T, E)),
// and the SwiGLUs of the routed rows this rank computes (T*r*u) and of the shared experts
// (read gate, up, write: 3 x (rows, Fe/tp)).
void BlockOpsBuilder::MoeFfn() {
  const double A = a_, rows = double(sh_.b) * sh_.s_local, R = sh_.expert_rows;
  const double normed = double(sh_.b) * sh_.s_norm * sh_.hidden;
  const MoeSpec& moe = m_.moe;
  const double X = static_cast<double>(moe.experts), r = ExpertRowsPerToken(m_);
  const double Fe = static_cast<double>(moe.expert_ffn_hidden) / tp_, T = sh_.T;
  const double router = 3 * T * X * 4;  // softmax read + write, top-k read
  const double dispatch = 2 * (T * E_ + T * r * E_) * A;
  const double swiglu =
      3 * (sh_.expert_work.rows_computed + T * static_cast<double>(moe.shared_experts)) * Fe * A;
  Linear();  // router
  Save({"router/shared", "input: normed h (B,Sn,E)", normed, A});
  Elementwise("moe.routing", G::kRouting, router + dispatch + swiglu, 4, 4);
  Save({"router", "probabilities (B,Sc,X) fp32", rows * sh_.experts, kFp32Bytes});
  Save({"router", "top-k weights fp32 + ids int64 (B,Sc,k)", rows * sh_.top_k, kFp32Bytes + kIdBytes});
  Save({"router", "row token and slot ids (R) int64 x 2", 2 * R, kIdBytes});
  Save({"dispatch", "permuted tokens (R,E)", R * sh_.hidden, A});
  // Expert parallel (step_work.h, expert_parallel.h): the routed rows go to their experts'
  // ranks by all-to-all (with tp, all-gathered over it: the experts see every tp rank's rows)
  // and come back the same way; the backward runs each exchange on the gradients, the
  // combine's first. The op policy saves the reduce-scatter's output.
  const bool ep = sh_.ep > 1, regather = ep && sh_.tp > 1;
  const double a2a = sh_.expert_work.all_to_all_bytes;  // (T*r/tp, E) per rank
  const double gathered = sh_.expert_work.rows_computed * E_ * A;  // (T*r*u, E) over tp
  using K = CollectiveKind;
  if (ep)
    Collective("moe.dispatch", MeshDim::kEp, a2a, {K::kAllToAll, 1, P::kExpertDispatch},
               {K::kAllToAll, 1, P::kExpertDispatch});
  if (regather)
    Collective("moe.dispatch_gather", MeshDim::kTp, gathered,
               {K::kAllGather, 1, P::kExpertDispatch}, {K::kReduceScatter, 1, P::kExpertDispatch});
  ExpertSwiGlu({"experts.swiglu", "gate output (R,Fe/tp)", "up output (R,Fe/tp)",
                "experts.w_down", "input: silu(gate)*up (R,Fe/tp)"},
               R * sh_.expert_ffn);
  if (regather)
    Collective("moe.combine_scatter", MeshDim::kTp, gathered,
               {K::kReduceScatter, 1, P::kExpertCombine}, {K::kAllGather, 1, P::kExpertCombine},
               /*saved_by_op=*/true);
  if (ep)
    Collective("moe.combine", MeshDim::kEp, a2a, {K::kAllToAll, 1, P::kExpertCombine},
               {K::kAllToAll, 1, P::kExpertCombine});
  Memory("combine", G::kRouting, {}, {});
  Save({"combine", "expert outputs (Rs,E)", sh_.routed_rows * sh_.hidden, A});
  // executor/model/moe_block.cc Backward: the routed experts' SwiGLU backward over their R
  // rows holds d gate and d up with either d(down input) (R,Fe/tp) (before) or the gradient
  // of the permuted tokens (R,E) (after): the larger of the two counts.
  Temporary({"experts.swiglu backward", "d gate (R,Fe/tp)", R * sh_.expert_ffn, A});
  Temporary({"experts.swiglu backward", "d up (R,Fe/tp)", R * sh_.expert_ffn, A});
  Temporary({"experts backward", "max of d(down input) (R,Fe/tp), d(permuted tokens) (R,E)",
             R * double(std::max(sh_.expert_ffn, sh_.hidden)), A});
  if (sh_.ep > 1)
    Temporary({"all-to-all", "routing buffers: rows received + sent (R+Rs,E)",
               (R + sh_.routed_rows) * sh_.hidden, A});
  if (moe.shared_experts == 0) return;
  ExpertSwiGlu({"shared.swiglu", "gate output (B,Sc,Xs*Fe/tp)", "up output (B,Sc,Xs*Fe/tp)",
                "shared.w_down", "input: silu(gate)*up (B,Sc,Xs*Fe/tp)"},
               rows * sh_.shared_ffn);
}

// The gate and up linears of a MoE layer's experts, their SwiGLU (one launch each way; its
// bytes are the routing op's) and the down linear, each saved tensor `elements` large.
void BlockOpsBuilder::ExpertSwiGlu(const ExpertNames& n, double elements) {
  const bool gate_saved = Linear();  // w_gate
  const bool up_saved = Linear();    // w_up
  Elementwise(n.swiglu, G::kActivation, 0, 1, 1);
  SaveOutputOf(gate_saved, {n.swiglu, n.gate_output, elements, a_});
  SaveOutputOf(up_saved, {n.swiglu, n.up_output, elements, a_});
  Linear();  // w_down
  Save({n.down, n.down_input, elements, a_});
}

// The lookup reads the rows and writes (T, E); its weight gradient scatter-adds the (T, E)
// output gradient into the rows. gpt adds the learned positions (read 2, write 1) and
// dropout (read, write, 1-byte mask); the position lookup itself is left out
// (docs/cost_model.md, Megatron-LM's kernels).
void BlockOpsBuilder::Embedding() {
  const double T = sh_.T;
  Memory("embedding", G::kNone, {2 * T * E_ * a_, 1}, {});
  (out_.ops_.end() - 1)->backward_weight = {3 * T * E_ * a_, 1};
  // Vocabulary-parallel: each tp rank looks up its rows, then the output is all-reduced
  // (sequence parallel: reduce-scattered, whose backward all-gathers the gradient).
  if (sh_.tp > 1) {
    using K = CollectiveKind;
    const bool sp = sh_.sequence_parallel;
    Collective("embedding.tp_output", MeshDim::kTp, T * E_ * a_,
               {sp ? K::kReduceScatter : K::kAllReduce, 1, P::kEmbeddingOutput},
               {K::kAllGather, static_cast<int8_t>(sp ? 1 : 0), P::kEmbeddingOutput});
  }
  if (m_.block != BlockKind::kGpt) return;
  Memory("embedding.positions", G::kNone, {3 * T * E_ * a_, 1}, {});
  Memory("embedding.dropout", G::kNone, {(2 * a_ + 1) * T * E_, 1}, {});
}

namespace {

// The cross-entropy over this rank's (T, V/tp) logits: bytes per logit and kernels.
struct LossWork {
  double fwd_bytes = 0, bwd_bytes = 0;
  int64_t fwd_kernels = 0, bwd_kernels = 0;
};

// The loss as FrameworkSpec::loss runs it (the memory side: LossSavedTensors,
// planner/cost/activation_memory.h), bytes per logit of this rank's (T, V/tp) logits in
// the activation dtype a. The per-token gathers, nll_loss's (T) values and the all-reduces of
// (T) values are left out.
//
// fp32-in-place: Megatron-LM's loss, which the executor runs too (executor/model/ops.cc
// CrossEntropyForward, executor/parallel/vocab_parallel_ops.cc with tp > 1):
// megatron/model/gpt_model.py post_language_model_processing with fp16_lm_cross_entropy off,
// its default, passes output.float(); mpu/cross_entropy.py _VocabParallelCrossEntropy works in
// place on that fp32 copy. Forward, the cast (read a, write 4; none when the logits are fp32),
// max (read 4), sub_ of the max (read 4, write 4), exp (read 4, write 4), sum (read 4), div_ by
// the sum, the softmax kept for backward (read 4, write 4); backward, mul_ by the loss gradient
// (read 4, write 4) and the cast's gradient back to the logits' type (read 4, write a).
//
// cross-entropy: PyTorch's F.cross_entropy (torch/nn/functional.py: log_softmax, then
// nll_loss) on logits of L bytes. log_softmax runs aten/src/ATen/native/cuda/SoftMax.cu's
// cunn_SoftMaxForward, one block per row, which reads the row three times (its max, its sum of
// exponentials, the output pass) and writes it once: 4L; its shared-memory variant needs the
// row within cudaDeviceProp::sharedMemPerBlock (48 KiB), which no LLM vocabulary row fits.
// Backward, nll_loss_backward's zero-filled gradient (write L) and its scatter, then
// cunn_SoftMaxBackward: the gradient read for its sum, then the gradient and the saved output
// read and the input gradient written (4L). cross-entropy-fp32 runs it on logits the model
// casts to fp32 (L = 4): the cast (read a, write 4) before it and the cast's gradient (read 4,
// write a) after it.
LossWork LossOf(double a, LossKernel kind) {
  if (kind == LossKernel::kFp32InPlace) {
    const bool cast = a != 4;
    const double cast_bytes = cast ? a + 4 : 0;
    return {cast_bytes + 4 + 8 + 8 + 4 + 8, 8 + cast_bytes, cast ? 6 : 5, cast ? 2 : 1};
  }
  const bool cast = kind == LossKernel::kCrossEntropyFp32 && a != 4;
  const double L = kind == LossKernel::kCrossEntropyFp32 ? 4 : a, cast_bytes = cast ? a + 4 : 0;
  const int64_t casts = cast ? 1 : 0;
  return {4 * L + cast_bytes, 5 * L + cast_bytes, 2 + casts, 3 + casts};
}

}  // namespace

// The final norm (the blocks' norm, as the lowering runs it), the lm_head (T, E) x (E, V/tp),
// which stays bf16 in fp8 runs, and the loss.
void BlockOpsBuilder::Head() {
  NormOp("final_norm");
  const double T = sh_.T, Vt = static_cast<double>(sh_.vocab);
  // The lm_head's input: with sequence parallel all-gathered (backward: the gradient
  // reduce-scattered, the saved input re-gathered), else its gradient all-reduced.
  TpInputCollectives({"lm_head.sp_gather", "lm_head.sp_regather", "lm_head.tp_input"},
                     P::kLmHeadInput, P::kLmHeadInput);
  Add("lm_head", OpKind::kLinear, G::kNone).gemm = {T, Vt, E_, 1, false, /*fp8=*/false};
  const LossWork loss = LossOf(a_, sh_.loss);
  Memory("cross_entropy", G::kCrossEntropy, {T * Vt * loss.fwd_bytes, loss.fwd_kernels},
         {T * Vt * loss.bwd_bytes, loss.bwd_kernels});
  // The vocabulary-parallel loss's all-reduces of a value per token (fp32): the max, the
  // sum of exponentials and the target logit.
  if (sh_.tp > 1)
    Collective("cross_entropy.tp_reductions", MeshDim::kTp, T * 4,
               {CollectiveKind::kAllReduce, 3, P::kInLoss}, {CollectiveKind::kAllReduce, 0, P::kInLoss});
}

bool OpPolicySavesOutput(const BlockLinear& linear, int* matmuls) {
  if (linear.role == LinearRole::kRouter || linear.role == LinearRole::kRoutedExpert) return false;
  return ++*matmuls % 2 == 1;
}

bool RunsRingAttention(const RankShape& shape, const Lowering& lowering) {
  return shape.cp > 1 && lowering.kernels == KernelSet::kEager;
}

NormLaunches RmsNormLaunches(const RankShape& shape) {
  const int64_t cast = shape.act_bytes != 4 ? 1 : 0;
  return {7 + cast, 10 + cast};
}

BlockOps BuildBlockOps(const ModelSpec& model, const RankShape& shape, const Lowering& lowering) {
  BlockOps out;
  BlockOpsBuilder(model, shape, lowering, &out).Build();
  return out;
}

BlockOps BuildEmbeddingOps(const ModelSpec& model, const RankShape& shape) {
  BlockOps out;
  BlockOpsBuilder(model, shape, LoweringOf(shape, AttentionImpl::kFused), &out).Embedding();
  return out;
}

BlockOps BuildHeadOps(const ModelSpec& model, const RankShape& shape, const Lowering& lowering) {
  BlockOps out;
  BlockOpsBuilder(model, shape, lowering, &out).Head();
  return out;
}

}  // namespace meshplan
