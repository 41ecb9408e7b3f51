// MoeFfn: the mixture-of-experts FFN of a llama block (planner/model_spec.h MoeSpec;
// planner/cost/block_linears.h lists its matrices) as a mirrored Forward / Backward pair in
// the style of executor/model/ops.h: no autograd; Backward returns d(input) and
// ACCUMULATES (+=) the weight gradients into caller-owned views of a flat gradient buffer.
// Routing, capacity, expert parallelism (all-to-all), tensor parallelism (one tp region)
// and the auxiliary loss are described in docs/executor_internals.md ("Mixture-of-experts
// layers"); what Forward saves for Backward (MoeStash) in docs/memory_model.md (section
// "Mixtures of experts (measured)"). Shapes: T = B*S tokens in the region, E hidden, X routed experts, Xl = X/ep
// local ones, k top-k, Fe expert width (Fe/tp with tp), Xs shared experts, R rows this rank
// routes, Rl rows its experts compute. The input h is the caller's, not copied.
// Not thread-safe; every rank of the ep and tp groups calls both in the same order (the
// all-to-alls and the region's collectives are collective).
#pragma once

#include <ATen/ATen.h>

#include "executor/model/moe_routing.h"
#include "executor/parallel/expert_parallel.h"
#include "executor/parallel/tensor_parallel.h"
#include "planner/model_spec.h"

namespace meshplan {

// Views of one MoE layer's weights (or gradients: same layout).
struct MoeWeights {
  at::Tensor router;                                // (X,E), whole on every tp rank
  at::Tensor shared_up, shared_gate, shared_down;   // (Xs*Fe,E), (Xs*Fe,E), (E,Xs*Fe); Xs = 0: undefined
  at::Tensor expert_up, expert_gate, expert_down;   // (Xl,Fe,E), (Xl,Fe,E), (Xl,E,Fe)
  // (with tp: this rank's Fe/tp slice, Xs*Fe/tp of the shared ones)
};

struct MoeStash {
  MoeRouting routing;          // of the region's T tokens in sequence order (probs (T,X))
  RowExchange exchange;
  at::Tensor rows;             // (Rl,E) expert inputs, expert-major
  at::Tensor gate, up, act;    // (Rl,Fe) each
  at::Tensor out;              // (R,E) expert outputs in routing order
  at::Tensor shared_gate, shared_up, shared_act;  // (T,Xs*Fe) each
};

class MoeFfn {
 public:
  // ep, tp: the expert and tensor parallelism of the layer (their groups must outlive this
  // object; the default tp: none).
  MoeFfn(const MoeSpec& moe, double aux_coef, ExpertParallel ep,
         TensorParallel tp = TensorParallel(TpConfig{}));
  const ExpertParallel& ep() const { return ep_; }

  // h (...,E) -> y (...,E) (the FFN output, without the residual), both outside the tp
  // region: under sp this rank's (B,S/t,E) sequence shard.
  at::Tensor Forward(const MoeWeights& w, const at::Tensor& h, MoeStash* stash) const;
  // dy (...,E) -> dh (...,E); consumes the stash (pass it with std::move). dloss: the
  // micro-batch's share of the step loss (scales the aux loss gradient).
  at::Tensor Backward(const MoeWeights& w, MoeWeights& dw, const at::Tensor& h,
                      const at::Tensor& dy, double dloss, MoeStash stash) const;

 private:
  MoeSpec moe_;
  double aux_coef_;
  ExpertParallel ep_;
  TensorParallel tp_;
};

}  // namespace meshplan
