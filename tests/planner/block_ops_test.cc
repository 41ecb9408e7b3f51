// The block's op list (planner/cost/block_ops.h): the ops each architecture builds, in order;
// the default lowering of each block kind; the lowering as a separate input; the saved
// tensors' ownership; the linears' GEMMs against the FLOP count's parameters; and the
// embedding's and the head's op lists against docs/cost_model.md's closed forms and against
// the step's embedding and head work (BuildStepWork) they feed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "planner/cost/activation_memory.h"
#include "planner/cost/block_ops.h"
#include "planner/cost/flops.h"
#include "planner/cost/step_work.h"
#include "planner/cost/te_ring_copies.h"

namespace meshplan {
namespace {

ModelSpec Llama() {
  ModelSpec m;
  m.vocab_size = 32000;
  m.hidden = 1024;
  m.heads = 8;
  m.kv_heads = 2;
  m.layers = 4;
  m.ffn_hidden = 2816;
  return m;
}

TrainingSpec Training() {
  TrainingSpec t;
  t.global_batch = 8;
  t.seq_len = 512;
  t.precision = Precision::kBf16;
  return t;
}

std::vector<std::string> Names(const BlockOps& ops) {
  std::vector<std::string> out;
  for (const BlockOp& op : ops) out.push_back(op.name);
  return out;
}

const BlockOp& OpNamed(const BlockOps& ops, const std::string& name) {
  for (const BlockOp& op : ops)
    if (name == op.name) return op;
  FAIL("no op " << name);
  return *ops.begin();
}

BlockOps Build(const ModelSpec& m, const ParallelPlan& plan, AttentionImpl impl,
               KernelSet kernels = KernelSet::kEager) {
  TrainingSpec training = Training();
  training.framework.kernels = kernels;
  const RankShape shape = MakeRankShape(m, training, plan);
  return BuildBlockOps(m, shape, LoweringOf(shape, impl));
}

TEST_CASE("block ops: a llama block's ops in forward order", "[planner][block_ops]") {
  ModelSpec m = Llama();
  const ParallelPlan plan;
  using V = std::vector<std::string>;
  CHECK(Names(Build(m, plan, AttentionImpl::kFused)) ==
        V{"attention_norm", "wq", "wk", "wv", "rope", "attention.heads", "attention", "wo",
          "attention.residual", "ffn_norm", "w_gate", "w_up", "swiglu", "w_down",
          "mlp.residual"});
  m.qk_norm = true;
  CHECK(Names(Build(m, plan, AttentionImpl::kFused))[4] == "q_norm/k_norm");
  m.qk_norm = false;
  m.moe = {/*experts=*/8, /*top_k=*/2, /*shared_experts=*/1, /*expert_ffn_hidden=*/512};
  CHECK(Names(Build(m, plan, AttentionImpl::kFused)) ==
        V{"attention_norm", "wq", "wk", "wv", "rope", "attention.heads", "attention", "wo",
          "attention.residual", "ffn_norm", "router", "moe.routing", "experts.w_gate",
          "experts.w_up", "experts.swiglu", "experts.w_down", "combine", "shared.w_gate",
          "shared.w_up", "shared.swiglu", "shared.w_down", "mlp.residual"});
}

// The collective ops of a pass, as (name, kind, count, place) strings.
std::vector<std::string> CollectivesOf(const BlockOps& ops, bool backward) {
  std::vector<std::string> out;
  for (const BlockOp& op : ops) {
    if (op.kind != OpKind::kCollective) continue;
    const CollectivePass& pass = backward ? op.comm.backward : op.comm.forward;
    if (pass.count > 0)
      out.push_back(std::string(op.name) + " " + ToString(pass.kind) + " x" +
                    std::to_string(pass.count) + " " + ToString(pass.at));
  }
  return out;
}

TEST_CASE("block ops: a block's tp, cp and ep collectives sit where the block runs them",
          "[planner][block_ops]") {
  using V = std::vector<std::string>;
  ModelSpec m = Llama();
  ParallelPlan plan;
  plan.tp = 2;
  // Megatron's f and g: all-reduce of the input's gradient, all-reduce of the output.
  const BlockOps tp = Build(m, plan, AttentionImpl::kFused);
  CHECK(Names(tp) == V{"attention_norm", "attention.tp_input", "wq", "wk", "wv", "rope",
                       "attention.heads", "attention", "wo", "attention.tp_output",
                       "attention.residual", "ffn_norm", "mlp.tp_input", "w_gate", "w_up",
                       "swiglu", "w_down", "mlp.tp_output", "mlp.residual"});
  CHECK(CollectivesOf(tp, false) == V{"attention.tp_output all_reduce x1 after_attention",
                                      "mlp.tp_output all_reduce x1 after_mlp"});
  CHECK(CollectivesOf(tp, true) == V{"attention.tp_input all_reduce x1 after_attention",
                                     "mlp.tp_input all_reduce x1 after_mlp"});
  const double T = 512, E = 1024, a = 2;  // micro-batch 1 of S 512, bf16
  CHECK(OpNamed(tp, "attention.tp_output").comm.bytes == T * E * a);
  CHECK(OpNamed(tp, "attention.tp_output").comm.dim == MeshDim::kTp);

  // Sequence parallel: all-gather in (backward: reduce-scatter of its gradient and the saved
  // input's re-gather), reduce-scatter out (backward: all-gather), whose output the op
  // policy saves.
  plan.sequence_parallel = true;
  const BlockOps sp = Build(m, plan, AttentionImpl::kFused);
  CHECK(CollectivesOf(sp, false) == V{"attention.sp_gather all_gather x1 before_attention",
                                      "attention.sp_scatter reduce_scatter x1 after_attention",
                                      "mlp.sp_gather all_gather x1 before_mlp",
                                      "mlp.sp_scatter reduce_scatter x1 after_mlp"});
  CHECK(CollectivesOf(sp, true) == V{"attention.sp_gather reduce_scatter x1 after_attention",
                                     "attention.sp_regather all_gather x1 before_attention",
                                     "attention.sp_scatter all_gather x1 before_attention",
                                     "mlp.sp_gather reduce_scatter x1 after_mlp",
                                     "mlp.sp_regather all_gather x1 before_mlp",
                                     "mlp.sp_scatter all_gather x1 before_mlp"});
  CHECK(OpNamed(sp, "attention.sp_scatter").output_saved_by_op);
  CHECK_FALSE(OpNamed(sp, "attention.sp_gather").output_saved_by_op);

  // cp 2: the ring's K and V exchange during the attention core, twice in the backward.
  ParallelPlan cp;
  cp.cp = 2;
  const BlockOps ring = Build(m, cp, AttentionImpl::kFused);
  const V names = Names(ring);
  const auto at = std::find(names.begin(), names.end(), "attention.cp_ring");
  REQUIRE(at != names.end());
  CHECK(*(at + 1) == "attention");
  const BlockOp& exchange = OpNamed(ring, "attention.cp_ring");
  CHECK(exchange.comm.dim == MeshDim::kCp);
  // K and V of the whole sequence: B * S * (K*D + K*Dv) * a, K = 2 heads of D = Dv = 128.
  CHECK(exchange.comm.bytes == 1 * 512 * (2 * 128 + 2 * 128) * a);
  CHECK(CollectivesOf(ring, true) == V{"attention.cp_ring ring_exchange x2 during_attention"});

  // ep 2 with tp 2: the routed rows' all-to-all and tp all-gather before the experts, the
  // reduce-scatter and all-to-all back after them.
  m.moe = {/*experts=*/8, /*top_k=*/2, /*shared_experts=*/0, /*expert_ffn_hidden=*/512};
  ParallelPlan ep;
  ep.tp = 2;
  ep.dp = 2;
  ep.ep = 2;
  const BlockOps moe = Build(m, ep, AttentionImpl::kFused);
  CHECK(CollectivesOf(moe, false) == V{"attention.tp_output all_reduce x1 after_attention",
                                       "moe.dispatch all_to_all x1 expert_dispatch",
                                       "moe.dispatch_gather all_gather x1 expert_dispatch",
                                       "moe.combine_scatter reduce_scatter x1 expert_combine",
                                       "moe.combine all_to_all x1 expert_combine",
                                       "mlp.tp_output all_reduce x1 after_mlp"});
  CHECK(OpNamed(moe, "moe.dispatch").comm.dim == MeshDim::kEp);
  CHECK(OpNamed(moe, "moe.combine_scatter").output_saved_by_op);

  // The step's block replays, under the op policy, the collectives whose outputs its save
  // list does not hold: sequence parallel's all-gathers, not its reduce-scatters.
  plan.recompute = Recompute::kOp;
  const StepWork w = BuildStepWork(Llama(), Training(), plan);
  int all_gathers = 0, others = 0;
  for (const Collective& c : w.block.collectives)
    if (c.phase == StepPhase::kRecompute) (c.kind == CollectiveKind::kAllGather ? all_gathers : others) += c.count;
  CHECK(all_gathers == 2);
  CHECK(others == 0);
}

TEST_CASE("block ops: the framework's kernels, not the block kind, lower the ops",
          "[planner][block_ops]") {
  ModelSpec gpt = Llama();
  gpt.block = BlockKind::kGpt;
  gpt.kv_heads = gpt.heads;
  using V = std::vector<std::string>;
  // Megatron-LM 2021: the QKV bias as its own add, the unfused core's scale and transpose.
  CHECK(Names(Build(gpt, ParallelPlan{}, AttentionImpl::kNaive, KernelSet::kMegatron2021)) ==
        V{"attention_norm", "wqkv", "qkv.bias", "qkv.split", "attention", "attention.scale",
          "attention.context", "wo", "attention.residual", "ffn_norm", "fc1", "bias_gelu", "fc2",
          "mlp.residual"});
  // Transformer Engine: the bias in the GEMM's epilogue, a fused attention kernel (cuDNN's,
  // which reads q, k, v where the split left them).
  CHECK(Names(Build(gpt, ParallelPlan{}, AttentionImpl::kFused, KernelSet::kFused)) ==
        V{"attention_norm", "wqkv", "attention", "wo", "attention.residual", "ffn_norm", "fc1",
          "bias_gelu", "fc2", "mlp.residual"});
  // A llama block under fused kernels: no head transposes around the fused attention, one
  // RoPE kernel per tensor and one SwiGLU kernel each way (TE's copies: the test below).
  const BlockOps fused = Build(Llama(), ParallelPlan{}, AttentionImpl::kFused, KernelSet::kFused);
  CHECK(Names(fused) == V{"attention_norm", "wq", "wk", "wv", "rope", "attention.q_reshape",
                          "attention.v_contiguous", "qkv.split", "attention", "wo",
                          "attention.residual", "ffn_norm", "w_gate", "w_up", "swiglu",
                          "w_down", "mlp.residual"});
  const BlockOp& rope = OpNamed(fused, "rope");
  CHECK(rope.forward.kernels == 2);
  CHECK(rope.backward.kernels == 2);
  const BlockOp& swiglu = OpNamed(fused, "swiglu");
  CHECK(swiglu.forward.kernels == 1);
  CHECK(swiglu.backward.kernels == 1);
  // What is saved is the architecture's and the attention kernel's, not the kernel set's.
  CHECK(fused.saved().TotalBytes() ==
        Build(Llama(), ParallelPlan{}, AttentionImpl::kFused).saved().TotalBytes());
}

// The copies Transformer Engine 1.8's DotProductAttention makes under Megatron-Core
// (BlockOpsBuilder::TeAttentionLayout): per backend, block kind, micro-batch and grouping.
TEST_CASE("block ops: Megatron-Core's q, k, v layouts for Transformer Engine's attention",
          "[planner][block_ops]") {
  auto build = [](const ModelSpec& m, AttentionKernel kernel, int64_t mbs) {
    TrainingSpec training = Training();
    training.framework.kernels = KernelSet::kFused;
    ParallelPlan plan;
    plan.micro_batch = mbs;
    const RankShape shape = MakeRankShape(m, training, plan);
    Lowering lowering = LoweringOf(shape, AttentionImpl::kFused);
    lowering.flash = kernel;
    return BuildBlockOps(m, shape, lowering);
  };
  auto has = [](const BlockOps& ops, const std::string& name) {
    const std::vector<std::string> names = Names(ops);
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const double a = 2, s = Training().seq_len;  // bf16, one sequence per micro-batch row
  ModelSpec gpt = Llama();
  gpt.block = BlockKind::kGpt;
  gpt.kv_heads = gpt.heads;
  const double E = static_cast<double>(gpt.hidden);
  // gpt, cuDNN: q, k, v read in place, gradients written packed: no copy, no cat.
  const BlockOps gpt_cudnn = build(gpt, AttentionKernel::kCudnn, 2);
  CHECK_FALSE(has(gpt_cudnn, "qkv.split"));
  CHECK_FALSE(has(gpt_cudnn, "attention.fa_prepare"));
  CHECK_FALSE(has(gpt_cudnn, "attention.to_sbhd"));
  // gpt, flash-attn: q, k, v to [b, s, h, d] and their gradients back, each (T, 3E) read and
  // written once; with two sequences the output and its gradient are copied too.
  const BlockOps gpt_flash = build(gpt, AttentionKernel::kFlash2, 2);
  const BlockOp& prepare = OpNamed(gpt_flash, "attention.fa_prepare");
  CHECK(prepare.forward.bytes == Approx(2 * a * (2 * s) * 3 * E));
  CHECK(prepare.backward.bytes == prepare.forward.bytes);
  const BlockOp& output = OpNamed(gpt_flash, "attention.to_sbhd");
  CHECK(output.forward.bytes == Approx(2 * a * (2 * s) * E));
  CHECK(output.backward.bytes == output.forward.bytes);
  CHECK_FALSE(has(build(gpt, AttentionKernel::kFlash2, 1), "attention.to_sbhd"));
  // llama (8 heads in 2 groups of 128): q reshaped (a copy), v made contiguous, the split's
  // gradients cat, under either backend; flash with two sequences transposes all three.
  const ModelSpec llama = Llama();
  const double q = 8 * 128, kv = 2 * 128;
  const BlockOps llama_cudnn = build(llama, AttentionKernel::kCudnn, 1);
  CHECK(OpNamed(llama_cudnn, "attention.q_reshape").forward.bytes == Approx(2 * a * s * q));
  CHECK(OpNamed(llama_cudnn, "attention.v_contiguous").forward.bytes == Approx(2 * a * s * kv));
  CHECK(OpNamed(llama_cudnn, "attention.v_contiguous").backward.bytes == 0);
  CHECK(OpNamed(llama_cudnn, "qkv.split").backward.bytes == Approx(2 * a * s * (q + 2 * kv)));
  CHECK_FALSE(has(llama_cudnn, "attention.to_bshd"));
  CHECK_FALSE(has(build(llama, AttentionKernel::kFlash2, 1), "attention.to_bshd"));
  const BlockOps llama_flash = build(llama, AttentionKernel::kFlash2, 2);
  CHECK(OpNamed(llama_flash, "attention.to_bshd").forward.bytes ==
        Approx(2 * a * (2 * s) * (q + 2 * kv)));
  CHECK(OpNamed(llama_flash, "attention.to_bshd").forward.kernels == 3);
  CHECK(has(llama_flash, "attention.to_sbhd"));
  // One group per rank (or none grouped): query.reshape is a view.
  ModelSpec mha = llama;
  mha.kv_heads = mha.heads;
  CHECK_FALSE(has(build(mha, AttentionKernel::kCudnn, 1), "attention.q_reshape"));
  ModelSpec mqa = llama;
  mqa.kv_heads = 1;
  CHECK_FALSE(has(build(mqa, AttentionKernel::kCudnn, 1), "attention.q_reshape"));
  // Other kernel sets make none of these copies.
  CHECK_FALSE(has(Build(llama, ParallelPlan{}, AttentionImpl::kFused), "attention.v_contiguous"));
}

TEST_CASE("block ops: Megatron-Core's ring copies only with cp > 1", "[planner][block_ops]") {
  auto ring_bytes = [](int64_t cp, KernelSet kernels) {
    ParallelPlan plan;
    plan.cp = cp;
    const BlockOps ops = Build(Llama(), plan, AttentionImpl::kFused, kernels);
    for (const BlockOp& op : ops)
      if (std::string(op.name) == "attention.cp_ring_copies") return op.forward.bytes;
    return -1.0;
  };
  CHECK(ring_bytes(1, KernelSet::kFused) < 0);
  CHECK(ring_bytes(2, KernelSet::kEager) < 0);  // the executor's own ring: executor/parallel
  // This rank's 256 tokens of q (8 heads of 128) and of k and v (2 heads each), cuDNN's.
  CHECK(ring_bytes(2, KernelSet::kFused) ==
        Approx(TeRingAttentionCopies(2, 256.0 * 1024, 256.0 * 512, 2, true).forward.bytes));
}

TEST_CASE("block ops: the lowering is an input of its own", "[planner][block_ops]") {
  const ModelSpec m = Llama();
  const RankShape shape = MakeRankShape(m, Training(), ParallelPlan{});
  const BlockOps executor =
      BuildBlockOps(m, shape, {KernelSet::kEager, AttentionImpl::kFused});
  const BlockOps megatron =
      BuildBlockOps(m, shape, {KernelSet::kMegatron2021, AttentionImpl::kFused});
  // The same architecture (its linears and what they save), other kernels: Megatron's fused
  // norm is one launch forward, the executor's RMSNorm seven plus the rstd cast.
  REQUIRE(executor.linears().size() == megatron.linears().size());
  CHECK(executor.begin()->forward.kernels == 8);
  CHECK(megatron.begin()->forward.kernels == 1);
  CHECK(executor.begin()->backward.bytes == 2 * executor.begin()->forward.bytes);
  CHECK(megatron.begin()->backward.bytes == 2.5 * megatron.begin()->forward.bytes);
  CHECK(executor.saved().TotalBytes() == megatron.saved().TotalBytes());
}

TEST_CASE("block ops: every saved tensor belongs to one op, in op order", "[planner][block_ops]") {
  ModelSpec m = Llama();
  m.qk_norm = true;
  for (const AttentionImpl impl : {AttentionImpl::kNaive, AttentionImpl::kFused}) {
    const BlockOps ops = Build(m, ParallelPlan{}, impl);
    int next = 0;
    for (const BlockOp& op : ops) {
      CHECK(op.saved_begin == next);
      CHECK(op.saved_end >= op.saved_begin);
      next = op.saved_end;
      for (int i = op.saved_begin; i < op.saved_end; ++i) {
        const SavedTensor& t = *(ops.saved().begin() + i);
        if (t.core_attention) CHECK(op.kind == OpKind::kAttentionCore);
        CHECK(t.mlp_half == !op.attention_half);
      }
    }
    CHECK(next == static_cast<int>(ops.saved().size()));
  }
}

TEST_CASE("block ops: each half's backward temporaries, by attention kernel and FFN",
          "[planner][block_ops]") {
  // B = 1 (global batch 8 over dp 8), S = 512, bf16: the llama block of Llama(), E = 1024,
  // 8 heads of 128 (2 KV heads), F = 2816. Both halves hold the residual stream's and the
  // branch output's gradients, (S, E) each.
  const ModelSpec m = Llama();
  ParallelPlan plan;
  plan.dp = 8;
  const double A = 2, S = 512, E = 1024, F = 2816, H = 8, K = 2, D = 128;
  const double grads = 2 * S * E * A;
  auto names = [](const SavedTensorList& list) {
    std::vector<std::string> out;
    for (const SavedTensor& t : list) out.push_back(t.tensor);
    return out;
  };
  const BlockOps fused = Build(m, plan, AttentionImpl::kFused);
  // Flash: dq, dk, dv and the fp32 dq accumulator.
  CHECK(fused.backward_workspace(BlockHalf::kAttention).TotalBytes() ==
        Approx(S * H * D * A + 2 * S * K * D * A + S * H * D * 4 + grads));
  // SwiGLU FFN: d(down input), d gate, d up, (S, F) each.
  CHECK(fused.backward_workspace(BlockHalf::kMlp).TotalBytes() == Approx(3 * S * F * A + grads));
  CHECK(names(fused.backward_workspace(BlockHalf::kMlp)).back() ==
        "grad of the branch output (B,Sc,E)");
  // Naive: dv, then dP and dScores, (H, S, S) each.
  const BlockOps naive = Build(m, plan, AttentionImpl::kNaive);
  CHECK(naive.backward_workspace(BlockHalf::kAttention).TotalBytes() ==
        Approx(S * K * D * A + 2 * H * S * S * A + grads));
  // MoE: the routed experts' d gate, d up and the larger of d(down input) and d(permuted
  // tokens) over their R rows (here every token to its top 2: R = 2 S).
  ModelSpec moe = Llama();
  moe.moe = {/*experts=*/8, /*top_k=*/2, /*shared_experts=*/0, /*expert_ffn_hidden=*/512};
  const double R = 2 * S, Fe = 512;
  CHECK(Build(moe, plan, AttentionImpl::kFused).backward_workspace(BlockHalf::kMlp).TotalBytes() ==
        Approx(2 * R * Fe * A + R * std::max(Fe, E) * A + grads));
}

TEST_CASE("block ops: the linears' GEMMs are the FLOP count's matrices", "[planner][block_ops]") {
  ModelSpec m = Llama();
  ParallelPlan plan;
  plan.tp = 2;
  plan.dp = 1;
  const RankShape shape = MakeRankShape(m, Training(), plan);
  const BlockOps ops = BuildBlockOps(m, shape, LoweringOf(shape, AttentionImpl::kFused));
  double flops = 0;
  for (const BlockOp& op : ops)
    if (op.kind == OpKind::kLinear) flops += op.gemm.flops();
  // Every dense llama matrix is split over tp: the tp ranks together run 2 * T * W.
  CHECK(flops * 2 == 2 * shape.T * static_cast<double>(BlockMatmulParams(m)));
}

// tp = 2 with sequence parallel: the norm sees T/tp tokens, the lm_head V/tp columns.
ParallelPlan Plan() {
  ParallelPlan plan;
  plan.tp = 2;
  plan.sequence_parallel = true;
  return plan;
}

// The list's memory-bound passes summed, as the part's work must hold them.
struct Sums {
  OpPass forward, backward, backward_weight;
  double gemm_flops = 0;
  int64_t gemms = 0;
};
Sums SumOf(const BlockOps& ops) {
  Sums s;
  for (const BlockOp& op : ops) {
    s.forward += op.forward;
    s.backward += op.backward;
    s.backward_weight += op.backward_weight;
    if (op.kind == OpKind::kLinear) {
      s.gemm_flops += op.gemm.flops();
      ++s.gemms;
    }
  }
  return s;
}

TEST_CASE("block ops: the head's ops are the work of the step's head", "[planner][block_ops]") {
  const ModelSpec m = Llama();
  const ParallelPlan plan = Plan();
  const Precision precision = GENERATE(Precision::kBf16, Precision::kFp32);
  TrainingSpec training = Training();
  training.precision = precision;
  const RankShape shape = MakeRankShape(m, training, plan);
  const BlockOps ops = BuildHeadOps(m, shape, LoweringOf(shape, AttentionImpl::kFused));
  using V = std::vector<std::string>;
  // tp 2 with sequence parallel: the lm_head's input all-gathered (and re-gathered in the
  // backward), the vocabulary-parallel loss's three per-token all-reduces.
  REQUIRE(Names(ops) == V{"final_norm", "lm_head.sp_gather", "lm_head.sp_regather", "lm_head",
                          "cross_entropy", "cross_entropy.tp_reductions"});

  // T = 8 * 512 tokens (dp 1, micro-batch 1: 512), Tn = T/2, V/tp = 16000.
  const double a = precision == Precision::kFp32 ? 4 : 2, T = 512, Tn = T / 2, E = 1024;
  const double Vt = 16000;
  const BlockOp& lm_head = OpNamed(ops, "lm_head");
  CHECK(lm_head.gemm.m == T);
  CHECK(lm_head.gemm.n == Vt);
  CHECK(lm_head.gemm.k == E);
  CHECK_FALSE(lm_head.gemm.fp8);
  CHECK(lm_head.gemm.flops() == 2 * T * E * Vt);
  // The loss: (a + 36) bytes per logit forward and (12 + a) backward with a 16-bit cast,
  // 32 and 8 on fp32 logits; 6 and 2 launches (5 and 1 without the cast).
  const BlockOp& loss = OpNamed(ops, "cross_entropy");
  CHECK(loss.forward.bytes == T * Vt * (a == 4 ? 32 : a + 36));
  CHECK(loss.backward.bytes == T * Vt * (a == 4 ? 8 : 12 + a));
  CHECK(loss.forward.kernels == (a == 4 ? 5 : 6));
  CHECK(loss.backward.kernels == (a == 4 ? 1 : 2));
  // PyTorch's F.cross_entropy (the framework's `loss`): log_softmax (three reads of a row and
  // a write) and nll_loss forward; the zero-filled gradient, its scatter and
  // log_softmax_backward (three reads, one write) backward. On logits cast to fp32, the cast
  // and its gradient come on top.
  RankShape pytorch = shape;
  pytorch.loss = LossKernel::kCrossEntropy;
  const BlockOps pytorch_ops = BuildHeadOps(m, pytorch, LoweringOf(pytorch, AttentionImpl::kFused));
  const BlockOp& ce = OpNamed(pytorch_ops, "cross_entropy");
  CHECK(ce.forward.bytes == T * Vt * 4 * a);
  CHECK(ce.backward.bytes == T * Vt * 5 * a);
  CHECK(ce.forward.kernels == 2);
  CHECK(ce.backward.kernels == 3);
  pytorch.loss = LossKernel::kCrossEntropyFp32;
  const BlockOps fp32_ops = BuildHeadOps(m, pytorch, LoweringOf(pytorch, AttentionImpl::kFused));
  const BlockOp& ce32 = OpNamed(fp32_ops, "cross_entropy");
  CHECK(ce32.forward.bytes == T * Vt * (a == 4 ? 16 : 16 + a + 4));
  CHECK(ce32.backward.bytes == T * Vt * (a == 4 ? 20 : 20 + 4 + a));
  CHECK(ce32.forward.kernels == (a == 4 ? 2 : 3));
  CHECK(ce32.backward.kernels == (a == 4 ? 3 : 4));
  // Megatron-Core's fused loss (fp32-fused): the cast with the max (a + 4; 4 on fp32 logits),
  // the subtraction, exp and sum (8), the division (8) in three kernels; the gradient and its
  // bf16 cast (4 + 2) in one. The same fp32 softmax kept as fp32-in-place's.
  RankShape fused = shape;
  fused.loss = LossKernel::kFp32Fused;
  const BlockOps fused_ops = BuildHeadOps(m, fused, LoweringOf(fused, AttentionImpl::kFused));
  const BlockOp& fce = OpNamed(fused_ops, "cross_entropy");
  CHECK(fce.forward.bytes == T * Vt * (a == 4 ? 20 : a + 20));
  CHECK(fce.backward.bytes == T * Vt * 6);
  CHECK(fce.forward.kernels == 3);
  CHECK(fce.backward.kernels == 1);
  CHECK(LossSavedTensors(fused).TotalBytes() == LossSavedTensors(shape).TotalBytes());
  // The final norm: read + write (Tn, E), backward twice that.
  CHECK(ops.begin()->forward.bytes == 2 * Tn * E * a);
  CHECK(ops.begin()->backward.bytes == 4 * Tn * E * a);

  const StepWork w = BuildStepWork(m, training, plan);
  const Sums sum = SumOf(ops);
  for (const ComputeWork* pass : {&w.head.forward, &w.head.backward_input, &w.head.backward_weight})
    CHECK(pass->matmul_flops == 2 * T * E * Vt);
  CHECK(w.head.forward.memory_bytes == sum.forward.bytes);
  CHECK(w.head.backward_input.memory_bytes == sum.backward.bytes);
  CHECK(w.head.backward_weight.memory_bytes == 0);
  CHECK(w.head.forward.kernels == sum.gemms + sum.forward.kernels);
  CHECK(w.head.backward_input.kernels == sum.gemms + sum.backward.kernels);
  CHECK(w.head.backward_weight.kernels == 1);
  CHECK(w.head.attention_forward.kernels == 0);
}

TEST_CASE("block ops: the embedding's ops are the work of the step's embedding",
          "[planner][block_ops]") {
  ModelSpec m = Llama();
  const ParallelPlan plan = Plan();
  const TrainingSpec training = Training();
  const RankShape shape = MakeRankShape(m, training, plan);
  const double a = 2, T = 512, E = 1024;
  using V = std::vector<std::string>;

  const BlockOps llama = BuildEmbeddingOps(m, shape);
  // tp 2 with sequence parallel: the vocabulary-parallel lookup's output reduce-scattered.
  REQUIRE(Names(llama) == V{"embedding", "embedding.tp_output"});
  // The lookup reads the rows and writes (T, E); the weight gradient scatter-adds (T, E).
  CHECK(llama.begin()->forward.bytes == 2 * T * E * a);
  CHECK(llama.begin()->backward.bytes == 0);
  CHECK(llama.begin()->backward_weight.bytes == 3 * T * E * a);
  const StepWork w = BuildStepWork(m, training, plan);
  CHECK(w.embedding.forward.memory_bytes == 2 * T * E * a);
  CHECK(w.embedding.forward.kernels == 1);
  CHECK(w.embedding.backward_input.kernels == 0);
  CHECK(w.embedding.backward_weight.memory_bytes == 3 * T * E * a);
  CHECK(w.embedding.backward_weight.kernels == 1);
  CHECK(w.embedding.forward.matmul_flops == 0);

  // gpt adds the learned positions (read 2, write 1) and dropout (read, write, 1-byte mask).
  m.block = BlockKind::kGpt;
  m.kv_heads = m.heads;
  const BlockOps gpt = BuildEmbeddingOps(m, MakeRankShape(m, training, plan));
  REQUIRE(Names(gpt) ==
          V{"embedding", "embedding.tp_output", "embedding.positions", "embedding.dropout"});
  const StepWork wg = BuildStepWork(m, training, plan);
  CHECK(wg.embedding.forward.memory_bytes == 2 * T * E * a + 3 * T * E * a + (2 * a + 1) * T * E);
  CHECK(wg.embedding.forward.memory_bytes == SumOf(gpt).forward.bytes);
  CHECK(wg.embedding.forward.kernels == 3);
}

// torchtitan's Llama code of 2024 (configs/frameworks/torchtitan.yaml, kernels: torchtitan-2024):
// each op's bytes per element as block_ops*.cc derive them from torchtitan's source, and what
// autograd keeps.
TEST_CASE("block ops: torchtitan's 2024 Llama code, op by op, and what autograd keeps",
          "[planner][block_ops]") {
  const ModelSpec m = Llama();  // E 1024, 8 heads, 2 k/v heads (GQA), F 2816
  const BlockOps ops = Build(m, ParallelPlan{}, AttentionImpl::kFused, KernelSet::kTorchtitan2024);
  using V = std::vector<std::string>;
  CHECK(Names(ops) == V{"attention_norm", "wq", "wk", "wv", "wq/wk/wv.input_grad_sum", "rope",
                        "repeat_kv", "attention", "wo", "attention.residual", "ffn_norm", "w_gate",
                        "w_up", "w1/w3.input_grad_sum", "swiglu", "w_down", "mlp.residual"});
  const double T = 512, E = 1024, QD = 1024, KD = 256, F = 2816, A = 2;  // bf16, B 1, S 512
  // RMSNorm in fp32 eager ops: 4A + 28 bytes forward in 8 launches, 8A + 60 back in 11.
  const BlockOp& norm = OpNamed(ops, "attention_norm");
  CHECK(norm.forward.bytes == (4 * A + 28) * T * E);
  CHECK(norm.forward.kernels == 8);
  CHECK(norm.backward.bytes == (8 * A + 60) * T * E);
  CHECK(norm.backward.kernels == 11);
  // Complex fp32 RoPE on q and k, 3 launches per tensor; repeat_kv copies k and v to 8 heads.
  const BlockOp& rope = OpNamed(ops, "rope");
  CHECK(rope.forward.bytes == (2 * A + 16) * T * (QD + KD));
  CHECK(rope.forward.kernels == 6);
  CHECK(OpNamed(ops, "repeat_kv").forward.bytes == 2 * A * T * (KD + QD));
  // Backward, autograd sums the input gradients of the linears sharing an input: two adds
  // for wq, wk, wv and one for w1, w3, each reading two (T, E) tensors and writing one.
  const BlockOp& qkv_sum = OpNamed(ops, "wq/wk/wv.input_grad_sum");
  CHECK(qkv_sum.forward.bytes == 0);
  CHECK(qkv_sum.backward.bytes == 2 * 3 * A * T * E);
  CHECK(qkv_sum.backward.kernels == 2);
  CHECK(OpNamed(ops, "w1/w3.input_grad_sum").backward.bytes == 3 * A * T * E);
  const BlockOps executor_ops = Build(m, ParallelPlan{}, AttentionImpl::kFused);
  const V executor_names = Names(executor_ops);  // the executor accumulates in the GEMM
  CHECK(std::find(executor_names.begin(), executor_names.end(), "wq/wk/wv.input_grad_sum") ==
        executor_names.end());
  const BlockOp& swiglu = OpNamed(ops, "swiglu");
  CHECK(swiglu.forward.bytes == 5 * A * T * F);
  CHECK(swiglu.backward.bytes == 9 * A * T * F);
  // Without GQA nothing is repeated.
  ModelSpec mha = m;
  mha.kv_heads = mha.heads;
  const V mha_names = Names(Build(mha, ParallelPlan{}, AttentionImpl::kFused, KernelSet::kTorchtitan2024));
  CHECK(std::find(mha_names.begin(), mha_names.end(), "repeat_kv") == mha_names.end());

  // Autograd keeps the norm's fp32 input and its cast-back output, not the block's input:
  // only a checkpoint holds that (full: it alone).
  const BlockTensorBytes full = BlockTensorTotals(ops, Recompute::kFull);
  CHECK(full.saved == T * E * A);
  double checkpoint_only = 0, k_repeated = 0;
  for (const SavedTensor& t : ops.saved()) {
    if (t.checkpoint_only) {
      checkpoint_only += t.bytes();
      CHECK(FateUnder(t, Recompute::kNone) == TensorFate::kNotSaved);
      CHECK(FateUnder(t, Recompute::kOp) == TensorFate::kKept);
    }
    if (std::string(t.tensor).rfind("k repeated", 0) == 0) k_repeated += t.bytes();
  }
  CHECK(checkpoint_only == T * E * A);
  CHECK(BlockTensorTotals(ops, Recompute::kNone).saved ==
        ops.saved().TotalBytes() - checkpoint_only);
  CHECK(k_repeated == T * QD * A);  // SDPA keeps k with every q head
  // One more FFN tensor than the executor's SwiGLU keeps: silu's output.
  const BlockOps executor = Build(m, ParallelPlan{}, AttentionImpl::kFused);
  CHECK(BlockTensorTotals(ops, Recompute::kNone).saved_mlp -
            BlockTensorTotals(executor, Recompute::kNone).saved_mlp ==
        T * F * A + 4 * T * E);  // silu's output; the ffn norm's fp32 x and normed x
                                 // (4 + 2 bytes per element) instead of x (2)

  // A run with torchtitan's fused_rmsnorm (norm: fused): one kernel each way.
  TrainingSpec training = Training();
  training.framework.kernels = KernelSet::kTorchtitan2024;
  training.framework.fused_norm = true;
  const RankShape shape = MakeRankShape(m, training, ParallelPlan{});
  const BlockOps fused_norm = BuildBlockOps(m, shape, LoweringOf(shape, AttentionImpl::kFused));
  CHECK(fused_norm.begin()->forward.kernels == 1);
  CHECK(fused_norm.begin()->forward.bytes == 2 * T * E * A);
}

}  // namespace
}  // namespace meshplan
