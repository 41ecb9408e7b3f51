// MoeFfn: the mixture-of-experts FFN of a llama block (planner/model_spec.h MoeSpec;
// planner/cost/block_linears.h lists its matrices) as a mirrored Forward / Backward pair in
// the style of executor/model/ops.h: no autograd; Backward returns d(input) and
// ACCUMULATES (+=) the weight gradients into caller-owned views of a flat gradient buffer.
//   h (T,E) -> router -> routing (moe_routing.h: softmax, top-k, renormalised, capacity)
//           -> rows (R,E) = h[token of each kept assignment], sorted by expert
//           -> [expert parallel: all-to-all to the owners, executor/parallel/expert_parallel.h]
//           -> per local expert e: SwiGLU  (gate, up = rows W_gate[e]^T, rows W_up[e]^T (Rl,Fe);
//              act = silu(gate) * up; out = act W_down[e]^T (Rl,E))
//           -> [all-to-all back] -> y_t = sum over t's kept rows of w * out
//           + shared experts (Xs of width Fe, every token: one SwiGLU of width Xs*Fe).
// Shapes: T = B*S tokens, E hidden, X routed experts, Xl = X/ep local ones, k top-k,
// Fe expert width, Xs shared experts, R rows this rank routes, Rl rows its experts compute.
// Saves for the backward (MoeStash; docs/memory_model.md "MoE"): the router probs (T,X)
// fp32 and the routing indices; the expert inputs rows (Rl,E), gate, up, act (Rl,Fe) and the
// expert outputs back at the source (R,E); the shared experts' gate, up, act (T,Xs*Fe).
// The input h is the caller's (the block's h2), not copied.
// The auxiliary load-balancing loss (coefficient aux_coef) adds only gradients, in
// Backward: the logged loss is the language-model loss.
// Not thread-safe; with expert parallelism every rank of the ep group calls both in the
// same order (the all-to-alls are collective).
#pragma once

#include <ATen/ATen.h>

#include "executor/model/moe_routing.h"
#include "executor/parallel/expert_parallel.h"
#include "planner/model_spec.h"

namespace meshplan {

// Views of one MoE layer's weights (or gradients: same layout).
struct MoeWeights {
  at::Tensor router;                                // (X,E)
  at::Tensor shared_up, shared_gate, shared_down;   // (Xs*Fe,E), (Xs*Fe,E), (E,Xs*Fe); Xs = 0: undefined
  at::Tensor expert_up, expert_gate, expert_down;   // (Xl,Fe,E), (Xl,Fe,E), (Xl,E,Fe)
};

struct MoeStash {
  MoeRouting routing;
  RowExchange exchange;
  at::Tensor rows;             // (Rl,E) expert inputs, expert-major
  at::Tensor gate, up, act;    // (Rl,Fe) each
  at::Tensor out;              // (R,E) expert outputs in routing order
  at::Tensor shared_gate, shared_up, shared_act;  // (T,Xs*Fe) each
};

class MoeFfn {
 public:
  // ep: the expert parallelism of the layer (its group must outlive this object).
  MoeFfn(const MoeSpec& moe, double aux_coef, ExpertParallel ep);
  const ExpertParallel& ep() const { return ep_; }

  // h (...,E) -> y (...,E) (the FFN output, without the residual).
  at::Tensor Forward(const MoeWeights& w, const at::Tensor& h, MoeStash* stash) const;
  // dy (...,E) -> dh (...,E); consumes the stash (pass it with std::move). dloss: the
  // micro-batch's share of the step loss (scales the aux loss gradient).
  at::Tensor Backward(const MoeWeights& w, MoeWeights& dw, const at::Tensor& h,
                      const at::Tensor& dy, double dloss, MoeStash stash) const;

 private:
  MoeSpec moe_;
  double aux_coef_;
  ExpertParallel ep_;
};

}  // namespace meshplan
