// Expert parallelism in the cost model: what one rank of a MoE layer dispatches,
// computes and holds when the X routed experts are split over ep ranks
// (ParallelPlan::ep; groups in planner/mesh_layout.h, docs/cost_model.md sections 1(a), 3).
// The one description the step's work (expert GEMM rows, the all-to-alls: step_work.h),
// the detailed memory model (dispatched activations: activation_memory.h) and the GUI
// read, so they cannot disagree.
//
// Per micro-batch on one rank (planner/model_spec.h legend; T = B*S/cp tokens of the rank,
// r = ExpertRowsPerToken: k dropless, k * capacity_factor padded to capacity):
//   local experts      X/ep
//   rows computed      T*r*u   the rows this rank's local experts run (u below); every tp
//                              rank of an expert runs all of them over its Fe/tp slice
//   rows dispatched    T*r/tp  each tp rank sends 1/tp of its ep rank's routed rows
//                              (Megatron-Core's all-to-all dispatcher splits the
//                              tp-replicated tokens, exchanges them over ep, then
//                              all-gathers them over tp; the combine mirrors it)
//   all-to-all bytes   T*r/tp * E * a   one dispatch or one combine buffer on this rank
//                              (collective_time.h convention: the rank's whole buffer)
// u, the load imbalance: the busiest ep rank's rows over the mean. 1 with ep == 1 (a rank
// runs every routed row of its own tokens, whatever the experts) and with a capacity
// factor (every expert's buffer is padded to its capacity, so all ranks run the same rows);
// dropless with ep > 1: MoeSpec::load_imbalance (default kDefaultLoadImbalance). The
// busiest rank sets the step time (every ep rank waits for it at the combine) and the
// memory (its dispatched activations).
// Pure functions, no allocation.
#pragma once

#include <cstdint>

#include "planner/model_spec.h"
#include "planner/parallel_plan.h"

namespace meshplan {

struct ExpertParallelWork {
  int64_t ep = 1;
  int64_t local_experts = 0;    // X/ep
  double imbalance = 1;         // u
  double rows_per_token = 0;    // r
  double rows_computed = 0;     // T*r*u
  double rows_dispatched = 0;   // T*r/tp
  double all_to_all_bytes = 0;  // T*r/tp * E * a; 0 when ep == 1 (no exchange)
};

// u of the header comment for this model and plan.
double LoadImbalance(const ModelSpec& model, const ParallelPlan& plan);

// One rank's MoE-layer work for `tokens` = T tokens of a micro-batch and `activation_bytes`
// = a. A dense model (or tokens 0) gives zeros.
ExpertParallelWork ExpertParallelOf(const ModelSpec& model, const ParallelPlan& plan,
                                    double tokens, double activation_bytes);

}  // namespace meshplan
