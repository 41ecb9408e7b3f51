#include "planner/cost/block_work.h"

#include "planner/cost/block_linears.h"
#include "planner/cost/flops.h"
#include "planner/cost/fp8_convention.h"

namespace meshplan {

// The linears' GEMMs, in FP8 when `fp8` (the blocks' linears of an fp8 run).
void AddLinears(const StepShape& s, const Linear* linears, int n, bool fp8, PartWork* part) {
  for (int i = 0; i < n; ++i) {
    const Linear& l = linears[i];
    part->forward.AddGemm({s.T, l.out, l.in, 1, false, fp8});
    part->backward_input.AddGemm({s.T, l.in, l.out, 1, false, fp8});
    part->backward_weight.AddGemm({l.in, l.out, s.T, 1, false, fp8});
  }
}

namespace {

// FP8 casts (fp8_convention.h) of one linear over `rows` tokens: forward, its input (rows, in)
// to FP8 rowwise + columnwise unless it reads the previous linear's input; backward, its
// output gradient (rows, out) likewise. One kernel each.
void AddFp8Cast(double rows, const Linear& l, PartWork* part) {
  if (!l.shares_input) {
    part->forward.memory_bytes += kFp8CastBytesPerElement * rows * l.in;
    part->forward.kernels += 1;
  }
  part->backward_input.memory_bytes += kFp8CastBytesPerElement * rows * l.out;
  part->backward_input.kernels += 1;
}

void AddFp8Casts(const StepShape& s, const Linear* linears, int n, PartWork* part) {
  for (int i = 0; i < n; ++i) AddFp8Cast(s.T, linears[i], part);
}

// The attention core of one block in each pass, as attention_impl resolves it.
// fused: one flash kernel per CP ring step (forward and backward); naive: QK^T and P@V
// as batched GEMMs and the (B, H/tp, S/cp, S) scores' softmax (and gpt's dropout) as
// memory traffic.
void AddAttentionCore(const StepShape& s, PartWork* part) {
  const ModelSpec& m = s.model;
  const double bh = static_cast<double>(s.plan.micro_batch) * static_cast<double>(m.heads) / s.tp;
  const double q = s.S / static_cast<double>(s.plan.cp), kv = s.S;
  // q/k heads are D wide, v heads Dv (MLA): a flash kernel of the mean width runs the same
  // 2*(D + Dv) FLOPs per query-key pair.
  const double Dqk = static_cast<double>(m.head_dim()), Dv = static_cast<double>(m.v_head_dim());
  const double d = (Dqk + Dv) / 2;
  const double nominal_fwd = s.T * AttentionCoreForwardFlopsPerToken(m, s.seq) / s.tp;  // 4*T*E*S/tp (D = E/H)
  const int64_t ring_steps = s.plan.cp;
  ComputeWork core;
  core.attention_flops = nominal_fwd;
  ComputeWork core_bwd;
  core_bwd.attention_flops = 2 * nominal_fwd;
  if (s.attention == AttentionImpl::kFused) {
    core.flash.push_back({bh, q, kv, d, /*causal=*/true, /*backward=*/false});
    core_bwd.flash.push_back({bh, q, kv, d, /*causal=*/true, /*backward=*/true});
    core.kernels = core_bwd.kernels = ring_steps;
  } else {
    const double scores = bh * q * kv;  // elements of the score matrix
    const bool gpt = m.block == BlockKind::kGpt, dropout = gpt;
    // The softmax reads the whole row, except Megatron-LM's fused causal kernel for 16-bit
    // scores (gpt blocks, no CP: scaled_upper_triang_masked_softmax.h), which loads only the
    // scores on or below the diagonal, (S + 1) / 2S of a row on average, and writes the
    // whole row (zeros above it); its backward loads the gradient and the probabilities
    // there likewise and writes the whole input gradient.
    const double read = gpt && s.a == 2 && s.plan.cp == 1 ? (kv + 1) / (2 * kv) : 1.0;
    core.AddGemm({q, kv, Dqk, bh, /*attention_core=*/true});  // S = Q K^T
    core.AddGemm({q, Dv, kv, bh, true});                       // O = P V
    core.memory_bytes = scores * ((read + 1) * s.a + (dropout ? 2 * s.a + 1 : 0));  // softmax, dropout
    // Launches: Megatron-LM's fused softmax (+ dropout); the executor's llama core runs the
    // scale, the mask, max, sub_, exp_, sum and div_ forward, five ops backward
    // (executor/model/attention_ops.cc).
    core.kernels = 2 + (gpt ? 1 + (dropout ? 1 : 0) : 7);
    core_bwd.AddGemm({q, kv, Dv, bh, true});   // dP = dO V^T
    core_bwd.AddGemm({kv, Dv, q, bh, true});   // dV = P^T dO
    core_bwd.AddGemm({q, Dqk, kv, bh, true});  // dQ = dS K
    core_bwd.AddGemm({kv, Dqk, q, bh, true});  // dK = dS^T Q
    core_bwd.memory_bytes = scores * ((2 * read + 1) * s.a + (dropout ? 2 * s.a + 1 : 0));
    core_bwd.kernels = 4 + (gpt ? 1 + (dropout ? 1 : 0) : 5);
  }
  part->forward += core;
  part->backward_input += core_bwd;
  part->attention_forward = core;
  part->attention_backward = core_bwd;
}

// One llama block's matrices (planner/cost/block_linears.h) as GEMMs. A matrix with
// copies > 1 (experts) is a grouped GEMM of `copies` products, each over the tokens of one
// copy: the rank's X/ep routed experts share the rows it computes, T*r*u
// (expert_parallel.h: T*k/X rows each with ep = 1, times the capacity factor when the
// buffers are padded to capacity), a shared expert all T. Small batches thus fill few
// tiles, which the shape model times (compute_work.h).
void AddLlamaLinears(const StepShape& s, bool moe_layer, PartWork* part) {
  const int64_t tp = s.plan.tp;
  for (const BlockLinear& l : LlamaBlockLinears(s.model, moe_layer)) {
    const double in = static_cast<double>(l.in_per_rank(tp));
    const double out = static_cast<double>(l.out_per_rank(tp));
    const bool routed = l.role == LinearRole::kRoutedExpert;
    const double copies = static_cast<double>(routed ? s.ep.local_experts : l.copies);
    const double rows = routed ? s.ep.rows_computed / copies : s.T;
    const bool fp8 = s.fp8 && l.role != LinearRole::kRouter;  // the router stays bf16
    part->forward.AddGemm({rows, out, in, copies, false, fp8});
    part->backward_input.AddGemm({rows, in, out, copies, false, fp8});
    part->backward_weight.AddGemm({in, out, rows, copies, false, fp8});
    if (!fp8) continue;
    AddFp8Cast(rows * copies, {in, out, l.shares_input}, part);
  }
}

// Memory-bound work of a MoE FFN's forward besides its GEMMs (bytes read + written):
// the router's softmax and top-k over (T, X) fp32, the permutation of each token to its
// k experts (read (T, E), write (T*r, E), r = ExpertRowsPerToken) and back with the
// routing weights (read (T*r, E), write (T, E)), and the SwiGLU of the routed rows this
// rank computes (T*r*u, expert_parallel.h) and of the shared experts (read gate, up,
// write: 3 x (rows, Fe/tp)).
double MoeMemoryBytes(const StepShape& s) {
  const MoeSpec& moe = s.model.moe;
  const double X = static_cast<double>(moe.experts), r = ExpertRowsPerToken(s.model);
  const double Fe = static_cast<double>(moe.expert_ffn_hidden) / s.tp;
  const double router = 3 * s.T * X * 4;                // softmax read + write, top-k read
  const double dispatch = 2 * (s.T * s.E + s.T * r * s.E) * s.a;
  const double routed_rows = s.ep.rows_computed;
  const double swiglu =
      3 * (routed_rows + s.T * static_cast<double>(moe.shared_experts)) * Fe * s.a;
  return router + dispatch + swiglu;
}

// The memory-bound kernels of one pass of a block: bytes read + written, and launches.
struct MemoryBound {
  double bytes = 0;
  int64_t kernels = 0;
};

// The memory-bound kernels of a gpt block, forward and backward, as Megatron-LM runs them
// (the 2021-2022 code of Narayanan et al. and Korthikanti et al.: megatron/model/
// transformer.py on PyTorch 1.8-1.12, Megatron's fused LayerNorm and softmax kernels).
// a = activation element size; Tn = tokens of the norms and residuals (T/tp with SP);
// the (T, .) tensors of the tp-split regions are /tp wide. docs/cost_model.md section 5.
//
// Forward, 7 kernels:
//   2 LayerNorms: read + write (Tn, E)                                   2a Tn E each
//   QKV bias: ColumnParallelLinear without skip_bias_add calls F.linear on the 3-D
//     [s, b, h] input, which PyTorch runs as matmul + add_(bias) (aten/src/ATen/native/
//     Linear.cpp: only 2-D inputs take the fused addmm): read + write (T, 3E/tp)
//   context: permute(2, 0, 1, 3).contiguous() of [b, np, s, hn] to [s, b, np, hn]
//     before the o-projection (ParallelSelfAttention.forward): read + write (T, E/tp)
//   2 bias-dropout-adds (jit-fused): read x and the residual, write the sum and a
//     1-byte mask                                                         (3a + 1) Tn E each
//   bias-GeLU (jit-fused): read + write (T, F/tp)
// Backward, 18 kernels (no longer twice the forward):
//   2 bias-dropout-adds: mask x scale (read a + 1, write a), then the bias gradient,
//     a reduction of the expanded bias (read a): 2 kernels each            (3a + 1) Tn E each
//   2 residual gradient sums: the block input and the first bias-dropout-add's output
//     each feed a LayerNorm and a residual, and autograd adds the two gradients
//     (torch/csrc/autograd/input_buffer.cpp: read 2, write 1)
//                                                                          3a Tn E each
//   2 LayerNorms: cuComputePartGradGammaBeta reads dy and x, cuComputeGradInput reads
//     dy and x and writes dx (HostLayerNormGradient), 3 kernels each         5a Tn E each
//   bias-GeLU: bias_gelu_back reads dy and x, writes dx; the bias gradient reduces dx
//                                                                          4a T F/tp
//   the attention scale: baddbmm's backward multiplies the q and k gradients by alpha
//     = 1/norm_factor in a kernel of its own (PyTorch derivatives.yaml, baddbmm:
//     grad.bmm(batch2^T) * alpha)                                          2a T (E + KD)/tp
//   the q, k, v split (split_tensor_along_last_dim = torch.split): its backward cats the
//     three gradients into one (T, 3E/tp) tensor                           2a T (E+2KD)/tp
//   the QKV bias gradient: a reduction of the output gradient              a T (E+2KD)/tp
void GptMemoryBound(const StepShape& s, MemoryBound* fwd, MemoryBound* bwd) {
  const double a = s.a, TnE = s.Tn * s.E, tp = s.tp;
  const double qkv = s.T * (s.E + 2 * s.KD) / tp, ctx = s.T * s.E / tp, ffn = s.T * s.F / tp;
  fwd->bytes = 2 * 2 * a * TnE                // 2 LayerNorms
               + 2 * a * qkv                  // QKV bias add
               + 2 * a * ctx                  // context permute copy
               + 2 * (3 * a + 1) * TnE        // 2 bias-dropout-adds
               + 2 * a * ffn;                 // bias-GeLU
  fwd->kernels = 7;
  bwd->bytes = 2 * (3 * a + 1) * TnE          // 2 bias-dropout-adds
               + 2 * 3 * a * TnE              // 2 residual gradient sums
               + 2 * 5 * a * TnE              // 2 LayerNorms
               + 4 * a * ffn                  // bias-GeLU
               + 2 * a * s.T * (s.E + s.KD) / tp  // q, k gradients x alpha
               + 2 * a * qkv                  // q, k, v gradients cat
               + a * qkv;                     // QKV bias gradient
  bwd->kernels = 2 * 2 + 2 + 2 * 3 + 2 + 2 + 1 + 1;
}

}  // namespace

// Kernel launches of one RMSNorm as the executor runs it (executor/model/ops.cc): forward its
// (Tn) norm, square, scale, epsilon and rsqrt, then x * rstd and * w (7); backward 10; each
// + rstd's cast to a 16-bit activation type.
NormLaunches RmsNormLaunches(const StepShape& s) {
  const int64_t cast = s.a != 4 ? 1 : 0;
  return {7 + cast, 10 + cast};
}

// Forward, backward and recompute work of one transformer block.
void BlockCompute(const StepShape& s, PartWork* part) {
  const ModelSpec& m = s.model;
  const double tp = s.tp;
  MemoryBound fwd, bwd;
  if (m.block == BlockKind::kLlama) {
    const bool moe = m.moe_layers() > 0;  // StepWork's block is the MoE one (step_work.h)
    AddLlamaLinears(s, moe, part);
    const double QD = static_cast<double>(m.q_hidden());
    fwd.bytes = 4 * s.Tn * s.E * s.a                     // 2 RMSNorms: read + write (Tn, E)
                + 6 * s.Tn * s.E * s.a                   // 2 residual adds: read 2, write 1 (Tn, E)
                + 2 * s.T * (QD + s.KD) / tp * s.a;      // RoPE on q (T, H*D/tp), k (T, KD/tp)
    // Kernels as the executor launches them (executor/model/ops.cc, attention_ops.cc), each
    // op a launch: RMSNorms (RmsNormLaunches); RoPE 4 per tensor each way; v's head split, the output gradient's split and dv's merge 1 each;
    // a residual add 1 each way; SwiGLU 2 forward, 10 backward. The bytes stay one read and
    // one write per tensor: the executor's extra passes run from cache at the sequences a CPU
    // is calibrated on (docs/validation/cpu_ranks.md), and fused GPU kernels make none.
    const NormLaunches norm = RmsNormLaunches(s);
    fwd.kernels = 2 * norm.fwd + 2 * 4 + 1 + 2;  // 2 norms, RoPE on q and k, v's split, 2 residuals
    if (s.attention != AttentionImpl::kFused) fwd.kernels += 1;  // the naive output's head merge
    bwd.kernels = 2 * norm.bwd + 2 * 4 + 2 + 2;  // 2 norms, RoPE, 2 head splits / merges, 2 adds
    if (m.qk_norm) {     // q_norm, k_norm: read + write q and k
      fwd.bytes += 2 * s.T * (QD + s.KD) / tp * s.a;
      fwd.kernels += 2;
      bwd.kernels += 2;
    }
    if (!moe) {
      fwd.bytes += 3 * s.T * s.F / tp * s.a;             // SwiGLU: read gate, up, write (T, F/tp)
      fwd.kernels += 2;
      bwd.kernels += 10;
    } else {
      fwd.bytes += MoeMemoryBytes(s);
      const int64_t moe_kernels = 4 + 1 + (m.moe.shared_experts > 0 ? 1 : 0);  // routing, SwiGLUs
      fwd.kernels += moe_kernels;
      bwd.kernels += moe_kernels;
    }
    bwd.bytes = 2 * fwd.bytes;  // backward: twice the forward's bytes
  } else {
    const Linear linears[] = {{s.E, (s.E + 2 * s.KD) / tp}, {s.E / tp, s.E},  // qkv, o
                              {s.E, s.F / tp},              {s.F / tp, s.E}};  // fc1, fc2
    AddLinears(s, linears, 4, s.fp8, part);
    if (s.fp8) AddFp8Casts(s, linears, 4, part);
    GptMemoryBound(s, &fwd, &bwd);  // Megatron-LM's kernels, op by op
  }
  const int64_t matmuls = part->forward.gemms.size;  // before the attention core's
  part->forward.memory_bytes += fwd.bytes;
  part->forward.kernels += matmuls + fwd.kernels;
  part->backward_input.memory_bytes += bwd.bytes;
  part->backward_input.kernels += matmuls + bwd.kernels;
  part->backward_weight.kernels += matmuls;
  AddAttentionCore(s, part);
  part->recompute[static_cast<int>(Recompute::kNone)] = {};
  part->recompute[static_cast<int>(Recompute::kSelective)] = part->attention_forward;
  part->recompute[static_cast<int>(Recompute::kFull)] = part->forward;
}

}  // namespace meshplan
