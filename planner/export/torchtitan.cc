// The `torchtitan` target: a job TOML for torchtitan 0.2.2 (`--job.config_file`), the last
// release read from a TOML (0.3 moved to Python config registries, whose CLI overrides take
// the same section.key paths). Every key is a field of torchtitan/config/job_config.py's
// JobConfig; docs/export.md says what each holds.
#include <string>

#include "planner/export/export_rules.h"
#include "planner/names.h"
#include "planner/stage_layers.h"

namespace meshplan {
namespace {

constexpr const char* kTorchtitanVersion = "torchtitan 0.2.2";

std::string Quoted(const std::string& text) { return "\"" + text + "\""; }
std::string Line(const std::string& key, const std::string& value) {
  return key + " = " + value + "\n";
}
std::string Line(const std::string& key, int64_t value) { return Line(key, std::to_string(value)); }

void CheckExpressible(const ExportJob& job) {
  using F = PlanField;
  const ParallelPlan& plan = job.plan();
  RefuseUnmapped(job, {F::kDp, F::kTp, F::kPp, F::kCp, F::kEp, F::kZero, F::kSp, F::kMbs,
                       F::kRecompute, F::kSchedule, F::kVpp, F::kTpOverlap, F::kFirstStageLayers,
                       F::kLastStageLayers, F::kOffloadOpt, F::kOffloadParams, F::kDpOverlap});
  RefuseUnofferedRecompute(job, "torchtitan");
  RefuseSchedule(
      job, {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved},
      "torch.distributed.pipelining (torch/distributed/pipelining/schedules.py, "
      "get_schedule_class) has GPipe, 1F1B and Interleaved1F1B, and zero-bubble "
      "schedules only over several chunks per rank (InterleavedZeroBubble, "
      "ZBVZeroBubble), not ZB-H1");
  if (plan.zero_stage == 1)
    Refuse(job, F::kZero,
           "FSDP2 (fully_shard) shards the gradients with the optimizer states: use zero=2 "
           "(fsdp_reshard_after_forward = \"never\") or zero=3");
  if (plan.zero_stage == 0 && plan.cp > 1)
    Refuse(job, F::kZero,
           "with context_parallel_degree > 1 torchtitan shards the weights over the cp ranks "
           "(fully_shard over dp_shard x cp, models/llama3/infra/parallelize.py)");
  if (plan.zero_stage == 0 && plan.dp > 1 && plan.world_size() != plan.dp)
    Refuse(job, F::kZero,
           "torchtitan's DDP (data_parallel_replicate_degree alone) runs only without other "
           "parallelism (\"DDP has not supported > 1D parallelism\", "
           "models/llama3/infra/parallelize.py): use zero=2 or 3");
  if (plan.tp > 1 && !plan.sequence_parallel)
    Refuse(job, F::kSp,
           "torchtitan's tensor parallelism always shards the norms over the sequence "
           "(SequenceParallel in models/llama3/infra/parallelize.py apply_tp)");
  if (plan.offload_optimizer != plan.offload_params)
    Refuse(job, plan.offload_optimizer ? F::kOffloadOpt : F::kOffloadParams,
           "training.enable_cpu_offload moves the parameters, gradients and optimizer states "
           "together (FSDP2's CPUOffloadPolicy): set both offload_opt and offload_params");
  if (!plan.dp_comm_overlap)
    Refuse(job, F::kDpOverlap, "FSDP2 and DDP always overlap the gradient sync with the backward");
}

// [parallelism] module_fqns_per_model_part: the modules of each virtual stage, in pipeline
// order (chunk c of stage r is virtual stage c*pp + r, the looped schedules' order), named as
// torchtitan's Llama-style models name them (tok_embeddings, layers.<i>, norm, output).
std::string ModelParts(const ExportJob& job) {
  const StageLayers split = SplitLayers(job.model().layers, job.plan());
  const int64_t parts = split.pp * split.vpp;
  std::string text = "[\n";
  int64_t block = 0;
  for (int64_t v = 0; v < parts; ++v) {
    std::string part = v == 0 ? Quoted("tok_embeddings") : "";
    for (int64_t n = split.ChunkOf(v % split.pp, v / split.pp); n > 0; --n, ++block)
      part += (part.empty() ? "" : ", ") + Quoted("layers." + std::to_string(block));
    if (v == parts - 1)
      part += (part.empty() ? "" : ", ") + Quoted("norm") + ", " + Quoted("output");
    text += "  [" + part + "],\n";
  }
  return text + "]";
}

const char* Schedule(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGpipe: return "GPipe";
    case PipelineSchedule::kInterleaved: return "Interleaved1F1B";
    default: return "1F1B";
  }
}

}  // namespace

std::string ExportTorchtitan(const ExportJob& job) {
  CheckExpressible(job);
  const ParallelPlan& plan = job.plan();
  const TrainingSpec& training = job.file.training;
  const ModelSpec& m = job.model();
  std::string text = "# meshplan export --to torchtitan: " + CommentText(job.plan_path) + " (" +
                     ToPlanString(plan) + ")\n# " + kTorchtitanVersion +
                     " job config: torchrun ... -m torchtitan.train --job.config_file THIS.toml\n";
  text += "# [model] name and flavor are yours: the flavor with " + std::to_string(m.layers) +
          " layers, dim " + std::to_string(m.hidden) + ", " + std::to_string(m.heads) + " heads, " +
          std::to_string(m.kv_heads) + " kv heads, FFN " + std::to_string(m.ffn_hidden) +
          (m.gated_ffn() ? ""
                         : " squared-ReLU, not gated (torchtitan's Llama FFN is SwiGLU: a model "
                           "of your own)") +
          " (" + m.name + ")\n";
  // fp8: torchao's Float8Linear (components/quantization/float8.py).
  if (training.precision == Precision::kFp8)
    text += "\n[model]\n" + Line("converters", "[\"quantize.linear.float8\"]");

  text += "\n[training]\n";
  // Without pp, local_batch_size is the micro-batch and torchtitan accumulates
  // global / (local x dp) of them; with pp, it is the rank's whole batch, cut into
  // pipeline_parallel_microbatch_size pieces.
  text +=
      Line("local_batch_size", plan.pp > 1 ? training.global_batch / plan.dp : plan.micro_batch);
  text += Line("global_batch_size", training.global_batch);
  text += Line("seq_len", training.seq_len);
  if (training.precision == Precision::kBf16) {
    text += Line("dtype", Quoted("bfloat16"));
  } else {
    text += Line("mixed_precision_param",
                 Quoted(training.precision == Precision::kFp32 ? "float32" : "bfloat16"));
  }
  if (plan.offload_optimizer) text += Line("enable_cpu_offload", "true");

  text += "\n[parallelism]\n";
  const bool sharded = plan.zero_stage >= 2;
  text += Line("data_parallel_replicate_degree", sharded ? 1 : plan.dp);
  text += Line("data_parallel_shard_degree", sharded ? plan.dp : 1);
  if (sharded)
    text += Line("fsdp_reshard_after_forward", Quoted(plan.zero_stage == 3 ? "always" : "never"));
  text += Line("tensor_parallel_degree", plan.tp);
  if (plan.tp_comm_overlap) text += Line("enable_async_tensor_parallel", "true");
  text += Line("context_parallel_degree", plan.cp);
  if (plan.ep > 1) {
    text += Line("expert_parallel_degree", plan.ep);
    text += Line("expert_tensor_parallel_degree", plan.tp);
  }
  text += Line("pipeline_parallel_degree", plan.pp);
  if (plan.pp > 1) {
    text += Line("pipeline_parallel_schedule", Quoted(Schedule(plan.schedule)));
    text += Line("pipeline_parallel_microbatch_size", plan.micro_batch);
    text += Line("module_fqns_per_model_part", ModelParts(job));
  }

  text += "\n[activation_checkpoint]\n";
  switch (plan.recompute.kind) {
    case Recompute::kNone: text += Line("mode", Quoted("none")); break;
    case Recompute::kFull: text += Line("mode", Quoted("full")); break;
    case Recompute::kOp:
      text += Line("mode", Quoted("selective")) + Line("selective_ac_option", Quoted("op"));
      break;
    case Recompute::kEvery:
      text += Line("mode", Quoted("selective")) +
              Line("selective_ac_option", Quoted(std::to_string(plan.recompute.every)));
      break;
    case Recompute::kSelective: break;  // refused by CheckExpressible
  }
  if (plan.tp_comm_overlap)  // async TP needs the compiled model (distributed/tensor_parallel.py)
    text += "\n[compile]\n" + Line("enable", "true") + Line("components", "[\"model\", \"loss\"]");
  if (training.precision == Precision::kFp8)
    text += "\n[quantize.linear.float8]\n" + Line("recipe_name", Quoted("tensorwise"));
  return text;
}

}  // namespace meshplan
