// Loading configs/frameworks/<name>.yaml into a FrameworkSpec (planner/framework_spec.h).
//
// Schema (every key required but norm, attention_kernel, master_weights, loss, zero_pipelined,
// zero_with_tp_cp, zero3_buffers, ddp_buckets, param_gather, offload, offload_act_alone,
// parallelism, prefetch, schedules, tp_overlap, pp_overlap, tp_backward_overlap,
// sequence_parallel, reduce_bucket_elements and allocator_fragmentation; docs/frameworks.md):
//   name              the file stem (optional; defaults to it)
//   version           the version the profile's values were read from (a string)
//   kernels           megatron-2021 | eager | fused | torchtitan-2024
//   norm              unfused | fused (optional, unfused: an eager set's RMSNorm as one kernel)
//   attention         fused | naive | auto
//   attention_kernel  flash2 | flash3 | cudnn (optional, flash2: the kernel of a fused core)
//   main_grads        param | fp32     (gradients of 16-bit weights with an fp32 master)
//   fp8_states        bf16 | fp32      (master weights and Adam states under precision fp8)
//   master_weights    fp32 | remainder (optional, fp32: how an fp32 master is kept)
//   grad_accumulation fused | separate
//   optimizer         fused-adam | foreach-adam | megatron-fp16
//   loss              fp32-in-place | cross-entropy | cross-entropy-fp32 |
//                     cross-entropy-fp32-freed (optional, fp32-in-place: how the loss holds
//                     its logits)
//   recompute         a list of: none, selective, full, op, every
//   zero              a list of the ZeRO stages offered: 0, 1, 2, 3
//   zero_pipelined    the same for plans with pp > 1 (optional: `zero` when absent)
//   zero_with_tp_cp   the same for plans with tp or cp > 1 and pp == 1 (optional: `zero`)
//   offload           a list of offload combinations, each of act, opt, params joined by '+'
//                     (optional: all; nothing offloaded is always offered)
//   offload_act_alone true: activation offload only with pp == 1 and no recompute (optional)
//   parallelism       a list of: tp, cp, ep, what it runs besides dp and pp; [] for none
//                     (optional: all three)
//   prefetch          a list of the ZeRO-3 prefetch depths offered, 0 to 4, with 1 among them
//                     (optional: all five)
//   schedules         a list of: gpipe, 1f1b, interleaved, zb_h1; [] for no pipeline
//                     parallelism (optional: all four)
//   tp_overlap        any | with-sp | none (optional, any: the plan's tp_overlap)
//   pp_overlap        none | interleaved (optional, none: the plan's pp_overlap)
//   tp_backward_overlap  none | column-gemms (optional, none: a column-parallel linear's
//                     backward TP collectives behind its own GEMMs without tp_overlap)
//   sequence_parallel optional | always | never (optional, optional: sp a choice with tp > 1)
//   zero1_gradients   in-place | shard-copy (ZeRO-1's reduce-scattered gradient shard)
//   zero3_buffers     views | copies (optional, views: FSDP2's copies around its collectives)
//   zero3_end_parts   groups | root (optional, groups: FSDP's root unit holds the embedding
//                     and the head through the step)
//   ddp_buckets       views | copies (optional, views: DDP's bucket copies of the gradients)
//   param_gather      after-step | next-forward (optional, after-step: when ZeRO-1/2 gather the
//                     updated parameters)
//   reduce_bucket_elements  >= 0 (optional, 0: ZeRO's gradient bucket, in elements)
//   allocator_fragmentation  in [0, 1) (optional: the hardware file's when absent)
//   log_format        meshplan | megatron | torchtitan | deepspeed | pytorch-hook (the log
//                     `compare --log` reads; docs/framework_logs.md)
//   calibration       optional mapping: fittable (a list of: compute_scale, bandwidth_scale),
//                     compute_scale, bandwidth_scale (in (0, 10], default 1): factors on the
//                     hardware's rates that `calibrate --from-logs` fits (framework_spec.h)
// Errors are InputError at file:line:column with the field and the allowed values.
#pragma once

#include <string>
#include <vector>

#include "planner/framework_spec.h"
#include "planner/parallel_plan.h"
#include "planner/hardware_spec.h"
#include "planner/input_error.h"

namespace meshplan {

// A name from configs/frameworks/ (any case) or a YAML path. The spec's name is the file
// stem for a profile in configs/frameworks/, else the path as given (so that a plan file
// that records it loads the same file again).
FrameworkSpec LoadFramework(const std::string& name_or_path);
// The same where a file names the framework: an unknown name is an InputError at `where`
// with `field` (LoadFramework: the command line's "framework").
FrameworkSpec LoadFrameworkAt(const std::string& name_or_path, const InputLocation& where,
                              const std::string& field);
// The same reader on text in memory; `file` names it in errors and gives the default name.
FrameworkSpec FrameworkFromYamlText(const std::string& text, const std::string& file);
// Profiles in configs/frameworks/ (file stems, sorted).
std::vector<std::string> ListFrameworks();
// Where Validate refused a ZeRO stage, recompute policy or offload the framework does not
// offer: a line naming the profiles that offer all three as the plan asks and `how` to choose
// one ("\nprofiles that offer it: deepspeed, ... (--framework NAME)"); "" when no such rule
// is broken or none does.
std::string ProfilesOffering(const ParallelPlan& plan, const std::vector<PlanViolation>& violations,
                             const std::string& how);

// The profile of meshplan's own executor: `run` and `compare` of its runs always use it.
inline constexpr const char* kExecutorFramework = "meshplan";

// The framework predicted when the user names none: meshplan's executor on a CPU profile
// (sm_count 0), Megatron-Core on a GPU (what most large runs use).
const char* DefaultFrameworkName(const GpuSpec& gpu);

const char* ToString(KernelSet kernels);  // megatron-2021 | eager | fused | torchtitan-2024
// The `norm` spellings: "fused" (true) or "unfused" (false); false for any other name.
bool ParseNormKernel(const std::string& name, bool* fused);
const char* ToString(LogFormat format);   // meshplan | megatron | ... (the YAML spelling)
// The profile as YAML that FrameworkFromYamlText reads back to the same spec (the name as
// given), `comment` (may hold newlines) as '#' lines on top: what `calibrate --from-logs` writes.
std::string FrameworkToYamlText(const FrameworkSpec& spec, const std::string& comment);

}  // namespace meshplan
