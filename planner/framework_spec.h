// FrameworkSpec: the software that runs a plan (Megatron-Core, torchtitan, plain PyTorch,
// DeepSpeed, meshplan's own executor), as a configs/frameworks/<name>.yaml profile gives it.
//
// The architecture (planner/model_spec.h) says which ops a block has; the framework says
// which kernels run them, what dtypes the model states are kept in, how the optimizer steps,
// how micro-batch gradients are summed, what it offers (recompute policies, ZeRO stages and
// ZeRO-3 prefetch depths, tp / cp / ep, pipeline schedules, offload, TP overlap and sequence
// parallelism) and how its allocator wastes memory. Plain data; planner/config/framework_yaml.h loads it with located
// errors, and every value is cited in the YAML files. The cost model reads it through
// TrainingSpec::framework. docs/frameworks.md says what each field changes and why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "planner/attention_kernel.h"
#include "planner/spellings.h"

namespace meshplan {

// How the attention core is computed, which sets what it keeps for backward and which kernel
// runs it. naive: QK^T, softmax and P@V as separate ops (the executor on CPU); fused: flash
// attention (FlashAttention 2/3, cuDNN, SDPA); auto: naive in fp32, fused otherwise
// (planner/attention_impl.h resolves it).
enum class AttentionImpl { kAuto, kNaive, kFused };

// The kernels a block's memory-bound ops run as (planner/cost/block_ops.h lowers them).
enum class KernelSet : uint8_t {
  kMegatron2021,  // Megatron-LM 2021-2022: fused LayerNorm, fused causal softmax, jit-fused
                  // bias-dropout-add and bias-GeLU, unfused 3-D bias adds
  kEager,         // PyTorch eager, one launch per op: meshplan's executor (executor/model/ops.cc)
  kFused,         // one kernel per fusion group each way: Transformer Engine's fused norms,
                  // fused RoPE, SwiGLU and bias-dropout-add (Megatron-Core), torch.compile;
                  // the attention through TE's DotProductAttention and its layout copies
  kTorchtitan2024,  // PyTorch eager running torchtitan's Llama code of 2024: RMSNorm in fp32
                    // ops, complex fp32 RoPE, silu * mul, repeat_kv, a contiguous output copy
};

// How the optimizer steps (planner/cost/step_work.cc counts its bytes).
enum class OptimizerStep : uint8_t {
  kFusedAdam,     // one multi-tensor AdamW pass over the states (apex / TE FusedAdam,
                  // torch.optim.AdamW(fused=True), meshplan's executor)
  kForeachAdam,   // torch.optim.AdamW's multi-tensor (foreach) path, its default on CUDA: eight
                  // passes, and a temporary of the rank's parameters in the state dtype
  kMegatronFp16,  // Megatron-LM 2021's Float16OptimizerWithFloat16Params chain: copy the
                  // 16-bit gradients to fp32, unscale, clip norm, Adam, copy back
};

// How the loss holds its logits (planner/cost/activation_memory.h LossSavedTensors).
enum class LossKernel : uint8_t {
  kFp32InPlace,       // the logits in an fp32 buffer, softmaxed in place, the backward's gradient
                      // written over it (meshplan's executor; Megatron's vocab-parallel loss)
  kCrossEntropy,      // F.cross_entropy on the logits the model returns, in the activation dtype:
                      // log_softmax's output saved, the caller holding the logits through the
                      // backward, two gradients of their size in the loss backward (plain PyTorch)
  kCrossEntropyFp32,  // the same on logits the model casts to fp32 (torchtitan 2024's
                      // `self.output(h).float()`)
  kCrossEntropyFp32Freed,  // the loss casts the model's logits to fp32 and the caller frees
                           // them before the backward: log_softmax's fp32 output the only
                           // tensor kept (torchtitan from e29b6b4d4, June 2024: `del pred`)
  kFp32Fused,  // kFp32InPlace's fp32 softmax, its passes fused (Megatron-Core's
               // --cross-entropy-loss-fusion: megatron/core/fusions/fused_cross_entropy.py)
};
inline constexpr Spellings<LossKernel, 5> kLossKernelSpellings{
    {{LossKernel::kFp32InPlace, "fp32-in-place"},
     {LossKernel::kCrossEntropy, "cross-entropy"},
     {LossKernel::kCrossEntropyFp32, "cross-entropy-fp32"},
     {LossKernel::kCrossEntropyFp32Freed, "cross-entropy-fp32-freed"},
     {LossKernel::kFp32Fused, "fp32-fused"}}};
// Megatron's loss: the logits cast to an fp32 buffer that becomes the softmax, kept for the
// backward, whose gradient is written over it.
inline bool Fp32SoftmaxBuffer(LossKernel k) {
  return k == LossKernel::kFp32InPlace || k == LossKernel::kFp32Fused;
}
// A PyTorch cross-entropy over fp32 logits (the model's or the loss's cast).
inline bool CrossEntropyInFp32(LossKernel k) {
  return k == LossKernel::kCrossEntropyFp32 || k == LossKernel::kCrossEntropyFp32Freed;
}
// A PyTorch cross-entropy whose caller holds the logits through the backward.
inline bool CallerHoldsLogits(LossKernel k) {
  return k == LossKernel::kCrossEntropy || k == LossKernel::kCrossEntropyFp32;
}

// Activation recompute policies (ParallelPlan::recompute) a framework offers, as a bit set.
struct RecomputeOffer {  // the default: meshplan's executor's
  bool none = true, selective = true, full = true;
  bool op = false;     // torchtitan's op-level selective checkpointing
  bool every = true;   // every N-th block checkpointed (every:N)
  bool operator==(const RecomputeOffer&) const = default;
};

// ZeRO stages (ParallelPlan::zero_stage) a framework offers, as a bit set: bit s is stage s.
struct ZeroOffer {  // the default: meshplan's executor's, all four
  uint8_t stages = 0b1111;
  bool offers(int64_t stage) const { return stage >= 0 && stage <= 3 && ((stages >> stage) & 1); }
  bool operator==(const ZeroOffer&) const = default;
};

// Whether the framework overlaps TP collectives with its GEMMs (the plan's tp_overlap): any
// plan, only with sequence parallelism (Transformer Engine's userbuffers under Megatron-Core),
// or never.
enum class TpOverlapOffer : uint8_t { kAny, kWithSp, kNone };

// Whether the framework runs an interleaved pipeline's sends and receives behind the next
// chunk's compute (the plan's pp_overlap): none, or on interleaved schedules (Megatron-Core's
// overlap_p2p_comm).
enum class PpOverlapOffer : uint8_t { kNone, kInterleaved };

// Whether the framework issues a column-parallel linear's backward TP collectives
// asynchronously behind its own GEMMs without the plan's tp_overlap: none (they block), or
// column-gemms (the input's re-gather behind the input-gradient GEMM, the input gradient's
// reduce-scatter or all-reduce behind the weight-gradient GEMM: Megatron-LM's
// LinearWithGradAccumulationAndAsyncCommunication from 2022, Transformer Engine's
// LayerNormLinear / LayerNormMLP backward). docs/cost_model.md 7(b).
enum class TpBackwardOverlap : uint8_t { kNone, kColumnGemms };

// Sequence parallelism beside tensor parallelism (the plan's sp with tp > 1): a choice; always
// (its TP shards the norms and dropouts over the sequence: torchtitan's SequenceParallel
// norms); or never (its TP has no sequence parallelism: Megatron-LM before 2022).
enum class SpOffer : uint8_t { kOptional, kAlways, kNever };

// Pipeline schedules (ParallelPlan::schedule, PipelineSchedule's values gpipe, 1f1b,
// interleaved, zb_h1 as bits 0-3) a framework runs with pp > 1; none: no pipeline parallelism.
struct ScheduleOffer {  // the default: all four
  uint8_t schedules = 0b1111;
  bool offers(int schedule) const {
    return schedule >= 0 && schedule <= 3 && ((schedules >> schedule) & 1);
  }
  bool operator==(const ScheduleOffer&) const = default;
};

// The ZeRO-3 gather depths (ParallelPlan::zero3_prefetch, 0 to kMaxZero3Prefetch) a framework
// runs, as a bit set: bit d is d blocks gathered ahead. 1 is always offered.
struct PrefetchOffer {  // the default: 0 to 4 (meshplan's executor)
  uint8_t depths = 0b11111;
  bool offers(int64_t depth) const { return depth >= 0 && depth <= 7 && ((depths >> depth) & 1); }
  bool operator==(const PrefetchOffer&) const = default;
};

// The parallelisms besides data and pipeline parallelism (ZeroOffer, ScheduleOffer) a
// framework runs: tensor (tp), context (cp) and expert (ep) parallelism.
struct ParallelismOffer {  // the default: all three
  bool tp = true, cp = true, ep = true;
  bool operator==(const ParallelismOffer&) const = default;
};

// The offload combinations (the plan's offload_act, offload_opt, offload_params) a framework
// runs, as a bit set over the 8 of them: bit act | opt << 1 | params << 2. Nothing offloaded
// (bit 0) is always offered.
struct OffloadOffer {  // the default: every combination (meshplan's executor)
  uint8_t combos = 0xFF;
  static int Bit(bool act, bool opt, bool params) {
    return (act ? 1 : 0) | (opt ? 2 : 0) | (params ? 4 : 0);
  }
  // Activation offload runs only without pipeline parallelism and without recompute
  // (Megatron-Core's cpu_offloading refuses both).
  bool act_alone = false;
  bool offers(bool act, bool opt, bool params) const {
    return (combos >> Bit(act, opt, params)) & 1;
  }
  bool operator==(const OffloadOffer&) const = default;
};

// Whether gradients of 16-bit parameters are accumulated in 16 bits or fp32.
enum class GradDtype : uint8_t { kParam, kFp32 };
// The dtype of master weights and Adam states in fp8 runs.
enum class Fp8StateDtype : uint8_t { kBf16, kFp32 };
inline constexpr Spellings<Fp8StateDtype, 2> kFp8StateSpellings{
    {{Fp8StateDtype::kBf16, "bf16"}, {Fp8StateDtype::kFp32, "fp32"}}};
// How the optimizer keeps the fp32 master weights of bf16 weights (mixed; fp8 with fp32 states).
enum class MasterWeights : uint8_t {
  kFp32,       // a separate fp32 copy, 4 bytes per parameter (Megatron-Core, DeepSpeed, FSDP)
  kRemainder,  // only the 16 low-order bits the bf16 weight lacks, 2 bytes: the bf16 weight and
               // its remainder are the fp32 value (Apex DistributedFusedAdam's
               // store_param_remainders, which NeMo 1.x sets for bf16 O2 training)
};

// What ZeRO-3 does with a block's gathered parameters and its gradients around the collectives.
// views:  they are views of the flat communication buffers (FSDP1's FlatParameter, DeepSpeed,
//         meshplan's executor): nothing is copied.
// copies: FSDP2 (torch.distributed._composable.fsdp, _fsdp_collectives.py) copies the gathered
//         parameters out of the all-gather buffer (foreach_all_gather_copy_out:
//         split_with_sizes_copy), casts the gradients to reduce_dtype and copies them into the
//         reduce-scatter buffer (foreach_reduce: _to_dtype_if_needed, _chunk_cat), each a
//         memory-bound pass over the part's full parameters (planner/cost/step_work.cc).
enum class Zero3Buffers : uint8_t { kViews, kCopies };

// Where ZeRO-3 keeps the parameters outside the blocks (the embedding, the final norm, the
// lm_head).
// groups: each is a ZeRO-3 group like a block, gathered before each pass that reads it and
//         its gradient reduce-scattered as its backward ends (DeepSpeed's per-module
//         gathers, meshplan's executor).
// root:   they are the root FSDP unit (fully_shard(model) or FSDP(model) around the wrapped
//         blocks): gathered once as the forward starts and held through the backward (the
//         root is never resharded after its forward), their gradients held unsharded and
//         reduce-scattered together after the whole backward (the root's post-backward runs
//         in the autograd engine's final callback, its token-id input needing no gradient).
enum class Zero3EndParts : uint8_t { kGroups, kRoot };

// When ZeRO-1/2 all-gather the parameters the optimizer updated (with the plan's dp_overlap;
// without it, or on a CPU, always after the step).
// after-step:   after the optimizer step, before the next step starts: exposed (DeepSpeed's
//               stage 1/2, meshplan's executor).
// next-forward: bucket by bucket ahead of the next step's first forward, each one waited on
//               as its first layer runs and the next bucket's launched then: the chain
//               overlaps the first micro-batch's forward, only the first bucket exposed
//               (Megatron-Core's --overlap-param-gather, NeMo's overlap_param_sync).
enum class ParamGather : uint8_t { kAfterStep, kNextForward };

// What data parallelism without ZeRO (zero=0, dp x cp > 1) all-reduces.
// views:  the gradients themselves, in their buffer (Megatron-Core's grad buffer, FSDP1
//         NO_SHARD's FlatParameter, DDP with gradient_as_bucket_view=True, meshplan's executor).
// copies: PyTorch DDP's default (gradient_as_bucket_view=False): its Reducer allocates flat
//         buckets for every gradient when it wraps the model and keeps them, copies each
//         gradient into its bucket (scaled by 1/world) in the backward of the step's last
//         micro-batch and copies the all-reduced bucket back into .grad.
enum class DdpBuckets : uint8_t { kViews, kCopies };

// How micro-batches' weight gradients are summed (docs/cost_model.md "Gradient accumulation"):
// fused:    inside the weight-gradient GEMM (its epilogue adds to the accumulator):
//           Megatron-Core's gradient_accumulation_fusion, meshplan's executor (addmm_).
// separate: one add kernel per parameter per micro-batch after the first, reading the new
//           gradient and the accumulator and writing the accumulator: PyTorch autograd's
//           AccumulateGrad (DDP, FSDP), Megatron-LM 2021's local DDP main_grad hook.
enum class GradAccumulation : uint8_t { kFused, kSeparate };

// The log a run of the framework writes, which `meshplan compare --log` and `calibrate
// --from-logs` read back (planner/measure/framework_log/framework_log.h; the formats and their
// sources: docs/framework_logs.md).
enum class LogFormat : uint8_t {
  kMeshplan,     // measured.json of `meshplan run`
  kMegatron,     // Megatron-LM's training_log iteration lines and report_memory lines
  kTorchtitan,   // torchtitan's MetricsProcessor step lines
  kDeepspeed,    // DeepSpeed's ThroughputTimer lines (steps_per_print set)
  kPytorchHook,  // the JSON the documented plain-PyTorch hook writes, one file per rank
};

// What `meshplan calibrate --from-logs` fits for a framework from its users' runs
// (docs/framework_logs.md "Calibrating from logs"): factors on the hardware file's sustained
// rates, as this framework's kernels reach them. 1 = the hardware file's rates. Only the
// factors in `fittable` are fitted; the others keep their values.
struct FrameworkCalibration {
  double compute_scale = 1;    // multiplies the matmul and attention rates
                               // (GpuSpec::matmul_efficiency, attention_efficiency)
  double bandwidth_scale = 1;  // multiplies the memory-bound rate (memory_bandwidth_efficiency)
  bool fit_compute = false, fit_bandwidth = false;  // the profile's `fittable` list
  bool operator==(const FrameworkCalibration&) const = default;
};

// A default-constructed spec is meshplan's executor, exactly as configs/frameworks/meshplan.yaml
// gives it (a test checks the two agree): what a TrainingSpec built in code predicts for.
struct FrameworkSpec {
  std::string name = "meshplan";      // file stem: megatron-core, torchtitan, ...
  std::string version = "this build";  // the version its values were read from ("core_r0.8.0")
  // The profile whose model and kernels this framework runs underneath ("" for none; nemo:
  // megatron-core). Where no published run of that profile backs a prediction, its error band
  // is measured on the runs of the frameworks built on it (planner/validate/error_band.h).
  std::string built_on;
  // The profile of a later version of the same framework ("" for none; torchtitan-2024-04:
  // torchtitan): where no published run of that profile backs a prediction, its error band
  // is measured on this one's runs too, as for built_on.
  std::string version_of;
  KernelSet kernels = KernelSet::kEager;
  // The eager kernel sets' RMSNorm as one fused kernel each way (torchtitan's
  // `norm_type = "fused_rmsnorm"`); the fused kernel sets always fuse it.
  bool fused_norm = false;
  // fused (flash), naive, or auto (naive in fp32, fused otherwise: the executor's choice).
  AttentionImpl attention = AttentionImpl::kAuto;
  // The kernel that runs a fused core (its rate: GpuSpec::AttentionEfficiency): the
  // executor's SDPA picks cuDNN where the hardware file has its figure (Hopper); a profile
  // without the key says flash2.
  AttentionKernel attention_kernel = AttentionKernel::kCudnn;
  // Gradients of 16-bit weights whose optimizer keeps an fp32 master copy (mixed; fp8 with
  // fp32 states): in the weights' dtype, or fp32 (Megatron's main_grad).
  GradDtype main_grads = GradDtype::kParam;
  Fp8StateDtype fp8_states = Fp8StateDtype::kBf16;   // `fp8`: master weights, Adam m and v
  MasterWeights master_weights = MasterWeights::kFp32;
  GradAccumulation grad_accumulation = GradAccumulation::kFused;
  OptimizerStep optimizer = OptimizerStep::kFusedAdam;
  LossKernel loss = LossKernel::kFp32InPlace;
  RecomputeOffer recompute;
  ZeroOffer zero;
  // The stages offered to a pipelined plan (pp > 1) when they differ from `zero` (torchtitan
  // shards with FSDP2's reshard_after_forward=False under pipeline parallelism); absent: zero.
  std::optional<ZeroOffer> zero_pipelined;
  // The stages offered to a plan without pipeline stages but with tensor or context
  // parallelism, when they differ from `zero` (torchtitan's DDP runs only alone); absent: zero.
  std::optional<ZeroOffer> zero_with_tp_cp;
  ParallelismOffer parallelism;
  PrefetchOffer prefetch;
  ScheduleOffer schedules;
  OffloadOffer offload;
  TpOverlapOffer tp_overlap = TpOverlapOffer::kAny;
  PpOverlapOffer pp_overlap = PpOverlapOffer::kNone;
  TpBackwardOverlap tp_backward_overlap = TpBackwardOverlap::kNone;
  SpOffer sequence_parallel = SpOffer::kOptional;
  // ZeRO-1 reduce-scatters the gradients into a separate shard beside the full gradient
  // buffer (meshplan's executor, executor/parallel/zero_engine.h), rather than in place in
  // that buffer (Megatron-Core's distributed optimizer, DeepSpeed, FSDP).
  bool zero1_gradient_shard = true;
  Zero3Buffers zero3_buffers = Zero3Buffers::kViews;
  Zero3EndParts zero3_end_parts = Zero3EndParts::kGroups;
  DdpBuckets ddp_buckets = DdpBuckets::kViews;
  ParamGather param_gather = ParamGather::kAfterStep;
  // ZeRO's gradient bucket, in elements of the parameters' dtype (DeepSpeed's
  // reduce_bucket_size with contiguous_gradients): each gradient is copied into it as it is
  // produced and reduced from it. ZeRO-1/2 allocate it as each backward starts and free it as
  // it ends (two with the plan's dp_overlap: DeepSpeed's overlap_comm double-buffers it),
  // ZeRO-3 holds one for the run. 0: none (the gradients are reduced where they are).
  double reduce_bucket_elements = 0;
  // < 0: the hardware file's runtime_memory.allocator_fragmentation; else this share of
  // the allocator's reserved memory that no live tensor holds (expandable segments: less).
  double allocator_fragmentation = -1;
  LogFormat log_format = LogFormat::kMeshplan;
  FrameworkCalibration calibration;

  bool operator==(const FrameworkSpec&) const = default;
};

// The ZeRO stages `framework` offers a plan with `pp` pipeline stages, `tp` tensor and `cp`
// context ranks: zero_pipelined with pp > 1, else zero_with_tp_cp with tp or cp > 1, where
// the profile gives them, else zero.
inline const ZeroOffer& ZeroOfferFor(const FrameworkSpec& framework, int64_t pp, int64_t tp = 1,
                                     int64_t cp = 1) {
  if (pp > 1 && framework.zero_pipelined) return *framework.zero_pipelined;
  if (pp == 1 && (tp > 1 || cp > 1) && framework.zero_with_tp_cp) return *framework.zero_with_tp_cp;
  return framework.zero;
}

// Whether FSDP's root unit holds the embedding and the head through the step: ZeRO-3 under a
// framework whose zero3_end_parts is root.
inline bool HoldsZero3Root(const FrameworkSpec& framework, int64_t zero_stage) {
  return zero_stage == 3 && framework.zero3_end_parts == Zero3EndParts::kRoot;
}

// "megatron-core core_r0.8.0": the name and version, for output headers and messages.
inline std::string FrameworkLabel(const FrameworkSpec& framework) {
  return framework.version.empty() ? framework.name : framework.name + " " + framework.version;
}

}  // namespace meshplan
