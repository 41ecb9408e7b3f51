// Offload: what a plan's offload choices move to host memory, and what their copies and
// the CPU optimizer step cost (issue 17; docs/cost_model.md section 7).
//
// The three choices (ParallelPlan, planner/parallel_plan.h):
//  * offload_opt (ZeRO-Offload, Ren et al. 2021, arXiv:2101.06840): the parameters AdamW
//    updates (the fp32 master where the precision has one, else a copy of the shard in the
//    param dtype) and Adam's m, v of this rank's shard live on the host, with a buffer for
//    the gradient shard the CPU reads (HostOptimizerBytesPerParam) and, once, the update's
//    workspace (the largest group's AdamW temporaries: planner/cost/memory_detailed.cc);
//    the executor's ZeroEngine keeps exactly these (executor/parallel/zero_engine.h). After the backward the
//    gradient shard is copied to the host (it follows the reduce-scatter, so it hides
//    behind the last micro-batch's backward up to that backward's length), the CPU runs
//    AdamW at HostSpec::optimizer_Bps, and the updated parameters (param dtype) are copied
//    back before the next forward (exposed). ZeRO-Offload's one-step delayed parameter
//    update (DPU), which overlaps the CPU step with the next step's forward and backward,
//    changes the training dynamics and is not modelled: the CPU step is exposed.
//  * offload_act: each block's saved activations are copied to the host as the forward
//    moves on (hidden behind the forward of the stage's later blocks) and prefetched back
//    one block ahead in the backward (hidden behind the backward). Only the excess of the
//    copies over that compute shows, per micro-batch. The GPU keeps two blocks of one
//    micro-batch (the one computing and the one in transit); the first / last stage's own
//    tensors and the logits stay on the GPU. Copies run on the copy engines: no compute
//    slowdown is charged.
//  * offload_params (ZeRO-Infinity, Rajbhandari et al. 2021, arXiv:2104.07857; zero=3 with
//    offload_opt): the parameter shard lives on the host and is copied in before each of its
//    all-gathers, in the same prefetch chain (planner/cost/step_time.h), so its exposed part
//    shows under dp.
// A host copy of b bytes takes latency + b / (link bandwidth * bus_efficiency).
// Pure functions; nothing here allocates.
#pragma once

#include <string>

#include "planner/cluster_spec.h"
#include "planner/cost/model_state_memory.h"
#include "planner/input_error.h"
#include "planner/parallel_plan.h"

namespace meshplan {

struct StepWork;
struct StageParts;

// What the step's work records about offload (StepWork::offload), per rank.
struct OffloadWork {
  bool optimizer = false;
  bool activations = false;
  bool params = false;
  double activation_bytes_per_block = 0;  // one block's saved tensors, one micro-batch
  double host_state_bytes_per_param = 0;  // what the CPU AdamW updates (HostUpdatedBytesPerParam)
};

// offload_opt, per parameter of the rank's optimizer shard: what the CPU AdamW step reads
// and writes (the fp32 master, or the param-dtype copy where the precision has no master,
// and Adam's m, v: 12 bytes in mixed and fp32, 6 in bf16) ...
double HostUpdatedBytesPerParam(const BytesPerParam& bytes);
// ... and what the host keeps: those plus the gradient shard the CPU reads, in grad dtype
// (14 in mixed, 16 in fp32, 8 in bf16).
double HostOptimizerBytesPerParam(const BytesPerParam& bytes);

// Seconds to copy `bytes` between one GPU and host memory (either direction).
double HostCopyTime(double bytes, const HostSpec& host);

// The offload time of one stage (all 0 when the plan offloads nothing):
struct OffloadTimes {
  double forward_exposed_s = 0;   // per micro-batch: activation copies out beyond the forward
  double backward_exposed_s = 0;  // per micro-batch: activation copies in beyond the backward
  double step_exposed_s = 0;      // per step: gradient shard out (beyond the last backward)
                                  // + updated parameters in
  double cpu_optimizer_s = 0;     // per step: the CPU AdamW step (replaces the GPU's)
};
// `forward_s` / `backward_s`: the stage's compute of one micro-batch in each pass.
OffloadTimes StageOffloadTimes(const StepWork& work, const StageParts& parts,
                               const HostSpec& host, double forward_s, double backward_s);

// The host field a plan that offloads needs and the cluster lacks ("" when none is missing
// or the plan offloads nothing): "host.memory_GB_per_node", "host.link.bandwidth_GBps" or
// "host.optimizer_GBps". Callers raise it as an InputError (exit 2) at the cluster's file.
std::string MissingHostField(const ClusterSpec& cluster, const ParallelPlan& plan);
// Throws the InputError for MissingHostField() at `where` (the cluster's file or flag),
// naming the field, the plan key that needs it and where to add it; nothing if none.
void RequireHostData(const ClusterSpec& cluster, const ParallelPlan& plan,
                     const InputLocation& where);

}  // namespace meshplan
