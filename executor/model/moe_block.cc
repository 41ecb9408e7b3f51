// The MoE FFN forward and backward (see moe_block.h for the dataflow and what is saved).
#include "executor/model/moe_block.h"

#include <utility>

#include "executor/model/ops.h"

namespace meshplan {

namespace {

// Calls body(e, first_row, rows) for each local expert with rows (skipping empty ones).
template <typename Body>
void ForEachExpert(const std::vector<int64_t>& counts, Body body) {
  int64_t first = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    if (counts[e] > 0) body(static_cast<int64_t>(e), first, counts[e]);
    first += counts[e];
  }
}

// The routing weight of each row (R,1), in the activation dtype.
at::Tensor RowWeights(const MoeRouting& r, const at::Tensor& like) {
  return r.weights.reshape({-1}).index_select(0, r.row_slot).to(like.scalar_type()).unsqueeze(1);
}

}  // namespace

MoeFfn::MoeFfn(const MoeSpec& moe, double aux_coef, ExpertParallel ep, TensorParallel tp)
    : moe_(moe), aux_coef_(aux_coef), ep_(ep), tp_(tp) {}

at::Tensor MoeFfn::Forward(const MoeWeights& w, const at::Tensor& h_in, MoeStash* stash) const {
  MoeStash& s = *stash;
  s = MoeStash{};
  const int64_t E = h_in.size(-1), X = moe_.experts;
  // The router on this rank's tokens; p and h enter the tp region (sp: all-gathered,
  // chunk-major (t,B,S/t,...)); routing reads p in sequence order.
  s.routing = Route(
      tp_.RegionToSequence(tp_.EnterRegion(RouterProbs(LinearForward(h_in, w.router))))
          .reshape({-1, X}),
      moe_);  // the logits and the gathered p are freed
  MoeRouting& r = s.routing;
  const at::Tensor region = tp_.EnterRegion(h_in);  // sp: (t,B,S/t,E), freed at the end
  const at::Tensor h = region.reshape({-1, E});     // (T,E), a view
  if (tp_.sp()) {  // each row's token: its sequence-order index -> its place in the region
    const at::Tensor place =  // (t,B,S/t): each token's place in the region
        at::arange(h.size(0), r.row_token.options()).view(region.sizes().slice(0, 3));
    r.row_token = tp_.RegionToSequence(place).reshape({-1}).index_select(0, r.row_token);
  }
  s.exchange = ep_.Plan(r.rows_per_expert, h.device());
  s.rows = ep_.Dispatch(s.exchange, h.index_select(0, r.row_token));  // (Rl,E)
  const int64_t Rl = s.rows.size(0), Fe = w.expert_gate.size(1);
  s.gate = at::empty({Rl, Fe}, h.options());
  s.up = at::empty({Rl, Fe}, h.options());
  ForEachExpert(s.exchange.local_counts, [&](int64_t e, int64_t first, int64_t n) {
    const at::Tensor x = s.rows.narrow(0, first, n);
    at::Tensor gate = s.gate.narrow(0, first, n), up = s.up.narrow(0, first, n);
    at::mm_out(gate, x, w.expert_gate[e].t());
    at::mm_out(up, x, w.expert_up[e].t());
  });
  s.act = SwiGLUForward(s.gate, s.up);  // (Rl,Fe)
  {
    at::Tensor out = at::empty({Rl, E}, h.options());  // freed once combined
    ForEachExpert(s.exchange.local_counts, [&](int64_t e, int64_t first, int64_t n) {
      at::Tensor o = out.narrow(0, first, n);
      at::mm_out(o, s.act.narrow(0, first, n), w.expert_down[e].t());
    });
    s.out = ep_.Combine(s.exchange, out);  // (R,E)
  }
  at::Tensor y;  // (T,E), partial over tp
  if (moe_.shared_experts > 0) {
    s.shared_gate = LinearForward(h, w.shared_gate);
    s.shared_up = LinearForward(h, w.shared_up);
    s.shared_act = SwiGLUForward(s.shared_gate, s.shared_up);
    y = LinearForward(s.shared_act, w.shared_down);
  } else {
    y = at::zeros_like(h);
  }
  y.index_add_(0, r.row_token, s.out * RowWeights(r, h));
  return tp_.LeaveRegion(y.view(region.sizes())).view(h_in.sizes());
}

at::Tensor MoeFfn::Backward(const MoeWeights& w, MoeWeights& dw, const at::Tensor& h_in,
                            const at::Tensor& dy_in, double dloss, MoeStash s) const {
  const int64_t E = h_in.size(-1), X = moe_.experts, k = moe_.top_k;
  const MoeRouting& r = s.routing;
  const int64_t T = r.probs.size(0);  // the region's tokens
  at::Tensor dy_region = tp_.LeaveRegionBackward(dy_in);  // sp: all-gathered (t,B,S/t,E)
  const std::vector<int64_t> region_shape = dy_region.sizes().vec();
  at::Tensor dy = dy_region.reshape({-1, E});  // (T,E)
  dy_region.reset();
  at::Tensor dout = dy.index_select(0, r.row_token);  // (R,E) dy of each row's token
  // d(loss)/d(w) of each kept assignment: <dy_t, out_row> (a batched dot: no (R,E)
  // temporary; partial over tp, as out is); dropped ones stay 0.
  at::Tensor dweights = at::zeros({T * k}, dy.options().dtype(at::kFloat));
  const int64_t R = dout.size(0);
  dweights.index_copy_(
      0, r.row_slot, at::bmm(dout.view({R, 1, E}), s.out.view({R, E, 1})).view({R}).to(at::kFloat));
  s.out.reset();
  dout.mul_(RowWeights(r, dy));
  dout = ep_.Dispatch(s.exchange, dout);  // (Rl,E) at the experts' ranks
  // Routed experts, backward. Alive at once, at most: dout + dact, then dact + dgate + dup,
  // then dgate + dup + drows (planner/cost/activation_memory.h, MoE FFN backward).
  const int64_t Rl = s.rows.size(0), Fe = s.gate.size(1);
  at::Tensor dact = at::empty({Rl, Fe}, dy.options());
  ForEachExpert(s.exchange.local_counts, [&](int64_t e, int64_t first, int64_t n) {
    const at::Tensor d = dout.narrow(0, first, n);
    at::Tensor da = dact.narrow(0, first, n);
    at::mm_out(da, d, w.expert_down[e]);
    dw.expert_down[e].addmm_(d.t(), s.act.narrow(0, first, n));
  });
  dout.reset();
  s.act.reset();
  SwiGLUGrads g = SwiGLUBackward(dact, s.gate, s.up);
  dact.reset();
  s.gate.reset();
  s.up.reset();
  at::Tensor drows = at::empty({Rl, E}, dy.options());
  ForEachExpert(s.exchange.local_counts, [&](int64_t e, int64_t first, int64_t n) {
    const at::Tensor x = s.rows.narrow(0, first, n);
    const at::Tensor dg = g.dgate.narrow(0, first, n), du = g.dup.narrow(0, first, n);
    at::Tensor dx = drows.narrow(0, first, n);
    at::mm_out(dx, dg, w.expert_gate[e]);
    dx.addmm_(du, w.expert_up[e]);
    dw.expert_gate[e].addmm_(dg.t(), x);
    dw.expert_up[e].addmm_(du.t(), x);
  });
  g = SwiGLUGrads{};
  s.rows.reset();
  // The routed rows back to their tokens, then the shared experts' backward into dh
  // (T,E), partial over tp.
  at::Tensor dh = at::zeros_like(dy);
  dh.index_add_(0, r.row_token, ep_.Combine(s.exchange, drows));
  drows.reset();
  if (moe_.shared_experts > 0) {
    at::Tensor dsact = LinearBackward(dy, s.shared_act, w.shared_down, dw.shared_down);
    s.shared_act.reset();
    SwiGLUGrads sg = SwiGLUBackward(dsact, s.shared_gate, s.shared_up);
    dsact.reset();
    s.shared_gate.reset();
    s.shared_up.reset();
    const at::Tensor h = tp_.EnterRegion(h_in).reshape({-1, E});  // sp: all-gathered again
    LinearBackward(sg.dgate, h, w.shared_gate, dw.shared_gate, dh);
    LinearBackward(sg.dup, h, w.shared_up, dw.shared_up, dh);
  }
  dy.reset();
  dh = tp_.EnterRegionBackward(dh.view(region_shape)).view(h_in.sizes());  // summed over tp
  // Router, backward: d(p) through the weights is partial over tp (it read the partial
  // outputs): the region's backward sums it (sp: this rank's tokens' rows); then the aux
  // loss, complete on every rank, and the softmax on this rank's tokens.
  at::Tensor dprobs = RouteWeightsBackward(r, dweights.view({T, k}));  // (T,X) sequence order
  dweights.reset();
  at::Tensor probs = r.probs;  // this rank's tokens' rows
  if (tp_.sp()) {
    const int64_t B = h_in.size(0), t = tp_.size();
    dprobs = tp_.SequenceToRegion(dprobs.view({B, t, -1, X}));  // (t,B,S/t,X)
    probs = r.probs.view({B, t, -1, X}).select(1, tp_.rank());  // (B,S/t,X)
  }
  dprobs = tp_.EnterRegionBackward(std::move(dprobs));
  const at::Tensor dlogits =
      RouterSoftmaxBackward(probs, std::move(dprobs), r.load, T, aux_coef_, dloss)
          .to(dh.scalar_type())
          .view({-1, X});
  const at::Tensor h = h_in.reshape({-1, E});
  at::Tensor dh_flat = dh.view({-1, E});
  tp_.AccumulateReplicatedGrad(dw.router, [&](at::Tensor& target) {
    LinearBackward(dlogits, h, w.router, target, dh_flat);  // dh += dlogits @ router
  });
  return dh;
}

}  // namespace meshplan
