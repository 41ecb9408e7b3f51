#include "planner/cost/step_work.h"

#include <string>

#include "planner/cost/activation_memory.h"
#include "planner/cost/block_linears.h"
#include "planner/cost/flops.h"
#include "planner/cost/fp8_convention.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/offload.h"
#include "planner/cost/param_count.h"

namespace meshplan {

const char* ToString(StepPhase phase) {
  switch (phase) {
    case StepPhase::kForward: return "forward";
    case StepPhase::kBackward: return "backward";
    case StepPhase::kRecompute: return "recompute";
    case StepPhase::kOptimizer: return "optimizer";
  }
  return "?";
}

const char* ToString(CollectivePosition position) {
  switch (position) {
    case CollectivePosition::kBeforePart: return "before_part";
    case CollectivePosition::kBeforeAttention: return "before_attention";
    case CollectivePosition::kDuringAttention: return "during_attention";
    case CollectivePosition::kAfterAttention: return "after_attention";
    case CollectivePosition::kBeforeMlp: return "before_mlp";
    case CollectivePosition::kExpertDispatch: return "expert_dispatch";
    case CollectivePosition::kExpertCombine: return "expert_combine";
    case CollectivePosition::kAfterMlp: return "after_mlp";
    case CollectivePosition::kEmbeddingOutput: return "embedding_output";
    case CollectivePosition::kLmHeadInput: return "lm_head_input";
    case CollectivePosition::kInLoss: return "in_loss";
    case CollectivePosition::kAfterPart: return "after_part";
    case CollectivePosition::kAfterOptimizer: return "after_optimizer";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// Building the step's work

namespace {

int64_t ElementBytes(Precision precision) { return precision == Precision::kFp32 ? 4 : 2; }

// What BuildStepWork's helpers share: the plan's shapes on one rank, as doubles.
struct Shape {
  const ModelSpec& model;
  const ParallelPlan& plan;
  double T = 0;   // tokens of a micro-batch on this rank: B*S/cp
  double Tn = 0;  // tokens seen by norms / residuals: T/tp with SP, else T
  int64_t seq = 0;  // S: keys each query attends to (over the whole CP ring)
  double S = 0;
  double E = 0, F = 0, KD = 0, Vl = 0;  // Vl: this rank's vocabulary shard (padded V / tp)
  double tp = 1;
  double a = 2;   // activation element size
  bool fp8 = false;  // the blocks' linear GEMMs in FP8 (planner/cost/fp8_convention.h)
  AttentionImpl attention = AttentionImpl::kFused;  // resolved
  ExpertParallelWork ep = {};  // a MoE block's routed rows and all-to-all (expert_parallel.h)
};


Collective Make(MeshDim dim, CollectiveKind kind, StepPhase phase, CollectivePosition position,
                Cadence cadence, double bytes, const CommGroup& group, bool overlappable,
                int32_t count = 1) {
  Collective c;
  c.dim = dim;
  c.kind = kind;
  c.phase = phase;
  c.position = position;
  c.cadence = cadence;
  c.bytes = bytes;
  c.group = group;
  c.count = count;
  c.overlappable = overlappable;
  return c;
}

// One linear layer (T, in) x (in, out) on this rank: its GEMM in each pass.
struct Linear {
  double in = 0, out = 0;
  bool shares_input = false;  // reads the previous linear's input (q/k/v, gate/up)
};

// The linears' GEMMs, in FP8 when `fp8` (the blocks' linears of an fp8 run).
void AddLinears(const Shape& s, const Linear* linears, int n, bool fp8, PartWork* part) {
  for (int i = 0; i < n; ++i) {
    const Linear& l = linears[i];
    part->forward.AddGemm({s.T, l.out, l.in, 1, false, fp8});
    part->backward_input.AddGemm({s.T, l.in, l.out, 1, false, fp8});
    part->backward_weight.AddGemm({l.in, l.out, s.T, 1, false, fp8});
  }
}

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

void AddFp8Casts(const Shape& s, const Linear* linears, int n, PartWork* part) {
  for (int i = 0; i < n; ++i) AddFp8Cast(s.T, linears[i], part);
}

// The attention core of one block in each pass, as attention_impl resolves it.
// fused: one flash kernel per CP ring step (forward and backward); naive: QK^T and P@V
// as batched GEMMs and the (B, H/tp, S/cp, S) scores' softmax (and gpt's dropout) as
// memory traffic.
void AddAttentionCore(const Shape& s, PartWork* part) {
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
void AddLlamaLinears(const Shape& s, bool moe_layer, PartWork* part) {
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
double MoeMemoryBytes(const Shape& s) {
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
void GptMemoryBound(const Shape& s, MemoryBound* fwd, MemoryBound* bwd) {
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

// Kernel launches of one RMSNorm as the executor runs it (executor/model/ops.cc): forward its
// (Tn) norm, square, scale, epsilon and rsqrt, then x * rstd and * w (7); backward 10; each
// + rstd's cast to a 16-bit activation type.
struct NormLaunches {
  int64_t fwd = 0, bwd = 0;
};
NormLaunches RmsNormLaunches(const Shape& s) {
  const int64_t cast = s.a != 4 ? 1 : 0;
  return {7 + cast, 10 + cast};
}

// Forward, backward and recompute work of one transformer block.
void BlockCompute(const Shape& s, PartWork* part) {
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

// TP (and SP) collectives of one block: 2 all-reduces forward and 2 backward, or with SP
// an all-gather + reduce-scatter pair in place of each (same volume) plus the backward's
// re-gather of each saved sharded input; full recompute replays the forward ones.
void BlockTpCollectives(const Shape& s, PartWork* part) {
  if (s.plan.tp <= 1) return;
  const CommGroup tp = MeshGroup(s.plan, MeshDim::kTp);
  const double bytes = s.T * s.E * s.a;  // (T, E) activation of this cp rank
  const bool overlap = s.plan.tp_comm_overlap;
  using P = CollectivePosition;
  auto add = [&](CollectiveKind kind, StepPhase phase, P position, int32_t count = 1) {
    part->collectives.push_back(Make(MeshDim::kTp, kind, phase, position, Cadence::kPerMicrobatch,
                                     bytes, tp, overlap, count));
  };
  const bool full = s.plan.recompute == Recompute::kFull;
  if (!s.plan.sequence_parallel) {
    for (StepPhase phase : {StepPhase::kForward, StepPhase::kRecompute}) {
      if (phase == StepPhase::kRecompute && !full) continue;
      add(CollectiveKind::kAllReduce, phase, P::kAfterAttention);
      add(CollectiveKind::kAllReduce, phase, P::kAfterMlp);
    }
    add(CollectiveKind::kAllReduce, StepPhase::kBackward, P::kAfterMlp);
    add(CollectiveKind::kAllReduce, StepPhase::kBackward, P::kAfterAttention);
    return;
  }
  for (StepPhase phase : {StepPhase::kForward, StepPhase::kRecompute}) {
    if (phase == StepPhase::kRecompute && !full) continue;
    add(CollectiveKind::kAllGather, phase, P::kBeforeAttention);
    add(CollectiveKind::kReduceScatter, phase, P::kAfterAttention);
    add(CollectiveKind::kAllGather, phase, P::kBeforeMlp);
    add(CollectiveKind::kReduceScatter, phase, P::kAfterMlp);
  }
  // Backward: the gradient of a reduce-scatter is an all-gather and vice versa; and the
  // sequence-sharded norm output saved for the weight gradients is all-gathered again
  // (Megatron, and the executor: executor/model/llama_model.h), one more all-gather per region.
  add(CollectiveKind::kAllGather, StepPhase::kBackward, P::kBeforeMlp, 2);
  add(CollectiveKind::kReduceScatter, StepPhase::kBackward, P::kAfterMlp);
  add(CollectiveKind::kAllGather, StepPhase::kBackward, P::kBeforeAttention, 2);
  add(CollectiveKind::kReduceScatter, StepPhase::kBackward, P::kAfterAttention);
}

// CP ring attention (executor/parallel/ring_attention.h): every rank's K and V pass around the ring
// (cp-1 steps) in the forward; the backward passes K, V and their gradients (two
// exchanges). The ring keeps its logsumexp, so only full recompute replays the forward
// exchange (selective recomputes nothing of it).
void BlockCpCollectives(const Shape& s, PartWork* part) {
  if (s.plan.cp <= 1) return;
  const CommGroup cp = MeshGroup(s.plan, MeshDim::kCp);
  // K (B, S, K*D/tp) and V (B, S, K*Dv/tp); Dv == D except under MLA.
  const double v_width = static_cast<double>(s.model.kv_heads * s.model.v_head_dim());
  const double kv_bytes = s.plan.micro_batch * s.S * (s.KD + v_width) / s.tp * s.a;
  using P = CollectivePosition;
  auto add = [&](StepPhase phase, int32_t count) {
    part->collectives.push_back(Make(MeshDim::kCp, CollectiveKind::kRingExchange, phase,
                                     P::kDuringAttention, Cadence::kPerMicrobatch, kv_bytes, cp,
                                     /*overlappable=*/true, count));
  };
  add(StepPhase::kForward, 1);
  if (s.plan.recompute == Recompute::kFull) add(StepPhase::kRecompute, 1);
  add(StepPhase::kBackward, 2);
}

// Expert parallel all-to-alls of a MoE block (step_work.h, expert_parallel.h), in each
// pass's order: forward dispatch (+ tp all-gather), experts, (tp reduce-scatter +) combine;
// backward the combine's gradient first. Blocking: the experts wait for their rows.
void BlockEpCollectives(const Shape& s, PartWork* part) {
  if (s.ep.ep <= 1 || s.model.moe_layers() == 0) return;
  const CommGroup ep = MeshGroup(s.plan, MeshDim::kEp);
  const CommGroup tp = MeshGroup(s.plan, MeshDim::kTp);
  const double a2a = s.ep.all_to_all_bytes;               // (T*r/tp, E) per rank
  const double rows = s.ep.rows_computed * s.E * s.a;     // (T*r*u, E) gathered over tp
  const bool regather = s.plan.tp > 1;
  const bool tp_overlap = s.plan.tp_comm_overlap;
  using P = CollectivePosition;
  using K = CollectiveKind;
  auto a2a_at = [&](StepPhase phase, P position) {
    part->collectives.push_back(Make(MeshDim::kEp, K::kAllToAll, phase, position,
                                     Cadence::kPerMicrobatch, a2a, ep, /*overlappable=*/false));
  };
  auto tp_at = [&](K kind, StepPhase phase, P position) {
    if (regather)
      part->collectives.push_back(Make(MeshDim::kTp, kind, phase, position,
                                       Cadence::kPerMicrobatch, rows, tp, tp_overlap));
  };
  for (StepPhase phase : {StepPhase::kForward, StepPhase::kRecompute}) {
    if (phase == StepPhase::kRecompute && s.plan.recompute != Recompute::kFull) continue;
    a2a_at(phase, P::kExpertDispatch);
    tp_at(K::kAllGather, phase, P::kExpertDispatch);
    tp_at(K::kReduceScatter, phase, P::kExpertCombine);
    a2a_at(phase, P::kExpertCombine);
  }
  a2a_at(StepPhase::kBackward, P::kExpertCombine);
  tp_at(K::kAllGather, StepPhase::kBackward, P::kExpertCombine);
  tp_at(K::kReduceScatter, StepPhase::kBackward, P::kExpertDispatch);
  a2a_at(StepPhase::kBackward, P::kExpertDispatch);
}

// The DP gradient sync and ZeRO parameter gathers of `params` parameters over `dp`.
void AddDpSync(const Shape& s, const StepWork& w, int64_t params, const CommGroup& dp,
               PartWork* part) {
  if (dp.size() <= 1 || params == 0) return;
  const double grads = static_cast<double>(params * w.grad_bytes);
  const double weights = static_cast<double>(params * w.param_bytes);
  using P = CollectivePosition;
  using K = CollectiveKind;
  auto add = [&](K kind, StepPhase phase, P position, Cadence cadence, double bytes, bool overlap) {
    part->collectives.push_back(
        Make(MeshDim::kDp, kind, phase, position, cadence, bytes, dp, overlap));
  };
  switch (s.plan.zero_stage) {
    case 0:
      add(K::kAllReduce, StepPhase::kBackward, P::kAfterPart, Cadence::kPerStep, grads, true);
      break;
    case 1:
    case 2:
      add(K::kReduceScatter, StepPhase::kBackward, P::kAfterPart,
          s.plan.zero_stage == 1 ? Cadence::kPerStep : Cadence::kPerMicrobatch, grads, true);
      add(K::kAllGather, StepPhase::kOptimizer, P::kAfterOptimizer, Cadence::kPerStep, weights,
          false);
      break;
    default:  // 3
      add(K::kAllGather, StepPhase::kForward, P::kBeforePart, Cadence::kPerMicrobatch, weights,
          true);
      add(K::kAllGather, StepPhase::kBackward, P::kBeforePart, Cadence::kPerMicrobatch, weights,
          true);
      add(K::kReduceScatter, StepPhase::kBackward, P::kAfterPart, Cadence::kPerMicrobatch, grads,
          true);
      break;
  }
}

// DP gradient sync and ZeRO parameter gathers of a part with `params` parameters on this
// rank, `expert_params` of them routed experts split over ep > 1: those over the
// expert-data-parallel group, the rest over dp x cp.
void DpCollectives(const Shape& s, const StepWork& w, int64_t params, int64_t expert_params,
                   PartWork* part) {
  AddDpSync(s, w, params - expert_params, DataParallelGroup(s.plan), part);
  AddDpSync(s, w, expert_params, ExpertDataParallelGroup(s.plan), part);
}

// Tied embeddings split over pipeline stages: the first and last stage each hold a copy
// and all-reduce its gradient once per step (Megatron's embedding group).
void TiedEmbeddingSync(const Shape& s, const StepWork& w, int64_t params, PartWork* part) {
  if (!s.model.tied_embeddings || s.plan.pp <= 1) return;
  CommGroup ends;
  ends.inner = {s.plan.tp * s.plan.cp * (s.plan.pp - 1), 2};
  part->collectives.push_back(Make(MeshDim::kPp, CollectiveKind::kAllReduce, StepPhase::kBackward,
                                   CollectivePosition::kAfterPart, Cadence::kPerStep,
                                   static_cast<double>(params * w.grad_bytes), ends, false));
}

void EmbeddingWork(const Shape& s, const StepWork& w, PartWork* part) {
  const bool gpt = s.model.block == BlockKind::kGpt;
  // Lookup: read the rows, write (T, E); GPT adds positions (read 2, write 1) and dropout.
  const double fwd_bytes = 2 * s.T * s.E * s.a + (gpt ? 3 * s.T * s.E * s.a + (2 * s.a + 1) * s.T * s.E : 0);
  part->forward.memory_bytes = fwd_bytes;
  part->forward.kernels = gpt ? 3 : 1;
  // The weight gradient: scatter-add of the (T, E) output gradient into the rows.
  part->backward_weight.memory_bytes = 3 * s.T * s.E * s.a;
  part->backward_weight.kernels = 1;
  if (s.plan.tp > 1) {
    const CommGroup tp = MeshGroup(s.plan, MeshDim::kTp);
    const double bytes = s.T * s.E * s.a;
    const bool overlap = s.plan.tp_comm_overlap;
    using P = CollectivePosition;
    if (s.plan.sequence_parallel) {
      part->collectives.push_back(Make(MeshDim::kTp, CollectiveKind::kReduceScatter,
                                       StepPhase::kForward, P::kEmbeddingOutput,
                                       Cadence::kPerMicrobatch, bytes, tp, overlap));
      part->collectives.push_back(Make(MeshDim::kTp, CollectiveKind::kAllGather,
                                       StepPhase::kBackward, P::kEmbeddingOutput,
                                       Cadence::kPerMicrobatch, bytes, tp, overlap));
    } else {
      part->collectives.push_back(Make(MeshDim::kTp, CollectiveKind::kAllReduce,
                                       StepPhase::kForward, P::kEmbeddingOutput,
                                       Cadence::kPerMicrobatch, bytes, tp, overlap));
    }
  }
  DpCollectives(s, w, part->params, 0, part);
}

// The cross-entropy over this rank's (T, V/tp) logits: bytes per logit and kernels.
struct LossWork {
  double fwd_bytes = 0, bwd_bytes = 0;
  int64_t fwd_kernels = 0, bwd_kernels = 0;
};

// Megatron-LM's loss, which the executor runs too (executor/model/ops.cc CrossEntropyForward,
// executor/parallel/vocab_parallel_ops.cc with tp > 1): megatron/model/gpt_model.py
// post_language_model_processing with fp16_lm_cross_entropy off, its default, passes
// output.float(); mpu/cross_entropy.py _VocabParallelCrossEntropy works in place on that fp32
// copy. Forward, the cast (read a, write 4; none when the logits are fp32), max (read 4), sub_
// of the max (read 4, write 4), exp (read 4, write 4), sum (read 4), div_ by the sum, the
// softmax kept for backward (read 4, write 4); backward, mul_ by the loss gradient (read 4,
// write 4) and the cast's gradient back to the logits' type (read 4, write a). The per-token
// gathers and all-reduces of (T) values are left out.
LossWork LossOf(const Shape& s) {
  const bool cast = s.a != 4;
  const double cast_bytes = cast ? s.a + 4 : 0;
  return {cast_bytes + 4 + 8 + 8 + 4 + 8, 8 + cast_bytes, cast ? 6 : 5, cast ? 2 : 1};
}

void HeadWork(const Shape& s, const StepWork& w, PartWork* part) {
  const double norm_bytes = 2 * s.Tn * s.E * s.a;
  const LossWork loss = LossOf(s);
  const Linear lm_head = {s.E, s.Vl};  // (T, E) x (E, V/tp)
  AddLinears(s, &lm_head, 1, /*fp8=*/false, part);  // the lm_head stays bf16 in fp8 runs
  part->forward.memory_bytes = norm_bytes + s.T * s.Vl * loss.fwd_bytes;
  // The final norm's launches: Megatron-LM's fused LayerNorm 1 forward, 2 backward; the
  // executor's RMSNorm as in a llama block.
  const NormLaunches norm =
      s.model.block == BlockKind::kGpt ? NormLaunches{1, 2} : RmsNormLaunches(s);
  part->forward.kernels = norm.fwd + 1 + loss.fwd_kernels;
  part->backward_input.memory_bytes = 2 * norm_bytes + s.T * s.Vl * loss.bwd_bytes;
  part->backward_input.kernels = norm.bwd + 1 + loss.bwd_kernels;
  part->backward_weight.kernels = 1;
  if (s.plan.tp > 1) {
    const CommGroup tp = MeshGroup(s.plan, MeshDim::kTp);
    const double bytes = s.T * s.E * s.a;
    const bool overlap = s.plan.tp_comm_overlap;
    using P = CollectivePosition;
    using K = CollectiveKind;
    auto add = [&](K kind, StepPhase phase, P position, double b, int32_t count) {
      part->collectives.push_back(
          Make(MeshDim::kTp, kind, phase, position, Cadence::kPerMicrobatch, b, tp, overlap, count));
    };
    if (s.plan.sequence_parallel) {  // the backward re-gathers the saved sharded input too
      add(K::kAllGather, StepPhase::kForward, P::kLmHeadInput, bytes, 1);
      add(K::kAllGather, StepPhase::kBackward, P::kLmHeadInput, bytes, 1);
      add(K::kReduceScatter, StepPhase::kBackward, P::kLmHeadInput, bytes, 1);
    } else {
      add(K::kAllReduce, StepPhase::kBackward, P::kLmHeadInput, bytes, 1);
    }
    add(K::kAllReduce, StepPhase::kForward, P::kInLoss, s.T * 4, 3);  // fp32 (T) each
  }
  DpCollectives(s, w, part->params, 0, part);
}

// Bytes the optimizer step moves per parameter it updates.
// gpt blocks in mixed precision: Megatron-LM's fp16 step (megatron/optimizer/optimizer.py,
// Float16OptimizerWithFloat16Params.step), one pass each: _copy_model_grads_to_main_grads,
// main_grad.float() of the fp16 gradient (read 2, write 4); _unscale_main_grads_and_check_
// for_nan, torch._amp_foreach_non_finite_check_and_unscale_ (read 4, write 4; it runs with
// the constant loss scale too); clip_grad_norm's multi_tensor_l2norm (read 4; the
// multi_tensor_scale that clips runs only when the norm exceeds the limit: not counted);
// apex FusedAdam on the fp32 main params (read grad, param, m, v, write param, m, v: 28);
// _copy_main_params_to_model_params, multi_tensor_scale by 1 (read 4, write 2).
double OptimizerBytesPerParam(Precision precision, BlockKind block) {
  switch (precision) {
    case Precision::kMixed:  // read bf16 grad + fp32 master, m, v; write master, m, v, bf16 param
      if (block == BlockKind::kGpt) return 6 + 8 + 4 + 28 + 6;
      return 2 + 12 + 12 + 2;
    case Precision::kBf16:   // read grad, param, m, v; write param, m, v (all bf16)
    case Precision::kFp8:    // the same bf16 states (the FP8 weight casts: OptimizerWork)
      return 8 + 6;
    case Precision::kFp32:   // read grad, param, m, v; write param, m, v (all fp32)
      return 16 + 12;
  }
  return 0;
}

}  // namespace

StepWork BuildStepWork(const ModelSpec& model, const TrainingSpec& training,
                       const ParallelPlan& plan, AttentionImpl attention) {
  StepWork w;
  BuildStepWork(model, training, plan, attention, &w);
  return w;
}

// TrainingSpec::grad_accumulation separate: every micro-batch after the first adds its weight
// gradients into the accumulator in one memory-bound pass (read both, write the sum: 3 x the
// gradient element size), over the gradient this rank accumulates (ZeRO-2/3 reduce-scatter
// each micro-batch's gradients and accumulate the shard). Each part's weight-gradient pass
// carries its share, (m - 1) / m of a pass per micro-batch.
void AddSeparateGradAccumulation(StepWork& w) {
  const double m = static_cast<double>(w.micro_batches);
  if (m <= 1) return;
  const bool sharded = w.zero_stage >= 2;
  for (PartWork* part : {&w.block, &w.embedding, &w.head}) {
    const double experts = static_cast<double>(part->expert_params);
    const double dense = static_cast<double>(part->params) - experts;
    const double elements =
        sharded ? dense / static_cast<double>(w.optimizer_shards) +
                      experts / static_cast<double>(w.expert_optimizer_shards)
                : dense + experts;
    part->backward_weight.memory_bytes +=
        (m - 1) / m * 3 * static_cast<double>(w.grad_bytes) * elements;
  }
}

void BuildStepWork(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan,
                   AttentionImpl attention, StepWork* out) {
  StepWork& w = *out;  // fresh (the header's contract): the parts accumulate into it
  w.pp = plan.pp;
  w.virtual_stages = plan.virtual_stages;
  w.micro_batches = plan.num_microbatches(training.global_batch);
  w.stage_layers = SplitLayers(model.layers, plan);
  w.tokens_per_microbatch = plan.micro_batch * training.seq_len / plan.cp;
  w.recompute = plan.recompute;
  w.schedule = plan.schedule;
  w.zero_stage = plan.zero_stage;
  w.param_bytes = w.grad_bytes = w.activation_bytes = ElementBytes(training.precision);

  Shape s{model, plan};
  s.T = static_cast<double>(w.tokens_per_microbatch);
  s.tp = static_cast<double>(plan.tp);
  s.Tn = plan.sequence_parallel ? s.T / s.tp : s.T;
  s.seq = training.seq_len;
  s.S = static_cast<double>(training.seq_len);
  s.E = static_cast<double>(model.hidden);
  s.F = static_cast<double>(model.ffn_hidden);
  s.KD = static_cast<double>(model.kv_hidden());
  s.Vl = static_cast<double>(PaddedVocab(model, plan.tp) / plan.tp);
  s.a = static_cast<double>(w.activation_bytes);
  s.attention = ResolveAttentionImpl(attention, model, training.precision);
  s.fp8 = training.precision == Precision::kFp8;
  s.ep = ExpertParallelOf(model, plan, s.T, s.a);
  w.experts = s.ep;

  // Transformer block.
  w.block.params = BlockParamsPerRank(model, plan);
  if (plan.ep > 1 && model.moe_layers() > 0)
    w.block.expert_params = RoutedExpertParamsPerRank(model, plan.tp, plan.ep);
  if (s.fp8)
    w.fp8_weight_cast_bytes_per_block = kFp8CastBytesPerElement * static_cast<double>(w.block.params);
  BlockCompute(s, &w.block);
  BlockTpCollectives(s, &w.block);
  BlockCpCollectives(s, &w.block);
  BlockEpCollectives(s, &w.block);
  DpCollectives(s, w, w.block.params, w.block.expert_params, &w.block);

  // Embedding (first stage) and head (last stage).
  const StageParams first = CountStageParams(model, plan, 0);
  const StageParams last = CountStageParams(model, plan, plan.pp - 1);
  w.embedding.params = first.embedding;
  EmbeddingWork(s, w, &w.embedding);
  TiedEmbeddingSync(s, w, first.embedding, &w.embedding);
  w.head.params = last.final_norm + last.lm_head;
  HeadWork(s, w, &w.head);
  TiedEmbeddingSync(s, w, last.lm_head, &w.head);

  // Pipeline point-to-point: the (T, E) stage output, sequence-sharded with SP; without SP
  // each tp rank sends 1/tp of it and the receiver all-gathers it over tp (Megatron-LM's
  // scatter/gather optimisation, Narayanan et al. 2021 section 4.1).
  if (plan.pp > 1) {
    const bool scatter = !plan.sequence_parallel && plan.tp > 1;
    const double bytes = s.Tn * s.E * s.a / (scatter ? s.tp : 1.0);
    if (scatter)
      w.pp_regather = Make(MeshDim::kTp, CollectiveKind::kAllGather, StepPhase::kForward,
                           CollectivePosition::kAfterPart, Cadence::kPerMicrobatch,
                           s.T * s.E * s.a, MeshGroup(plan, MeshDim::kTp), false);
    const CommGroup pp = MeshGroup(plan, MeshDim::kPp);
    w.pp_activation = Make(MeshDim::kPp, CollectiveKind::kSendRecv, StepPhase::kForward,
                           CollectivePosition::kAfterPart, Cadence::kPerMicrobatch, bytes, pp, false);
    w.pp_gradient = Make(MeshDim::kPp, CollectiveKind::kSendRecv, StepPhase::kBackward,
                         CollectivePosition::kAfterPart, Cadence::kPerMicrobatch, bytes, pp, false);
  }

  w.optimizer_bytes_per_param = OptimizerBytesPerParam(training.precision, model.block);
  w.optimizer_shards = plan.zero_stage >= 1 ? plan.dp * plan.cp : 1;
  w.expert_optimizer_shards = plan.zero_stage >= 1 ? plan.expert_dp() * plan.cp : 1;
  if (training.grad_accumulation == GradAccumulation::kSeparate) AddSeparateGradAccumulation(w);
  w.offload.host_state_bytes_per_param = HostUpdatedBytesPerParam(BytesPerParamFor(training.precision));
  if (plan.offload_activations)
    w.offload.activation_bytes_per_block = OffloadedBytesPerBlock(model, training, plan, attention);
  SetPlanKnobs(plan, &w);
}

double OffloadedBytesPerBlock(const ModelSpec& model, const TrainingSpec& training,
                              const ParallelPlan& plan, AttentionImpl attention) {
  const ActivationShape shape = MakeActivationShape(model, training, plan);
  const AttentionImpl impl = ResolveAttentionImpl(attention, model, training.precision);
  return BlockSavedTensors(model, shape, impl, plan.recompute).TotalBytes();
}

void SerializeCommunication(StepWork* work) {
  for (PartWork* part : {&work->block, &work->embedding, &work->head})
    for (Collective& c : part->collectives) c.overlappable = false;
  work->dp_overlap = false;
  work->zero3_prefetch = 0;
}

const StepWork& WorkAsRun(const StepWork& work, const GpuSpec& gpu, StepWork* storage) {
  if (gpu.comm_overlaps_compute) return work;
  *storage = work;
  SerializeCommunication(storage);
  return *storage;
}

void SetPlanKnobs(const ParallelPlan& plan, StepWork* work) {
  for (PartWork* part : {&work->block, &work->embedding, &work->head})
    for (Collective& c : part->collectives)
      if (c.dim == MeshDim::kTp) c.overlappable = plan.tp_comm_overlap;
  work->dp_overlap = plan.dp_comm_overlap;
  work->zero3_prefetch = plan.zero3_prefetch;
  work->offload.optimizer = plan.offload_optimizer;
  work->offload.activations = plan.offload_activations;
  work->offload.params = plan.offload_params;
}

StageParts PartsOfStage(const StepWork& work, int64_t stage) {
  StageParts parts;
  parts.embedding = stage == 0;
  parts.head = stage == work.pp - 1;
  parts.blocks = work.stage_layers.Of(stage);
  return parts;
}

int64_t PpActivationSends(const StepWork& work, int64_t stage) {
  if (work.pp <= 1) return 0;
  return work.virtual_stages - (stage == work.pp - 1 ? 1 : 0);
}

int64_t PpGradientSends(const StepWork& work, int64_t stage) {
  if (work.pp <= 1) return 0;
  return work.virtual_stages - (stage == 0 ? 1 : 0);
}

namespace {

void AddPartBytes(const PartWork& part, double instances, double micro_batches, PerMeshDim* out) {
  for (const Collective& c : part.collectives) {
    const double per_step = c.cadence == Cadence::kPerMicrobatch ? micro_batches : 1.0;
    (*out)[c.dim] += instances * per_step * static_cast<double>(c.count) *
                     BytesSentPerRank(c.kind, c.bytes, c.group.size());
  }
}

}  // namespace

PerMeshDim CommBytesPerStep(const StepWork& work, int64_t stage) {
  const StageParts parts = PartsOfStage(work, stage);
  const double m = static_cast<double>(work.micro_batches);
  PerMeshDim out;
  AddPartBytes(work.block, static_cast<double>(parts.blocks), m, &out);
  if (parts.embedding) AddPartBytes(work.embedding, 1, m, &out);
  if (parts.head) AddPartBytes(work.head, 1, m, &out);
  const double sends = static_cast<double>(PpActivationSends(work, stage)) * work.pp_activation.bytes +
                       static_cast<double>(PpGradientSends(work, stage)) * work.pp_gradient.bytes;
  out[MeshDim::kPp] += m * sends;
  return out;
}

ComputeWork OptimizerWork(const StepWork& work, const StageParts& parts) {
  const double params = static_cast<double>(parts.blocks * work.block.params +
                                            (parts.embedding ? work.embedding.params : 0) +
                                            (parts.head ? work.head.params : 0));
  // The routed experts' states shard over the expert-data-parallel group (ep > 1).
  const double experts = static_cast<double>(parts.blocks * work.block.expert_params);
  ComputeWork out;
  out.memory_bytes = ((params - experts) / static_cast<double>(work.optimizer_shards) +
                      experts / static_cast<double>(work.expert_optimizer_shards)) *
                     work.optimizer_bytes_per_param;
  out.kernels = parts.blocks + (parts.embedding ? 1 : 0) + (parts.head ? 1 : 0);
  if (work.fp8_weight_cast_bytes_per_block > 0) {  // fp8: each block's weights cast once
    out.memory_bytes += static_cast<double>(parts.blocks) * work.fp8_weight_cast_bytes_per_block;
    out.kernels += parts.blocks;
  }
  return out;
}

}  // namespace meshplan
