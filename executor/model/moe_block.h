// MoeFfn: the mixture-of-experts FFN of a llama block (planner/model_spec.h MoeSpec;
// planner/cost/block_linears.h lists its matrices) as a mirrored Forward / Backward pair in
// the style of executor/model/ops.h: no autograd; Backward returns d(input) and
// ACCUMULATES (+=) the weight gradients into caller-owned views of a flat gradient buffer.
//   h -> router -> p = softmax (this rank's tokens) -> [tp region: p and h enter it]
//           -> routing (moe_routing.h: top-k, renormalised, capacity) of the region's tokens
//           -> rows (R,E) = h[token of each kept assignment], sorted by expert
//           -> [expert parallel: all-to-all to the owners, executor/parallel/expert_parallel.h]
//           -> per local expert e: SwiGLU  (gate, up = rows W_gate[e]^T, rows W_up[e]^T (Rl,Fe);
//              act = silu(gate) * up; out = act W_down[e]^T (Rl,E))
//           -> [all-to-all back] -> y_t = sum over t's kept rows of w * out
//           + shared experts (Xs of width Fe, every token: one SwiGLU of width Xs*Fe)
//           -> [tp region left: y summed over tp]
// Tensor parallelism (executor/parallel/tensor_parallel.h) makes this one column -> row
// parallel region like the dense FFN: each tp rank holds the Fe/tp slice of every expert
// (shared ones too) and routes the region's tokens identically (under sp the router runs
// on the rank's sequence shard and p is all-gathered like h; routing works in sequence
// order (B,S), so capacity drops are the single process's); y is partial until the region
// is left. The backward's d(p) is partial too (the outputs it reads are), and is summed
// over tp by the region's backward before the aux loss (complete on every rank) joins it.
// Shapes: T = B*S tokens in the region, E hidden, X routed experts, Xl = X/ep local ones,
// k top-k, Fe expert width (Fe/tp with tp), Xs shared experts, R rows this rank routes, Rl
// rows its experts compute.
// Saves for the backward (MoeStash; docs/memory_model.md "MoE"): the router probs (T,X)
// fp32 and the routing indices; the expert inputs rows (Rl,E), gate, up, act (Rl,Fe) and the
// expert outputs back at the source (R,E); the shared experts' gate, up, act (T,Xs*Fe).
// The input h is the caller's (the block's h2, outside the region), not copied.
// The auxiliary load-balancing loss (coefficient aux_coef) adds only gradients, in
// Backward: the logged loss is the language-model loss.
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
