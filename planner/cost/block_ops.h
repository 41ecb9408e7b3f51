// BlockOps: one transformer block as an ordered list of ops, forward order, on one rank;
// the embedding and the head (final norm, lm_head, loss) are op lists of the same type.
//
// The architecture (planner/model_spec.h: gpt or llama, MoE, MLA, q/k norm) decides which
// ops a block has; a Lowering decides which kernels run them (launches, bytes moved, the
// attention kernel). Every op carries what any consumer needs: its kind and shape (a linear's
// GEMM, the attention core, a memory-bound op's bytes, a tp / cp / ep collective's kind, bytes
// and place in each pass), its launches and bytes in each pass
// (backward mirrored: a linear's two GEMMs, a memory-bound op's backward pass), the tensors
// it saves for backward (with the recompute policies' flags), the temporaries its backward
// allocates, and a fusion group. The step's work (planner/cost/block_work.h, AddOpListWork:
// every part's; part_collectives.h, its collectives) and the activation memory
// (activation_memory.h, memory_detailed.cc) read it.
// The framework profile chooses the Lowering (docs/cost_model.md section 5). Fixed capacity, no allocation: the search builds one per candidate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "planner/attention_impl.h"
#include "planner/cost/block_linears.h"
#include "planner/cost/collective_position.h"
#include "planner/cost/collective_time.h"
#include "planner/cost/compute_work.h"
#include "planner/cost/rank_shape.h"
#include "planner/mesh_dim.h"
#include "planner/model_spec.h"

namespace meshplan {

// Which kernels run a block's ops: the framework's kernel set (planner/framework_spec.h), the
// resolved attention (fused or naive) and, fused, its kernel.
struct Lowering {
  KernelSet kernels = KernelSet::kEager;
  AttentionImpl attention = AttentionImpl::kFused;  // resolved: fused or naive
  bool fused_norm = false;  // an eager set's RMSNorm as one kernel each way
  AttentionKernel flash = AttentionKernel::kFlash2;  // the kernel of a fused core
};
// The lowering of a rank: its framework's kernels (RankShape::kernels) and `resolved_attention`.
Lowering LoweringOf(const RankShape& shape, AttentionImpl resolved_attention);

enum class OpKind : uint8_t {
  kLinear,         // a weight GEMM (and its FP8 casts in fp8 runs)
  kAttentionCore,  // softmax(Q K^T) V: the lowering's attention kernel
  kMemoryBound,    // elementwise or reduction: bytes read + written
  kCollective,     // a tensor-, context- or expert-parallel collective (BlockOp::comm)
};

enum class FusionGroup : uint8_t {
  kNone, kNorm, kRope, kActivation, kBiasDropoutAdd, kSoftmax, kResidual, kBias, kLayout,
  kRouting, kCrossEntropy,
};

// One pass of a memory-bound op: bytes read + written and kernel launches.
struct OpPass {
  double bytes = 0;
  int64_t kernels = 0;
  OpPass& operator+=(const OpPass& other) {
    bytes += other.bytes;
    kernels += other.kernels;
    return *this;
  }
};

// What a collective op runs in one pass: `count` collectives of `kind` (0: none in this
// pass) at `at` in the pass's order (collective_position.h).
struct CollectivePass {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int8_t count = 0;
  CollectivePosition at = CollectivePosition::kAfterPart;
};
// A collective op: over mesh dimension `dim`, `bytes` each; the forward's (replayed by a
// recompute pass unless the op policy saves its output: BlockOp::output_saved_by_op) and the
// backward's.
struct OpCollective {
  double bytes = 0;
  MeshDim dim = MeshDim::kTp;
  CollectivePass forward, backward;
  // The backward's runs behind the backward GEMMs of the column-parallel linear that reads
  // this input (RankShape::tp_backward_async: the framework issues it asynchronously).
  bool backward_behind_gemms = false;
};

// One tensor an op keeps alive (saved for backward, or a temporary of a backward step).
struct SavedTensor {
  const char* op = "";      // e.g. "attention.softmax"
  const char* tensor = "";  // what it is, with its shape, e.g. "output P (B,Ht,Sc,Skv)"
  double elements = 0;
  double bytes_per_element = 0;
  bool layer_input = false;     // the block's input: the one tensor kept under full recompute
  bool core_attention = false;  // recomputed under selective recompute
  bool row_statistic = false;   // a per-row norm/softmax statistic (Megatron's formula omits it)
  bool mlp_half = false;        // saved by the FFN half of the block (ffn_norm onward): freed
                                // once the backward reaches the attention half
  bool op_output = false;       // the same tensor as an entry of BlockOps::op_outputs():
                                // under the op policy that entry holds it
  bool checkpoint_only = false;  // no op saves it: only a checkpoint of the block holds it
                                 // (full, op), so without recompute nothing keeps it
  double bytes() const { return elements * bytes_per_element; }
};
// What a block's recompute policy does with one of its saved() tensors between the block's
// forward and its backward. `recompute` is a block's policy (kNone .. kOp: BlockRecompute
// resolves every:N).
enum class TensorFate : uint8_t {
  kKept,        // held from the forward to the block's backward
  kRecomputed,  // freed after the forward, rebuilt (and alive) during the block's backward
  kInOpOutputs, // the op policy: one of its op_outputs(), counted there
  kNotSaved,    // a checkpoint_only tensor where the block is not checkpointed
};
TensorFate FateUnder(const SavedTensor& tensor, Recompute recompute);
// FateUnder(tensor, recompute) == kKept.
bool KeptUnder(const SavedTensor& tensor, Recompute recompute);

// A short fixed-capacity list (no allocation: the search evaluates millions of plans).
class SavedTensorList {
 public:
  static constexpr size_t kCapacity = 32;
  // Beyond capacity is a programming error (aborts: raise kCapacity).
  void Add(const SavedTensor& tensor) {
    CheckRoom();
    items_.push_back(tensor);
  }
  // A tensor built in its slot, no flag set; returns it (FixedList::emplace_back's reason).
  SavedTensor& Add(const char* op, const char* tensor, double elements, double bytes_per_element) {
    CheckRoom();
    SavedTensor& t = items_.emplace_back();
    t.op = op;
    t.tensor = tensor;
    t.elements = elements;
    t.bytes_per_element = bytes_per_element;
    return t;
  }
  const SavedTensor* begin() const { return items_.begin(); }
  const SavedTensor* end() const { return items_.end(); }
  size_t size() const { return static_cast<size_t>(items_.size); }
  double TotalBytes() const;
  // Without row statistics: what Megatron's closed form counts.
  double MegatronBytes() const;

 private:
  void CheckRoom() const {
    if (items_.size == static_cast<int>(kCapacity)) std::abort();
  }
  FixedList<SavedTensor, static_cast<int>(kCapacity)> items_;
};

// The attention core's shape: per rank, B*Ht heads of q queries against kv keys.
struct AttentionCoreShape {
  double batch_heads = 0, q = 0, kv = 0;
  double qk_dim = 0, v_dim = 0;  // D, Dv
  bool causal = true;
  bool dropout = false;          // attention dropout (gpt)
};

struct BlockOp {
  const char* name = "";
  OpKind kind = OpKind::kMemoryBound;
  FusionGroup group = FusionGroup::kNone;
  bool attention_half = true;  // before ffn_norm
  int8_t linear = -1;          // kLinear: its matrix, BlockOps::linears()[linear]; -1 for
                               // the head's lm_head (never FP8)
  // The op policy saves this op's output(s): kLinear, an odd-numbered matmul of the block;
  // kAttentionCore, a flash or ring kernel (its output and logsumexp). Else it replays.
  bool output_saved_by_op = false;
  uint8_t saved_begin = 0, saved_end = 0;  // its tensors: BlockOps::saved()[begin, end)
  // kMemoryBound: runs inside the attention core's own call (Transformer Engine's
  // DotProductAttention), so selective recompute replays its forward with the core's.
  bool in_attention_call = false;
  // kLinear: the forward GEMM on this rank, (rows, in) x (in, out) per copy; backward
  // mirrors it: input (rows, out) x (out, in), weight (in, rows) x (rows, out).
  GemmOp gemm;
  OpPass forward, backward;    // kMemoryBound, as lowered; backward: the input gradient's
  OpPass backward_weight;      // kMemoryBound: the weight gradient's pass (the embedding's)
  OpCollective comm;           // kCollective
};

// The two halves of a block: attention (its norm to its residual add) and the FFN.
enum class BlockHalf { kAttention, kMlp };

class BlockOps {
 public:
  static constexpr int kCapacity = 48;
  static constexpr int kMaxCollectiveOps = 16;
  using OpIndices = FixedList<uint8_t, kMaxCollectiveOps>;
  const BlockOp* begin() const { return ops_.begin(); }
  const BlockOp* end() const { return ops_.end(); }
  int size() const { return ops_.size; }
  const BlockOp& operator[](int i) const { return ops_[i]; }
  // The indices of its kCollective ops, in op order (what part_collectives.h walks, three
  // times per candidate, among ops that are mostly not collectives).
  const OpIndices& collective_ops() const { return collective_ops_; }
  // The block's matrices (BlockOp::linear indexes them) and its attention core's shape.
  const BlockLinears& linears() const { return linears_; }
  const AttentionCoreShape& core() const { return core_; }
  // Every tensor the block's ops save, in op order, with no recompute.
  const SavedTensorList& saved() const { return saved_; }
  // What torchtitan's op-level policy (Recompute::kOp) keeps besides the block's input: the
  // outputs of the ops on its save list, in op order (docs/memory_model.md "Recompute
  // policies"): the odd-numbered matmuls', the flash or ring attention kernel's (output and
  // logsumexp) and, with sequence parallel, the reduce-scatters'.
  const SavedTensorList& op_outputs() const { return op_outputs_; }
  // The temporaries of one step of the block's backward, one step per half: the half's
  // backward gradients (attention: the core's; FFN: its activation's and linears' inputs')
  // and the gradients of the residual stream and of the branch output (docs/memory_model.md
  // "Transients").
  const SavedTensorList& backward_workspace(BlockHalf half) const {
    return workspace_[half == BlockHalf::kMlp ? 1 : 0];
  }

 private:
  friend class BlockOpsBuilder;
  FixedList<BlockOp, kCapacity> ops_;
  OpIndices collective_ops_;
  BlockLinears linears_;
  AttentionCoreShape core_;
  SavedTensorList saved_;
  SavedTensorList op_outputs_;
  SavedTensorList workspace_[2];  // attention half, FFN half
};

// torchtitan's op-level rule for a block's linears in forward order: whether the op policy
// saves `linear`'s output, *matmuls counting the block's aten.mm calls so far (start at 0).
// _apply_op_sac saves every odd-numbered mm ("mm_count % 2"); it force-recomputes the
// router's by its shape and does not count it; the routed experts run a grouped GEMM, not
// aten.mm (docs/memory_model.md "Recompute policies").
bool OpPolicySavesOutput(const BlockLinear& linear, int* matmuls);

// Context parallel on the executor runs its ring attention (flash-style: no probabilities
// kept; executor/parallel/ring_attention.h), whatever the single-rank attention would be.
bool RunsRingAttention(const RankShape& shape, const Lowering& lowering);

// Kernel launches of one RMSNorm as the executor runs it (executor/model/ops.cc): forward its
// norm, square, scale, epsilon and rsqrt, then x * rstd and * w (7); backward 10; each
// + rstd's cast to a 16-bit activation type.
struct NormLaunches {
  int64_t fwd = 0, bwd = 0;
};
NormLaunches RmsNormLaunches(const RankShape& shape);

// The ops of one block of `model` on a rank of `shape`; the MoE FFN when shape.experts > 0
// (else the dense one), lowered by `lowering`.
BlockOps BuildBlockOps(const ModelSpec& model, const RankShape& shape, const Lowering& lowering);
// The ops of the embedding (stage 0) and of the head (final norm, lm_head, cross-entropy; the
// last stage) on a rank of `shape`: their work only, no saved tensors (docs/cost_model.md
// "The work").
BlockOps BuildEmbeddingOps(const ModelSpec& model, const RankShape& shape);
BlockOps BuildHeadOps(const ModelSpec& model, const RankShape& shape, const Lowering& lowering);

}  // namespace meshplan
