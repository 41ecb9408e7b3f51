// McoreSettings (planner/export/mcore_settings.h). Names are those of megatron-core 0.16.1
// (megatron/core/model_parallel_config.py, transformer/transformer_config.py,
// distributed/distributed_data_parallel_config.py, optimizer/optimizer_config.py), of
// Megatron-LM core_v0.16.1's megatron/training/arguments.py (the flags) and of
// megatron-bridge 0.3.1's megatron/bridge/training/config.py (the sections, train, dataset,
// checkpoint, mixed_precision recipes in training/mixed_precision.py). docs/export.md lists each.
#include "planner/export/mcore_settings.h"

#include <string>

#include "planner/names.h"
#include "planner/stage_layers.h"

namespace meshplan {
namespace {

using S = McoreSection;

std::string Int(int64_t value) { return std::to_string(value); }

// A number as Python reads it, shortest form first ("0.01", "1.25").
std::string Real(double value) {
  std::string text = std::to_string(value);
  while (text.size() > 1 && text.back() == '0') text.pop_back();
  if (text.back() == '.') text.push_back('0');
  return text;
}

// The refusals, all before any setting is built (export_rules.h).
void CheckExpressible(const ExportJob& job) {
  using F = PlanField;
  const ParallelPlan& plan = job.plan();
  RefuseUnmapped(job, {F::kDp, F::kTp, F::kPp, F::kCp, F::kEp, F::kZero, F::kSp, F::kMbs,
                       F::kRecompute, F::kSchedule, F::kVpp, F::kTpOverlap, F::kPpOverlap,
                       F::kFirstStageLayers, F::kLastStageLayers, F::kOffloadOpt, F::kDpOverlap});
  RefuseUnofferedRecompute(job, "megatron-core");
  RefuseSchedule(job, {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved},
                 "Megatron-Core runs 1F1B, interleaved with virtual stages "
                 "(megatron/core/pipeline_parallel/schedules.py); it has no GPipe or ZB-H1 "
                 "schedule");
  if (plan.tp_comm_overlap && !plan.sequence_parallel)
    Refuse(job, PlanField::kTpOverlap,
           "arguments.py asserts --sequence-parallel for --tp-comm-overlap (set sp=1)");
  if (plan.offload_optimizer && plan.zero_stage == 0)
    Refuse(job, PlanField::kOffloadOpt,
           "--optimizer-cpu-offload needs the distributed optimizer (zero >= 1)");
  if (job.file.training.precision == Precision::kBf16)
    Refuse(job, "training.precision", "bf16",
           "--bf16 keeps fp32 main weights and Adam states (meshplan's `mixed`); bf16 states "
           "need the precision-aware optimizer's dtype flags, which export does not write");
}

// Megatron's --pipeline-model-parallel-layout (megatron/core/transformer/pipeline_parallel_
// layer_layout.py): the virtual stages in pipeline order, split by '|', one 't' per block,
// 'E' the embedding before the first, 'L' the loss after the last.
std::string PipelineLayout(const ExportJob& job) {
  const StageLayers split = SplitLayers(job.model().layers, job.plan());
  std::string layout;
  const int64_t virtual_stages = split.pp * split.vpp;
  for (int64_t v = 0; v < virtual_stages; ++v) {
    if (v > 0) layout += "|";
    if (v == 0) layout += "E";
    layout += std::string(static_cast<size_t>(split.ChunkOf(v % split.pp, v / split.pp)), 't');
    if (v == virtual_stages - 1) layout += "L";
  }
  return layout;
}

void AddParallel(const ExportJob& job, std::vector<McoreSetting>* out) {
  const ParallelPlan& plan = job.plan();
  out->push_back({S::kModel, "tensor_model_parallel_size", Int(plan.tp),
                  "--tensor-model-parallel-size", Int(plan.tp)});
  out->push_back({S::kModel, "pipeline_model_parallel_size", Int(plan.pp),
                  "--pipeline-model-parallel-size", Int(plan.pp)});
  // A layout fixes the virtual stages itself: arguments.py takes one of the layout and the
  // virtual-stage flags.
  const bool layout = HasUnevenStages(plan) && SplitLayers(job.model().layers, plan).vpp > 1;
  if (plan.interleaved() && !layout)
    out->push_back({S::kModel, "virtual_pipeline_model_parallel_size", Int(plan.virtual_stages),
                    "--num-virtual-stages-per-pipeline-rank", Int(plan.virtual_stages)});
  if (HasUnevenStages(plan)) {
    if (layout) {
      const std::string text = PipelineLayout(job);
      out->push_back({S::kModel, "pipeline_model_parallel_layout", "\"" + text + "\"",
                      "--pipeline-model-parallel-layout", text});
    } else {
      const StageSplit split = StageSplitOf(plan);
      if (split.first > 0)
        out->push_back({S::kModel, "num_layers_in_first_pipeline_stage", Int(split.first),
                        "--decoder-first-pipeline-num-layers", Int(split.first)});
      if (split.last > 0)
        out->push_back({S::kModel, "num_layers_in_last_pipeline_stage", Int(split.last),
                        "--decoder-last-pipeline-num-layers", Int(split.last)});
    }
  }
  if (plan.cp > 1)
    out->push_back({S::kModel, "context_parallel_size", Int(plan.cp), "--context-parallel-size",
                    Int(plan.cp)});
  if (plan.ep > 1)
    out->push_back({S::kModel, "expert_model_parallel_size", Int(plan.ep),
                    "--expert-model-parallel-size", Int(plan.ep)});
  if (plan.sequence_parallel)
    out->push_back({S::kModel, "sequence_parallel", "true", "--sequence-parallel", ""});
  if (plan.tp_comm_overlap)
    out->push_back({S::kModel, "tp_comm_overlap", "true", "--tp-comm-overlap", ""});
  // pp_overlap: pretrain_gpt.py overlaps an interleaved pipeline's sends unless told not to
  // (--no-overlap-p2p-communication, arguments.py, which sets batch_p2p_comm to its opposite);
  // ModelParallelConfig's defaults are the other way round (overlap_p2p_comm False,
  // batch_p2p_comm True, and "Can not use both").
  if (plan.pp_comm_overlap) {
    out->push_back({S::kModel, "overlap_p2p_comm", "true", "", ""});
    out->push_back({S::kModel, "batch_p2p_comm", "false", "", ""});
  } else if (plan.interleaved()) {
    out->push_back({S::kModel, "", "", "--no-overlap-p2p-communication", ""});
  }
  // Recompute: selective recomputes the attention core (recompute_modules' default
  // ["core_attn"]); full keeps each block's input (method uniform, one layer per unit).
  if (plan.recompute.kind == Recompute::kSelective)
    out->push_back(
        {S::kModel, "recompute_granularity", "selective", "--recompute-granularity", "selective"});
  if (plan.recompute.kind == Recompute::kFull) {
    out->push_back({S::kModel, "recompute_granularity", "full", "--recompute-granularity", "full"});
    out->push_back({S::kModel, "recompute_method", "uniform", "--recompute-method", "uniform"});
    out->push_back({S::kModel, "recompute_num_layers", "1", "--recompute-num-layers", "1"});
  }
}

// ZeRO: 1 is the distributed optimizer; 2 and 3 are Megatron-FSDP's optim_grads and
// optim_grads_params, which checkpoint only as fsdp_dtensor (arguments.py).
void AddDataParallel(const ExportJob& job, std::vector<McoreSetting>* out) {
  const ParallelPlan& plan = job.plan();
  if (plan.zero_stage == 1) {
    out->push_back(
        {S::kDdp, "use_distributed_optimizer", "true", "--use-distributed-optimizer", ""});
    out->push_back({S::kOptimizer, "use_distributed_optimizer", "true", "", ""});
  } else if (plan.zero_stage >= 2) {
    const char* strategy = plan.zero_stage == 2 ? "optim_grads" : "optim_grads_params";
    out->push_back({S::kDdp, "use_megatron_fsdp", "true", "--use-megatron-fsdp", ""});
    out->push_back({S::kDdp, "data_parallel_sharding_strategy", strategy,
                    "--data-parallel-sharding-strategy", strategy});
    out->push_back(
        {S::kCheckpoint, "ckpt_format", "fsdp_dtensor", "--ckpt-format", "fsdp_dtensor"});
  }
  if (plan.dp_comm_overlap && plan.weight_replicas() > 1) {
    out->push_back({S::kDdp, "overlap_grad_reduce", "true", "--overlap-grad-reduce", ""});
    if (plan.zero_stage >= 1)
      out->push_back({S::kDdp, "overlap_param_gather", "true", "--overlap-param-gather", ""});
  }
  if (plan.offload_optimizer) {  // arguments.py: offload needs the precision-aware optimizer
    out->push_back({S::kOptimizer, "use_precision_aware_optimizer", "true",
                    "--use-precision-aware-optimizer", ""});
    out->push_back({S::kOptimizer, "optimizer_cpu_offload", "true", "--optimizer-cpu-offload", ""});
    out->push_back({S::kOptimizer, "optimizer_offload_fraction", "1.0",
                    "--optimizer-offload-fraction", "1.0"});
  }
}

void AddModel(const ExportJob& job, std::vector<McoreSetting>* out) {
  const ModelSpec& m = job.model();
  out->push_back({S::kModel, "num_layers", Int(m.layers), "--num-layers", Int(m.layers)});
  out->push_back({S::kModel, "hidden_size", Int(m.hidden), "--hidden-size", Int(m.hidden)});
  out->push_back(
      {S::kModel, "ffn_hidden_size", Int(m.ffn_hidden), "--ffn-hidden-size", Int(m.ffn_hidden)});
  out->push_back(
      {S::kModel, "num_attention_heads", Int(m.heads), "--num-attention-heads", Int(m.heads)});
  out->push_back({S::kModel, "kv_channels", Int(m.head_dim()), "--kv-channels", Int(m.head_dim())});
  if (m.kv_heads != m.heads) {
    out->push_back({S::kModel, "", "", "--group-query-attention", ""});
    out->push_back(
        {S::kModel, "num_query_groups", Int(m.kv_heads), "--num-query-groups", Int(m.kv_heads)});
  }
  const int64_t seq = job.file.training.seq_len;
  out->push_back({S::kModel, "seq_length", Int(seq), "--seq-length", Int(seq)});
  out->push_back({S::kDataset, "sequence_length", Int(seq), "", ""});
  const int64_t positions = m.max_seq > 0 ? m.max_seq : seq;
  out->push_back({S::kModel, "", "", "--max-position-embeddings", Int(positions)});
  if (m.block == BlockKind::kLlama) {
    out->push_back({S::kModel, "normalization", "RMSNorm", "--normalization", "RMSNorm"});
    if (m.gated_ffn())
      out->push_back({S::kModel, "gated_linear_unit", "true", "--swiglu", ""});
    else  // TransformerConfig.activation_func is a callable, no override: the flag only
      out->push_back({S::kModel, "gated_linear_unit", "false", "--squared-relu", ""});
    out->push_back({S::kModel, "add_bias_linear", "false", "--disable-bias-linear", ""});
    out->push_back(
        {S::kModel, "position_embedding_type", "rope", "--position-embedding-type", "rope"});
    out->push_back({S::kModel, "hidden_dropout", "0.0", "--hidden-dropout", "0.0"});
    out->push_back({S::kModel, "attention_dropout", "0.0", "--attention-dropout", "0.0"});
  } else {
    out->push_back({S::kModel, "position_embedding_type", "learned_absolute",
                    "--position-embedding-type", "learned_absolute"});
  }
  if (!m.tied_embeddings)
    out->push_back({S::kModel, "share_embeddings_and_output_weights", "false",
                    "--untie-embeddings-and-output-weights", ""});
  if (m.qk_norm) out->push_back({S::kModel, "qk_layernorm", "true", "--qk-layernorm", ""});
  if (m.moe.enabled()) {
    const MoeSpec& moe = m.moe;
    out->push_back(
        {S::kModel, "num_moe_experts", Int(moe.experts), "--num-experts", Int(moe.experts)});
    out->push_back(
        {S::kModel, "moe_router_topk", Int(moe.top_k), "--moe-router-topk", Int(moe.top_k)});
    out->push_back({S::kModel, "moe_ffn_hidden_size", Int(moe.expert_ffn_hidden),
                    "--moe-ffn-hidden-size", Int(moe.expert_ffn_hidden)});
    if (moe.shared_experts > 0)
      out->push_back({S::kModel, "moe_shared_expert_intermediate_size",
                      Int(moe.shared_experts * moe.expert_ffn_hidden),
                      "--moe-shared-expert-intermediate-size",
                      Int(moe.shared_experts * moe.expert_ffn_hidden)});
    if (moe.dense_layers > 0) {  // a list, 0 = dense FFN, 1 = MoE, one per layer
      std::string list = "[";
      for (int64_t i = 0; i < m.layers; ++i)
        list += std::string(i ? "," : "") + (m.IsMoeLayer(i) ? "1" : "0");
      list += "]";
      out->push_back({S::kModel, "moe_layer_freq", list, "--moe-layer-freq",
                      "([0]*" + Int(moe.dense_layers) + "+[1]*" + Int(m.moe_layers()) + ")"});
    }
    if (moe.router_bias)
      out->push_back({S::kModel, "moe_router_enable_expert_bias", "true",
                      "--moe-router-enable-expert-bias", ""});
    if (moe.capacity_factor > 0)
      out->push_back({S::kModel, "moe_expert_capacity_factor", Real(moe.capacity_factor),
                      "--moe-expert-capacity-factor", Real(moe.capacity_factor)});
    out->push_back({S::kModel, "moe_aux_loss_coeff", Real(job.file.training.moe_aux_loss_coef),
                    "--moe-aux-loss-coeff", Real(job.file.training.moe_aux_loss_coef)});
  }
  if (m.mla.enabled()) {
    const MlaSpec& mla = m.mla;
    out->push_back({S::kModel, "multi_latent_attention", "true", "--multi-latent-attention", ""});
    if (mla.q_lora_rank > 0)
      out->push_back(
          {S::kModel, "q_lora_rank", Int(mla.q_lora_rank), "--q-lora-rank", Int(mla.q_lora_rank)});
    out->push_back({S::kModel, "kv_lora_rank", Int(mla.kv_lora_rank), "--kv-lora-rank",
                    Int(mla.kv_lora_rank)});
    const int64_t nope = m.head_dim() - mla.rope_head_dim;
    out->push_back({S::kModel, "qk_head_dim", Int(nope), "--qk-head-dim", Int(nope)});
    out->push_back({S::kModel, "qk_pos_emb_head_dim", Int(mla.rope_head_dim),
                    "--qk-pos-emb-head-dim", Int(mla.rope_head_dim)});
    out->push_back(
        {S::kModel, "v_head_dim", Int(mla.v_head_dim), "--v-head-dim", Int(mla.v_head_dim)});
  }
  // ModelParallelConfig.cross_entropy_loss_fusion (megatron/core/model_parallel_config.py).
  if (job.file.training.framework.loss == LossKernel::kFp32Fused)
    out->push_back({S::kModel, "cross_entropy_loss_fusion", "true", "--cross-entropy-loss-fusion", ""});
}

void AddBatchAndPrecision(const ExportJob& job, std::vector<McoreSetting>* out) {
  out->push_back({S::kTrain, "micro_batch_size", Int(job.plan().micro_batch), "--micro-batch-size",
                  Int(job.plan().micro_batch)});
  out->push_back({S::kTrain, "global_batch_size", Int(job.file.training.global_batch),
                  "--global-batch-size", Int(job.file.training.global_batch)});
  switch (job.file.training.precision) {
    case Precision::kMixed:
      out->push_back({S::kContainer, "mixed_precision", "bf16_mixed", "--bf16", ""});
      break;
    case Precision::kFp8:  // Transformer Engine's delayed scaling, E4M3 forward, E5M2 backward
      out->push_back(
          {S::kContainer, "mixed_precision", "bf16_with_fp8_delayed_scaling_mixed", "--bf16", ""});
      out->push_back({S::kModel, "", "", "--fp8-format", "hybrid"});
      out->push_back({S::kModel, "", "", "--fp8-recipe", "delayed"});
      break;
    case Precision::kFp32:
      out->push_back({S::kContainer, "mixed_precision", "null", "", ""});
      break;
    case Precision::kBf16: break;  // refused by CheckExpressible
  }
}

}  // namespace

const char* ToString(McoreSection section) {
  switch (section) {
    case S::kModel: return "model";
    case S::kDdp: return "ddp";
    case S::kOptimizer: return "optimizer";
    case S::kTrain: return "train";
    case S::kDataset: return "dataset";
    case S::kCheckpoint: return "checkpoint";
    case S::kContainer: return "";
  }
  return "?";
}

std::vector<McoreSetting> McoreSettings(const ExportJob& job) {
  CheckExpressible(job);
  std::vector<McoreSetting> settings;
  AddParallel(job, &settings);
  AddDataParallel(job, &settings);
  AddModel(job, &settings);
  AddBatchAndPrecision(job, &settings);
  return settings;
}

}  // namespace meshplan
