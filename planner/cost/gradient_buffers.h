// The buffers a framework's data-parallel machinery copies the gradients into
// (FrameworkSpec::ddp_buckets, FrameworkSpec::reduce_bucket_elements), and on which plans it
// has them: the one rule that the memory model (memory_detailed.cc: the buffers held) and the
// step's work (step_work.cc: the copies into them) both read. docs/frameworks.md says why.
#pragma once

#include "planner/framework_spec.h"
#include "planner/parallel_plan.h"

namespace meshplan {

// PyTorch DDP's bucket copies of every gradient: data parallelism without ZeRO, on more than
// one weight replica, under a framework with `ddp_buckets: copies`.
inline bool HasDdpBucketCopies(const FrameworkSpec& framework, const ParallelPlan& plan) {
  return framework.ddp_buckets == DdpBuckets::kCopies && plan.zero_stage == 0 &&
         plan.weight_replicas() > 1;
}

// The elements of ZeRO's gradient bucket (DeepSpeed's reduce_bucket_size) on this plan: the
// framework's, under ZeRO on more than one weight replica; 0 otherwise.
inline double ReduceBucketElements(const FrameworkSpec& framework, const ParallelPlan& plan) {
  return plan.zero_stage >= 1 && plan.weight_replicas() > 1 ? framework.reduce_bucket_elements : 0.0;
}

}  // namespace meshplan
