#include "planner/cost/block_work.h"

#include "planner/cost/block_ops.h"
#include "planner/cost/flops.h"
#include "planner/cost/fp8_convention.h"

namespace meshplan {

namespace {

// A linear layer's GEMM in each pass, from its forward (rows, in) x (in, out) = `g`
// (m = rows, n = out, k = in): backward input (rows, out) x (out, in), backward weight
// (in, rows) x (rows, out). FP8: the backward GEMMs accumulate split (fp8_convention.h).
// A column-parallel linear's backward GEMMs count in column_matmul_flops too.
void AddLinearGemms(const GemmOp& g, bool column, PartWork* part) {
  const double flops = g.flops();  // the same in each pass
  part->forward.AddGemm(g, flops);
  part->backward_input.AddGemm({g.m, g.k, g.n, g.batch, false, g.fp8, /*split_accumulate=*/g.fp8},
                               flops);
  part->backward_weight.AddGemm({g.k, g.n, g.m, g.batch, false, g.fp8, /*split_accumulate=*/g.fp8},
                                flops);
  if (!column) return;
  part->backward_input.column_matmul_flops += flops;
  part->backward_weight.column_matmul_flops += flops;
}

// FP8 casts (fp8_convention.h) of one linear over `rows` tokens: forward, its input (rows, in)
// to FP8 rowwise + columnwise unless it reads the previous linear's input; backward, its
// output gradient (rows, out) likewise. One kernel each.
void AddFp8Cast(double rows, double in, double out, bool shares_input, PartWork* part) {
  if (!shares_input) {
    part->forward.memory_bytes += kFp8CastBytesPerElement * rows * in;
    part->forward.kernels += 1;
  }
  part->backward_input.memory_bytes += kFp8CastBytesPerElement * rows * out;
  part->backward_input.kernels += 1;
}

// The attention core of one block in each pass, as the lowering's attention kernel runs it.
// fused: one flash kernel per CP ring step (forward and backward); naive: QK^T and P@V
// as batched GEMMs and the (B, H/tp, S/cp, S) scores' softmax (and gpt's dropout) as
// memory traffic.
void AddAttentionCore(const StepShape& s, const AttentionCoreShape& c, PartWork* part) {
  const double bh = c.batch_heads, q = c.q, kv = c.kv;
  // q/k heads are D wide, v heads Dv (MLA): a flash kernel of the mean width runs the same
  // 2*(D + Dv) FLOPs per query-key pair.
  const double Dqk = c.qk_dim, Dv = c.v_dim;
  const double d = (Dqk + Dv) / 2;
  const double nominal_fwd = s.T * AttentionCoreForwardFlopsPerToken(s.model, s.seq) / s.tp;  // 4*T*E*S/tp (D = E/H)
  const int64_t ring_steps = s.plan.cp;
  ComputeWork core;
  core.attention_flops = nominal_fwd;
  ComputeWork core_bwd;
  core_bwd.attention_flops = 2 * nominal_fwd;
  if (s.lowering.attention == AttentionImpl::kFused) {
    const AttentionKernel kernel = s.lowering.flash;
    core.flash.push_back({bh, q, kv, d, c.causal, /*backward=*/false, kernel});
    core_bwd.flash.push_back({bh, q, kv, d, c.causal, /*backward=*/true, kernel});
    core.kernels = core_bwd.kernels = ring_steps;
  } else {
    const double scores = bh * q * kv;  // elements of the score matrix
    const bool fused_softmax = s.lowering.kernels == KernelSet::kMegatron2021;
    const bool dropout = c.dropout;
    // The softmax reads the whole row, except Megatron-LM's fused causal kernel for 16-bit
    // scores (no CP: scaled_upper_triang_masked_softmax.h), which loads only the scores on
    // or below the diagonal, (S + 1) / 2S of a row on average, and writes the whole row
    // (zeros above it); its backward loads the gradient and the probabilities there
    // likewise and writes the whole input gradient.
    const double read = fused_softmax && s.a == 2 && s.plan.cp == 1 ? (kv + 1) / (2 * kv) : 1.0;
    core.AddGemm({q, kv, Dqk, bh, /*attention_core=*/true});  // S = Q K^T
    core.AddGemm({q, Dv, kv, bh, true});                       // O = P V
    core.memory_bytes = scores * ((read + 1) * s.a + (dropout ? 2 * s.a + 1 : 0));  // softmax, dropout
    // Launches: Megatron-LM's fused softmax (+ dropout); the executor's llama core runs the
    // scale, the mask, max, sub_, exp_, sum and div_ forward, five ops backward
    // (executor/model/attention_ops.cc).
    const int64_t drop = dropout ? 1 : 0;
    core.kernels = 2 + (fused_softmax ? 1 : 7) + drop;
    core_bwd.AddGemm({q, kv, Dv, bh, true});   // dP = dO V^T
    core_bwd.AddGemm({kv, Dv, q, bh, true});   // dV = P^T dO
    core_bwd.AddGemm({q, Dqk, kv, bh, true});  // dQ = dS K
    core_bwd.AddGemm({kv, Dqk, q, bh, true});  // dK = dS^T Q
    core_bwd.memory_bytes = scores * ((2 * read + 1) * s.a + (dropout ? 2 * s.a + 1 : 0));
    core_bwd.kernels = 4 + (fused_softmax ? 1 : 5) + drop;
  }
  part->forward += core;
  part->backward_input += core_bwd;
  part->attention_forward = core;
  part->attention_backward = core_bwd;
}

}  // namespace

// A part's forward, backward-input and backward-weight work: its ops' GEMMs (in FP8 with
// their casts in fp8 runs), then the memory-bound ops' bytes and launches summed in op order,
// then the attention core, if the list has one. The op policy replays the forward but for the
// ops whose outputs it saves (BlockOp::output_saved_by_op): the other GEMMs (with their
// forward FP8 casts), every memory-bound op, and the attention core unless its kernel is
// saved.
void AddOpListWork(const StepShape& s, const BlockOps& ops, PartWork* part,
                   ComputeWork* op_replay) {
  OpPass fwd, bwd, bwd_weight, in_call;
  const BlockOp* core = nullptr;
  for (const BlockOp& op : ops) {
    switch (op.kind) {
      case OpKind::kLinear: {
        const bool cast_input = op.gemm.fp8 && !ops.linears()[op.linear].shares_input;
        // The lm_head (no BlockLinear) is vocabulary-parallel: split by column.
        AddLinearGemms(op.gemm, op.linear < 0 || ops.linears()[op.linear].split == TpSplit::kColumn,
                       part);
        if (op.gemm.fp8)
          AddFp8Cast(op.gemm.m * op.gemm.batch, op.gemm.k, op.gemm.n, !cast_input, part);
        if (op_replay == nullptr || op.output_saved_by_op) break;
        op_replay->AddGemm(op.gemm);
        op_replay->kernels += 1;
        if (cast_input) {
          op_replay->memory_bytes +=
              kFp8CastBytesPerElement * op.gemm.m * op.gemm.batch * op.gemm.k;
          op_replay->kernels += 1;
        }
        break;
      }
      case OpKind::kMemoryBound:
        if (op.in_attention_call) in_call += op.forward;
        fwd += op.forward;
        bwd += op.backward;
        bwd_weight += op.backward_weight;
        break;
      case OpKind::kAttentionCore:
        core = &op;  // after the memory-bound ops (below)
        break;
      case OpKind::kCollective:  // communication: part_collectives.h
        break;
    }
  }
  const int64_t matmuls = part->forward.gemms.size;  // before the attention core's
  part->forward.memory_bytes += fwd.bytes;
  part->forward.kernels += matmuls + fwd.kernels;
  part->backward_input.memory_bytes += bwd.bytes;
  part->backward_input.kernels += matmuls + bwd.kernels;
  part->backward_weight.memory_bytes += bwd_weight.bytes;
  part->backward_weight.kernels += matmuls + bwd_weight.kernels;
  if (op_replay != nullptr) {
    op_replay->memory_bytes += fwd.bytes;
    op_replay->kernels += fwd.kernels;
  }
  if (core == nullptr) return;
  AddAttentionCore(s, ops.core(), part);
  if (op_replay != nullptr && !core->output_saved_by_op) *op_replay += part->attention_forward;
  part->attention_forward.memory_bytes += in_call.bytes;  // TE's copies inside the call
  part->attention_forward.kernels += in_call.kernels;
}

void BlockCompute(const StepShape& s, const BlockOps& ops, PartWork* part) {
  ComputeWork op_replay;
  AddOpListWork(s, ops, part, &op_replay);
  part->recompute[static_cast<size_t>(Recompute::kNone)] = {};
  part->recompute[static_cast<size_t>(Recompute::kSelective)] = part->attention_forward;
  part->recompute[static_cast<size_t>(Recompute::kFull)] = part->forward;
  part->recompute[static_cast<size_t>(Recompute::kOp)] = op_replay;
}

}  // namespace meshplan
