// The `deepspeed` target: a ds_config.json for DeepSpeed 0.19.8. Keys from
// deepspeed/runtime/constants.py (batch, bf16), runtime/precision_config.py (bf16 master
// weights and states), runtime/zero/config.py and zero/offload_config.py (zero_optimization)
// and runtime/activation_checkpointing/config.py; docs/export.md lists each. DeepSpeed's
// engine runs data parallelism and ZeRO around the user's model; TP, PP, CP, EP and SP live in
// the model code, so a plan that uses them is refused.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "planner/cost/param_count.h"
#include "planner/export/export_rules.h"

namespace meshplan {
namespace {

void CheckExpressible(const ExportJob& job) {
  using F = PlanField;
  const ParallelPlan& plan = job.plan();
  RefuseUnmapped(job, {F::kDp, F::kZero, F::kMbs, F::kRecompute, F::kOffloadOpt, F::kOffloadParams,
                       F::kDpOverlap, F::kPrefetch});
  // ParallelPlan's defaults of tp..vpp are 1 / 1f1b, so RefuseUnmapped has refused them.
  RefuseUnofferedRecompute(job, "deepspeed");
  const Precision precision = job.file.training.precision;
  if (precision == Precision::kFp8)
    Refuse(job, "training.precision", "fp8",
           "ds_config.json has no FP8 training switch (FP8 GEMMs are the model's: Transformer "
           "Engine)");
  if (precision == Precision::kBf16 && plan.zero_stage == 0)
    Refuse(job, "training.precision", "bf16",
           "bf16 master weights and optimizer states (bf16.bf16_master_weights_and_grads) need "
           "ZeRO stage 1, 2 or 3 (deepspeed/runtime/config.py)");
}

}  // namespace

std::string ExportDeepspeed(const ExportJob& job) {
  CheckExpressible(job);
  const ParallelPlan& plan = job.plan();
  const TrainingSpec& training = job.file.training;
  nlohmann::ordered_json config;
  config["train_batch_size"] = training.global_batch;
  config["train_micro_batch_size_per_gpu"] = plan.micro_batch;
  config["gradient_accumulation_steps"] = plan.num_microbatches(training.global_batch);
  if (training.precision != Precision::kFp32) {
    nlohmann::ordered_json bf16 = {{"enabled", true}};
    if (training.precision == Precision::kBf16) {
      bf16["bf16_master_weights_and_grads"] = true;
      bf16["bf16_optimizer_states"] = true;
    }
    config["bf16"] = bf16;
  }
  nlohmann::ordered_json zero = {{"stage", plan.zero_stage},
                                 {"overlap_comm", plan.dp_comm_overlap}};
  // The gradient bucket the prediction holds (FrameworkSpec::reduce_bucket_elements).
  const double bucket = training.framework.reduce_bucket_elements;
  zero["contiguous_gradients"] = bucket > 0;
  if (bucket > 0) zero["reduce_bucket_size"] = static_cast<int64_t>(bucket);
  if (plan.zero_stage == 3) {
    // ZeRO-3 gathers up to stage3_prefetch_bucket_size parameter elements ahead of their use
    // and keeps at most stage3_max_live_parameters gathered
    // (runtime/zero/partitioned_param_coordinator.py): `prefetch` blocks ahead, and room for
    // them beside the block computing (at least DeepSpeed's default, 1e9).
    const int64_t block = BlockParamsPerRank(job.model(), plan, job.model().moe.enabled());
    zero["stage3_prefetch_bucket_size"] = plan.zero3_prefetch * block;
    zero["stage3_max_live_parameters"] =
        std::max<int64_t>(1'000'000'000, (plan.zero3_prefetch + 1) * block);
  }
  if (plan.offload_optimizer) zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  if (plan.offload_params) zero["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
  config["zero_optimization"] = zero;
  // Full recompute: deepspeed.checkpointing.checkpoint around each block, which the model
  // calls; this section configures it (no partitioning or CPU copies: meshplan's `full`).
  if (plan.recompute.kind == Recompute::kFull)
    config["activation_checkpointing"] = {{"partition_activations", false},
                                          {"cpu_checkpointing", false},
                                          {"contiguous_memory_optimization", false}};
  return config.dump(2) + "\n";
}

}  // namespace meshplan
