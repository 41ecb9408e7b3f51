// ParallelPlan: how one training step is split over the GPUs, and its validation.
//
// Rank layout (Megatron order, SPEC.md section 3): tp innermost, then cp, then pp,
// dp outermost: rank = ((dp_i * pp + pp_i) * cp + cp_i) * tp + tp_i.
// Validate() checks every divisibility rule once and names each factor that is off;
// the search, the CLI and the executor all call it rather than re-checking.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model_spec.h"
#include "planner/training_spec.h"

namespace meshplan {

enum class Recompute { kNone, kSelective, kFull };
// gpipe: all forwards then all backwards; 1f1b: one-forward-one-backward;
// interleaved: 1F1B with virtual_stages model chunks per rank; zb_h1: zero-bubble H1.
enum class PipelineSchedule { kGpipe, k1F1B, kInterleaved, kZeroBubbleH1 };

struct ParallelPlan {
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t cp = 1;
  int zero_stage = 0;             // 0 = plain DP, 1/2/3 = ZeRO stage (3 = FSDP full shard)
  bool sequence_parallel = false; // Megatron SP (only meaningful with tp > 1)
  int64_t micro_batch = 1;        // sequences per micro-batch per dp rank
  Recompute recompute = Recompute::kNone;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;     // model chunks per pipeline rank (interleaved only)
  bool tp_comm_overlap = false;   // let TP collectives overlap compute (off: exposed)

  int64_t world_size() const { return dp * tp * pp * cp; }
  // Micro-batches per step per dp rank: global_batch / (dp * micro_batch).
  int64_t num_microbatches(int64_t global_batch) const {
    return global_batch / (dp * micro_batch);
  }
  bool operator==(const ParallelPlan&) const = default;
};

// Why a plan is invalid. `constraint` is a stable id that the search counts by
// (e.g. "tp_divides_heads"); `message` names the factors and their values.
struct PlanViolation {
  std::string constraint;
  std::string message;
};

// Every rule of SPEC.md section 3 that the plan breaks for this model, batch and
// world size (world_size <= 0 skips the product check). Empty means valid.
std::vector<PlanViolation> Validate(const ParallelPlan& plan, const ModelSpec& model,
                                    const TrainingSpec& training, int64_t world_size);

// "dp=2,tp=4,pp=1,cp=1,zero=1,sp=1,mbs=1,recompute=none,schedule=1f1b,vpp=1";
// omitted keys keep their defaults. Throws InputError naming the key and the
// allowed values. `source` names where the string came from in the error.
ParallelPlan ParsePlanString(const std::string& text, const std::string& source = "--plan");
std::string ToPlanString(const ParallelPlan& plan);

}  // namespace meshplan
