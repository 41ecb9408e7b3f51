// Top-k routing with renormalised weights, capacity drops and the router backward (see
// moe_routing.h for the convention).
#include "executor/model/moe_routing.h"

#include <cmath>
#include <utility>

namespace meshplan {

int64_t ExpertCapacity(const MoeSpec& moe, int64_t tokens) {
  if (moe.capacity_factor <= 0) return -1;
  const double share = static_cast<double>(tokens * moe.top_k) / static_cast<double>(moe.experts);
  return static_cast<int64_t>(std::ceil(moe.capacity_factor * share));
}

at::Tensor RouterProbs(const at::Tensor& logits) { return at::softmax(logits.to(at::kFloat), -1); }

MoeRouting Route(at::Tensor probs, const MoeSpec& moe) {
  const int64_t T = probs.size(0), X = moe.experts, k = moe.top_k;
  MoeRouting r;
  r.probs = std::move(probs);  // (T,X) fp32
  const auto [top_p, top_e] = at::topk(r.probs, k, -1, /*largest=*/true, /*sorted=*/true);
  r.experts = top_e;                                      // (T,k)
  r.weights = top_p / top_p.sum(-1, /*keepdim=*/true);    // (T,k)
  // Assignments in drop order: choice-major, token-major (o = j*T + t).
  const at::Tensor order_expert = top_e.t().reshape({-1});  // (k*T)
  const at::Tensor counts = at::bincount(order_expert, {}, X);  // (X) int64, before drops
  r.load = counts.to(at::kFloat).div_(static_cast<double>(T * k));
  const auto sorted = at::sort(order_expert, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  const at::Tensor& sorted_expert = std::get<0>(sorted);  // (k*T)
  const at::Tensor& sorted_order = std::get<1>(sorted);   // o of each, by expert
  at::Tensor row_order = sorted_order;
  at::Tensor kept_counts = counts;
  const int64_t capacity = ExpertCapacity(moe, T);
  if (capacity >= 0) {
    // Position of each sorted assignment inside its expert's run.
    const at::Tensor starts = counts.cumsum(0).sub_(counts);  // (X) exclusive prefix sum
    const at::Tensor position =
        at::arange(k * T, counts.options()).sub_(starts.index_select(0, sorted_expert));
    row_order = sorted_order.masked_select(position.lt(capacity));
    kept_counts = counts.clamp_max(capacity);
  }
  r.row_token = row_order.remainder(T);
  r.row_slot = r.row_token.mul(k).add_(row_order.div(T, "floor"));
  const at::Tensor host = kept_counts.cpu();
  r.rows_per_expert.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + X);
  return r;
}

at::Tensor RouteWeightsBackward(const MoeRouting& r, const at::Tensor& dweights) {
  // w_j = p_j / s, s = sum of the chosen p: dp_j = (dw_j - sum_l dw_l w_l) / s.
  const at::Tensor chosen = r.probs.gather(1, r.experts);  // (T,k)
  const at::Tensor s = chosen.sum(-1, /*keepdim=*/true);
  const at::Tensor dchosen =
      (dweights - (dweights * r.weights).sum(-1, /*keepdim=*/true)).div_(s);
  at::Tensor dprobs = at::zeros_like(r.probs);  // (T,X)
  dprobs.scatter_add_(1, r.experts, dchosen);
  return dprobs;
}

at::Tensor RouterSoftmaxBackward(const at::Tensor& probs, at::Tensor dprobs, const at::Tensor& load,
                                 int64_t tokens, double aux_coef, double dloss) {
  const int64_t X = probs.size(-1);
  if (aux_coef != 0)  // d aux / d p_t,i = coef * X * f_i / T, for every token
    dprobs.add_(load.mul(aux_coef * static_cast<double>(X) * dloss / static_cast<double>(tokens)));
  // Softmax backward: dz = p * (dp - sum_i dp_i p_i).
  const at::Tensor dot = (dprobs * probs).sum(-1, /*keepdim=*/true);
  return dprobs.sub_(dot).mul_(probs);
}

}  // namespace meshplan
