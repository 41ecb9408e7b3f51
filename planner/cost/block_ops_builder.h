// The builder of BlockOps (planner/cost/block_ops.h): one block, the embedding or the head
// lowered to its ops as the lowering runs them. Internal to planner/cost: block_ops.cc (the
// saved-tensor lists, norms, residuals, the tensor-parallel collectives, embedding, head),
// block_ops_attention.cc (the attention half) and block_ops_ffn.cc (the MLP or MoE half)
// define its members; nothing else includes this header.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "planner/cost/block_ops.h"

namespace meshplan {

// Builds one BlockOps in place: the model, the rank's shape, the lowering, the list being
// built and which half of the block it is in. Sizes follow the legend (docs/architecture.md).
class BlockOpsBuilder {
  using G = FusionGroup;
  using P = CollectivePosition;
  static constexpr double kFp32Bytes = 4, kMaskBytes = 1, kIdBytes = 8;

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
      workspace.Add("block backward", "grad of the residual stream (B,Sn,E)",
                    b * sh_.s_norm * sh_.hidden, a_);
      workspace.Add("block backward", "grad of the branch output (B,Sc,E)",
                    b * double(sh_.s_local) * sh_.hidden, a_);
    }
  }
  void Embedding();
  void Head();

 private:
  // Appends an op (beyond capacity is a programming error: raise kCapacity). It starts as a
  // copy of a constant blank op: zeroing a temporary per op made BuildStepWork 7% slower,
  // value-initialising the slot (a `rep stos` per op) 30% (docs/benchmarks.md).
  BlockOp& Add(const char* name, OpKind kind, G group) {
    if (out_.ops_.size == BlockOps::kCapacity) std::abort();
    static constexpr BlockOp kBlank{};
    out_.ops_.push_back(kBlank);
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
  // A collective op here (BlockOp::comm); `saved_by_op`: the op policy saves its output;
  // `backward_behind_gemms`: OpCollective's.
  void Collective(const char* name, MeshDim dim, double bytes, CollectivePass fwd,
                  CollectivePass bwd, bool saved_by_op = false,
                  bool backward_behind_gemms = false) {
    if (out_.collective_ops_.size == BlockOps::kMaxCollectiveOps) std::abort();
    out_.collective_ops_.push_back(static_cast<uint8_t>(out_.ops_.size));
    BlockOp& op = Add(name, OpKind::kCollective, G::kNone);
    op.comm = {bytes, dim, fwd, bwd, backward_behind_gemms};
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
  // A tensor the op added last saves, built in its list's slot; returns it for its flags.
  SavedTensor& Save(const char* op, const char* tensor, double elements, double bytes_per_element) {
    SavedTensor& t = out_.saved_.Add(op, tensor, elements, bytes_per_element);
    t.mlp_half = mlp_;
    (out_.ops_.end() - 1)->saved_end = static_cast<uint8_t>(out_.saved_.size());
    return t;
  }
  // The same, when it is the output of an op the op policy saves (`saved_by_op`).
  SavedTensor& SaveOutputOf(bool saved_by_op, const char* op, const char* tensor, double elements,
                            double bytes_per_element) {
    SavedTensor& t = Save(op, tensor, elements, bytes_per_element);
    t.op_output = saved_by_op;
    return t;
  }
  // A temporary of this half's backward step (BlockOps::backward_workspace).
  SavedTensor& Temporary(const char* op, const char* tensor, double elements,
                         double bytes_per_element) {
    return out_.workspace_[mlp_ ? 1 : 0].Add(op, tensor, elements, bytes_per_element);
  }
  // An output the op policy keeps (BlockOps::op_outputs).
  SavedTensor& OpOutput(const char* op, const char* tensor, double elements,
                        double bytes_per_element) {
    SavedTensor& t = out_.op_outputs_.Add(op, tensor, elements, bytes_per_element);
    t.mlp_half = mlp_;
    return t;
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
      OpOutput(l.name, "matmul output (T, out/tp)", op.gemm.m * op.gemm.n * op.gemm.batch, a_);
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
        SavedTensor& input =
            Save(name, "input (B,Sn,E), held by a checkpoint", rows * sh_.hidden, a_);
        input.layer_input = input.checkpoint_only = true;
      }
      Save(name, "input in fp32 (B,Sn,E)", rows * sh_.hidden, kFp32Bytes);
      Save(name, "normed input before the weight (B,Sn,E)", rows * sh_.hidden, a_);
      Statistic(Save(name, "rstd (B,Sn) fp32", rows, kFp32Bytes));
      return;
    }
    Save(name, "input (B,Sn,E)", rows * sh_.hidden, a_).layer_input = layer_input;
    if (m_.block == BlockKind::kGpt) Statistic(Save(name, "mean (B,Sn) fp32", rows, kFp32Bytes));
    Statistic(Save(name, "rstd (B,Sn) fp32", rows, kFp32Bytes));
  }
  // torchtitan's repeat_kv copies k and v to every q head (fewer k/v heads than q heads).
  bool RepeatsKv() const { return torchtitan_ && sh_.kv_heads < sh_.heads; }
  static SavedTensor& Statistic(SavedTensor& t) {
    t.row_statistic = true;
    return t;
  }
  static SavedTensor& Core(SavedTensor& t) {
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
      Save(mask_op, "mask (B,Sn,E) 1 byte", double(sh_.b) * sh_.s_norm * sh_.hidden, kMaskBytes);
    } else {
      Elementwise(name, G::kResidual, 3 * sh_.Tn * E_ * a_, 1, 1);
    }
  }

  // Separate linears reading one (T, E) input (torchtitan's wq, wk, wv; w1, w3): backward,
  // autograd sums their input gradients, `adds` kernels each reading two (T, E) tensors and
  // writing one (torch/csrc/autograd/input_buffer.cpp, InputBuffer::accumulate), where one
  // fused GEMM returns a single gradient.
  void InputGradientSums(const char* name, int adds) {
    Memory(name, G::kResidual, {0, 0}, {adds * 3 * a_ * sh_.T * E_, adds});
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
  void SquaredReluFfn();
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

}  // namespace meshplan
