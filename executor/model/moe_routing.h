// MoE routing: which experts each token goes to, with what weight, which assignments a
// capacity drops, and the router's backward (with the auxiliary load-balancing loss).
// Pure functions on ATen tensors; no communication (expert parallelism moves the rows
// these produce: executor/parallel/expert_parallel.h).
//
// Shapes (planner/model_spec.h): T tokens of this rank's micro-batch (B*S), X routed
// experts, k experts per token (top-k), R kept assignments ("rows", <= T*k).
//
// Convention (Mixtral, Qwen3-MoE norm_topk_prob, the planner's MoeSpec):
//   p = softmax(logits) over the X experts, in fp32;  the k largest p_t,i per token
//   (at::topk, largest first);  weights w_t,j = p_t,e_j / sum_j' p_t,e_j'
//   (renormalised over the k chosen: with k = 1 the weight is 1).
// Capacity (capacity_factor cf > 0): each expert takes at most C = ceil(cf * T*k / X)
//   assignments. Drop order: assignments are ranked choice-major, then token-major
//   (every token's first choice, in token order, before any second choice: GShard's
//   priority); an expert keeps its first C and drops the rest. A dropped assignment adds
//   nothing to its token's output and the kept weights are NOT renormalised again.
//   cf == 0: dropless (every assignment is kept).
// Auxiliary load-balancing loss (Switch Transformer / GShard, per micro-batch and layer):
//   aux = coef * X * sum_i f_i * P_i,  f_i = (assignments routed to i before drops) / (T*k),
//   P_i = mean over the T tokens of p_t,i.  f_i is a constant (no gradient); so
//   d aux / d p_t,i = coef * X * f_i / T.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "planner/model_spec.h"

namespace meshplan {

// C = ceil(cf * T*k / X) assignments per expert; -1 when dropless (cf == 0).
int64_t ExpertCapacity(const MoeSpec& moe, int64_t tokens);

struct MoeRouting {
  at::Tensor probs;    // (T,X) fp32 softmax: saved for the router backward
  at::Tensor experts;  // (T,k) int64 chosen experts, largest probability first
  at::Tensor weights;  // (T,k) fp32 renormalised weights (dropped ones included)
  at::Tensor load;     // (X) fp32 f_i, the fraction of the T*k assignments routed to i
  // The kept assignments as rows sorted by expert (within an expert: the drop order).
  at::Tensor row_token;  // (R) int64: the token t of each row
  at::Tensor row_slot;   // (R) int64: t*k + j, its place in the flattened (T,k) choices
  std::vector<int64_t> rows_per_expert;  // (X) on the host: kept rows of each expert
};

// The router's softmax: logits (T,X) (any float dtype) -> p (T,X) fp32.
at::Tensor RouterProbs(const at::Tensor& logits);

// p (T,X) fp32 (RouterProbs) -> the routing above, keeping p. Allocates a few (T*k) index
// tensors; reads rows_per_expert to the host (a device sync on CUDA).
MoeRouting Route(at::Tensor probs, const MoeSpec& moe);

// d(loss)/d(p) (T,X) fp32 through the top-k weights alone, from dweights (T,k) fp32 =
// d(loss)/d(weights) (zero for dropped assignments); linear in dweights.
at::Tensor RouteWeightsBackward(const MoeRouting& routing, const at::Tensor& dweights);

// d(loss)/d(logits) (T',X) fp32 of T' of the routed tokens (all of them, or a tensor-parallel
// shard's): probs and dprobs (T',X) fp32 those tokens' rows of p and d(loss)/d(p), load the
// routing's f_i, tokens the T the routing saw. Adds the aux loss of coefficient aux_coef
// scaled by dloss (the micro-batch's share of the step loss); dprobs is updated in place.
at::Tensor RouterSoftmaxBackward(const at::Tensor& probs, at::Tensor dprobs, const at::Tensor& load,
                                 int64_t tokens, double aux_coef, double dloss);

}  // namespace meshplan
