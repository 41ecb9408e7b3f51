// Ring attention forward and backward (see ring_attention.h for the schedule, the visible
// sub-blocks and the memory contract). Grouped-query layout as attention_ops.cc: q
// (B,H,Sc,D) is viewed as (B,K,G*R,D) for R query rows per head, so one batched matmul per
// kv head covers its G query heads; per-row state (B,H,Sc) is viewed as (B,K,G,Sc).
#include "executor/parallel/ring_attention.h"

#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

namespace meshplan {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The visible part of (local queries) x (K/V block of rank j) on rank r: query rows
// [row0, row0 + rows) of every head, keys [key0, key0 + keys) of the block.
struct VisibleBlock {
  int64_t row0, rows, key0, keys;
  bool causal;  // the local block: apply the causal mask
};

VisibleBlock Visible(int r, int j, int64_t Sc) {
  const int64_t c = Sc / 2;
  if (j == r) return {0, Sc, 0, Sc, true};
  if (j < r) return {0, Sc, 0, c, false};  // chunk j precedes both local chunks
  return {c, c, 0, Sc, false};             // only chunk 2cp-1-r follows both chunks of j
}

// (B,H,Sc,X) -> rows [c, Sc) of every head as a contiguous (B,K,G*c,X) copy.
at::Tensor LateRows(const at::Tensor& t, int64_t K) {
  const int64_t B = t.size(0), H = t.size(1), Sc = t.size(2), c = Sc / 2;
  const int64_t X = t.dim() == 4 ? t.size(3) : 1;
  return t.reshape({B, K, H / K, Sc, X}).narrow(3, c, c).reshape({B, K, H / K * c, X});
}

// Posts the exchange of one step: send `send` (in order) to `next`, receive into fresh
// tensors shaped like `like` from `prev`. The handles must be waited before the received
// tensors are read and before the sent ones are released.
struct Exchange {
  std::vector<std::unique_ptr<CommHandle>> handles;
  std::vector<at::Tensor> sent;  // kept alive until the sends complete
  std::vector<at::Tensor> received;
  void Wait() {
    for (auto& h : handles) h->Wait();
    handles.clear();
    sent.clear();
  }
};

Exchange PostExchange(Communicator& cp, const std::vector<at::Tensor>& send, int next,
                      int prev) {
  Exchange ex;
  ex.sent = send;
  for (const at::Tensor& t : send) ex.handles.push_back(cp.SendAsync(t, next));
  for (const at::Tensor& t : send) {
    ex.received.push_back(at::empty_like(t));
    ex.handles.push_back(cp.RecvAsync(ex.received.back(), prev));
  }
  return ex;
}

// Scores of R query rows (grouped (B,K,G*R,D)) against n keys (B,K,n,D), scaled, fp32,
// with the causal mask (R,n) applied when given. Returns (B,K,G*R,n).
at::Tensor Scores(const at::Tensor& q_rows, const at::Tensor& k_blk, const at::Tensor& mask,
                  int64_t G) {
  const int64_t D = q_rows.size(3);
  at::Tensor s = at::matmul(q_rows, k_blk.transpose(-2, -1));
  if (s.scalar_type() != at::kFloat) s = s.to(at::kFloat);
  s.mul_(1.0 / std::sqrt(static_cast<double>(D)));
  if (mask.defined()) {
    const int64_t B = s.size(0), K = s.size(1), R = s.size(2) / G, n = s.size(3);
    s.view({B, K, G, R, n}).masked_fill_(mask, -kInf);
  }
  return s;
}

at::Tensor AsDtypeOf(const at::Tensor& t, const at::Tensor& like) {
  return t.scalar_type() == like.scalar_type() ? t : t.to(like.scalar_type());
}

// Online-softmax update of R rows with one visible sub-block. m, l (B,K,G,R) fp32 and
// acc (B,K,G,R,D) fp32 are views into the running state, updated in place.
void ForwardBlock(const at::Tensor& q_rows, const at::Tensor& k_blk, const at::Tensor& v_blk,
                  const at::Tensor& mask, at::Tensor m, at::Tensor l, at::Tensor acc) {
  const int64_t B = m.size(0), K = m.size(1), G = m.size(2), R = m.size(3);
  const int64_t n = k_blk.size(2), D = acc.size(4);
  at::Tensor s = Scores(q_rows, k_blk, mask, G);  // (B,K,G*R,n)
  at::Tensor s5 = s.view({B, K, G, R, n});
  const at::Tensor m_new = at::maximum(m, std::get<0>(s5.max(-1)));  // finite: see header
  const at::Tensor alpha = at::sub(m, m_new).exp_();                // rescales the old state
  s5.sub_(m_new.unsqueeze(-1)).exp_();                              // p, unnormalised
  l.mul_(alpha).add_(s5.sum(-1));
  acc.mul_(alpha.unsqueeze(-1));
  acc.add_(at::matmul(AsDtypeOf(s, v_blk), v_blk).view({B, K, G, R, D}));
  m.copy_(m_new);
}

// Partial gradients of one visible sub-block: dq rows (B,K,G,R,D) fp32 view += ...;
// returns dk, dv of the n visible keys (B,K,n,D) (new tensors, act dtype).
struct KeyGrads {
  at::Tensor dk, dv;
};
KeyGrads BackwardBlock(const at::Tensor& q_rows, const at::Tensor& dout_rows,
                       const at::Tensor& lse_rows, const at::Tensor& delta_rows,
                       const at::Tensor& k_blk, const at::Tensor& v_blk, const at::Tensor& mask,
                       int64_t G, at::Tensor dq_rows) {
  const int64_t B = dq_rows.size(0), K = dq_rows.size(1), R = dq_rows.size(3);
  const int64_t D = dq_rows.size(4);
  // p = exp(s - lse): the probabilities of the full-sequence softmax (masked entries 0).
  at::Tensor p = Scores(q_rows, k_blk, mask, G);  // (B,K,G*R,n) fp32
  p.sub_(lse_rows).exp_();
  KeyGrads g;
  g.dv = at::matmul(AsDtypeOf(p, dout_rows).transpose(-2, -1), dout_rows);  // sums G heads
  // dscores = p * (dp - delta), dp = dout v^T; scaled by 1/sqrt(D) for dq and dk.
  at::Tensor ds = at::matmul(dout_rows, v_blk.transpose(-2, -1));
  if (ds.scalar_type() != at::kFloat) ds = ds.to(at::kFloat);
  ds.sub_(delta_rows).mul_(p);
  p.reset();
  ds.mul_(1.0 / std::sqrt(static_cast<double>(D)));
  const at::Tensor ds_act = AsDtypeOf(ds, q_rows);
  dq_rows.add_(at::matmul(ds_act, k_blk).view({B, K, G, R, D}));
  g.dk = at::matmul(ds_act.transpose(-2, -1), q_rows);
  return g;
}

void CheckShapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const at::Tensor& causal_mask) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes(),
              "ring attention: q (B,H,Sc,D), k and v (B,K,Sc,D)");
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(),
              "ring attention: q, k, v must be contiguous");
  TORCH_CHECK(q.size(1) % k.size(1) == 0 && q.size(2) == k.size(2) && q.size(2) % 2 == 0,
              "ring attention: H % K == 0 and an even local sequence Sc");
  TORCH_CHECK(causal_mask.dim() == 2 && causal_mask.size(0) == q.size(2) &&
                  causal_mask.size(1) == q.size(2),
              "ring attention: causal_mask must be (Sc,Sc)");
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Forward

at::Tensor RingAttentionForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& causal_mask, Communicator& cp,
                                at::Tensor* lse) {
  CheckShapes(q, k, v, causal_mask);
  const int64_t B = q.size(0), H = q.size(1), Sc = q.size(2), D = q.size(3), K = k.size(1);
  const int64_t G = H / K;
  const int r = cp.rank(), n = cp.size(), next = (r + 1) % n, prev = (r + n - 1) % n;
  const at::TensorOptions f32 = q.options().dtype(at::kFloat);
  at::Tensor m = at::full({B, K, G, Sc}, -kInf, f32);  // running max, then lse
  at::Tensor l = at::zeros({B, K, G, Sc}, f32);        // running sum of exp(s - m)
  at::Tensor acc = at::zeros({B, K, G, Sc, D}, f32);   // running sum of exp(s - m) v
  const at::Tensor q_all = q.view({B, K, G * Sc, D});
  const at::Tensor q_late = n > 1 ? LateRows(q, K) : at::Tensor();

  at::Tensor k_cur = k, v_cur = v;
  for (int s = 0; s < n; ++s) {
    const int j = (r - s + n) % n;
    Exchange ex;
    if (s + 1 < n) ex = PostExchange(cp, {k_cur, v_cur}, next, prev);  // overlaps the compute
    const VisibleBlock vb = Visible(r, j, Sc);
    ForwardBlock(vb.row0 == 0 ? q_all : q_late, k_cur.narrow(2, vb.key0, vb.keys),
                 v_cur.narrow(2, vb.key0, vb.keys), vb.causal ? causal_mask : at::Tensor(),
                 m.narrow(3, vb.row0, vb.rows), l.narrow(3, vb.row0, vb.rows),
                 acc.narrow(3, vb.row0, vb.rows));
    ex.Wait();
    if (s + 1 < n) {
      k_cur = std::move(ex.received[0]);
      v_cur = std::move(ex.received[1]);
    }
  }
  acc.div_(l.unsqueeze(-1));
  *lse = m.add_(l.log_()).view({B, H, Sc});
  return AsDtypeOf(acc.view({B, H, Sc, D}), q);
}

// ---------------------------------------------------------------------------------------
// Backward

AttentionGrads RingAttentionBackward(const at::Tensor& dout, const at::Tensor& q,
                                     const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& out, const at::Tensor& lse,
                                     const at::Tensor& causal_mask, Communicator& cp) {
  CheckShapes(q, k, v, causal_mask);
  TORCH_CHECK(dout.is_contiguous() && dout.sizes() == q.sizes(),
              "RingAttentionBackward: dout must be contiguous (B,H,Sc,D)");
  const int64_t B = q.size(0), H = q.size(1), Sc = q.size(2), D = q.size(3), K = k.size(1);
  const int64_t G = H / K;
  const int r = cp.rank(), n = cp.size(), next = (r + 1) % n, prev = (r + n - 1) % n;
  const at::TensorOptions f32 = q.options().dtype(at::kFloat);

  // delta = rowsum(dout * out) (B,H,Sc): the softmax-backward term sum_j p_j dp_j.
  const at::Tensor delta = at::sum(at::mul(dout, out), at::IntArrayRef{-1}, false, at::kFloat);
  at::Tensor dq = at::zeros({B, K, G, Sc, D}, f32);
  // The query side, grouped: every row, and the late rows (chunk 2cp-1-r) copied.
  struct Rows {
    at::Tensor q, dout, lse, delta;
  };
  const Rows all{q.view({B, K, G * Sc, D}), dout.view({B, K, G * Sc, D}),
                 lse.reshape({B, K, G * Sc, 1}), delta.view({B, K, G * Sc, 1})};
  Rows late;
  if (n > 1) late = {LateRows(q, K), LateRows(dout, K), LateRows(lse, K), LateRows(delta, K)};

  at::Tensor k_cur = k, v_cur = v;
  at::Tensor dk_acc, dv_acc;  // the accumulator of the current block j (fp32)
  Exchange acc_ex;            // accumulators: the one sent last step, the next one coming
  for (int s = 0; s < n; ++s) {
    const int j = (r - s + n) % n;
    Exchange kv_ex;
    if (s + 1 < n) kv_ex = PostExchange(cp, {k_cur, v_cur}, next, prev);
    const VisibleBlock vb = Visible(r, j, Sc);
    const Rows& rows = vb.row0 == 0 ? all : late;
    KeyGrads part = BackwardBlock(rows.q, rows.dout, rows.lse, rows.delta,
                                  k_cur.narrow(2, vb.key0, vb.keys),
                                  v_cur.narrow(2, vb.key0, vb.keys),
                                  vb.causal ? causal_mask : at::Tensor(), G,
                                  dq.narrow(3, vb.row0, vb.rows));
    if (s == 0) {  // the local block covers every key: the accumulator starts here
      dk_acc = part.dk.to(at::kFloat);
      dv_acc = part.dv.to(at::kFloat);
    } else {  // the accumulator of block j arrived from r-1 during the compute
      acc_ex.Wait();  // also completes last step's sends: their buffers are released
      dk_acc = std::move(acc_ex.received[0]);
      dv_acc = std::move(acc_ex.received[1]);
      dk_acc.narrow(2, vb.key0, vb.keys).add_(part.dk);
      dv_acc.narrow(2, vb.key0, vb.keys).add_(part.dv);
    }
    part = KeyGrads{};
    if (n == 1) break;  // no ring: the local accumulator is already complete
    // Pass block j's accumulator on; after the last step it reaches its home rank j.
    acc_ex = PostExchange(cp, {dk_acc, dv_acc}, next, prev);
    dk_acc.reset();
    dv_acc.reset();
    kv_ex.Wait();
    if (s + 1 < n) {
      k_cur = std::move(kv_ex.received[0]);
      v_cur = std::move(kv_ex.received[1]);
    }
  }
  if (n > 1) {
    acc_ex.Wait();  // this rank's own dK/dV, complete
    dk_acc = std::move(acc_ex.received[0]);
    dv_acc = std::move(acc_ex.received[1]);
  }
  AttentionGrads grads;
  grads.dk = AsDtypeOf(dk_acc, k);
  grads.dv = AsDtypeOf(dv_acc, v);
  grads.dq = AsDtypeOf(dq.view({B, H, Sc, D}), q);
  return grads;
}

}  // namespace meshplan
