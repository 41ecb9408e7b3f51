// Vocabulary-parallel embedding and cross-entropy (see vocab_parallel_ops.h).
#include "executor/parallel/vocab_parallel_ops.h"

#include <vector>

namespace meshplan {

namespace {

// ids - vocab_start with out-of-range ids set to 0, and the in-range mask (both (N)).
struct LocalIds {
  at::Tensor local;   // int64
  at::Tensor inside;  // bool
};

LocalIds ToLocal(const at::Tensor& ids, int64_t vocab_start, int64_t local_vocab) {
  LocalIds out;
  out.local = ids.reshape({-1}) - vocab_start;
  out.inside = out.local.ge(0).logical_and_(out.local.lt(local_vocab));
  out.local.masked_fill_(out.inside.logical_not(), 0);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Embedding

at::Tensor VocabParallelEmbeddingForward(const at::Tensor& ids, const at::Tensor& wte_local,
                                         int64_t vocab_start) {
  const int64_t E = wte_local.size(1);
  const LocalIds l = ToLocal(ids, vocab_start, wte_local.size(0));
  at::Tensor x = at::index_select(wte_local, 0, l.local);  // (N,E)
  x.masked_fill_(l.inside.logical_not().unsqueeze(1), 0.0);
  std::vector<int64_t> shape = ids.sizes().vec();
  shape.push_back(E);
  return x.view(shape);
}

void VocabParallelEmbeddingBackward(const at::Tensor& dx, const at::Tensor& ids,
                                    int64_t vocab_start, at::Tensor& dwte_local) {
  const int64_t E = dwte_local.size(1);
  TORCH_CHECK(dx.is_contiguous(), "VocabParallelEmbeddingBackward: contiguous dx");
  const LocalIds l = ToLocal(ids, vocab_start, dwte_local.size(0));
  const at::Tensor rows = l.inside.nonzero().squeeze(1);  // token indices in range
  dwte_local.index_add_(0, l.local.index_select(0, rows), dx.view({-1, E}).index_select(0, rows));
}

// ---------------------------------------------------------------------------------------
// Cross-entropy

at::Tensor VocabParallelCrossEntropyForward(at::Tensor& logits, const at::Tensor& targets,
                                            int64_t vocab_start, Communicator& tp) {
  TORCH_CHECK(logits.scalar_type() == at::kFloat && logits.dim() == 2 && logits.is_contiguous(),
              "VocabParallelCrossEntropyForward: logits must be contiguous (N,Vl) fp32");
  const int64_t N = logits.size(0);
  // The row maximum over the whole vocabulary: gather every rank's (N) maxima.
  const at::Tensor local_max = std::get<0>(logits.max(1)).contiguous();  // (N)
  at::Tensor maxima = at::empty({tp.size(), N}, logits.options());
  tp.AllGather(local_max, maxima);
  const at::Tensor max = std::get<0>(maxima.max(0));  // (N)
  // stats[0] = sum of exp over the vocabulary, stats[1] = the target's logit (only the
  // rank owning the target contributes it): one all-reduce for both.
  at::Tensor stats = at::empty({2, N}, logits.options());
  const LocalIds t = ToLocal(targets, vocab_start, logits.size(1));
  at::Tensor target_logit = stats[1];
  target_logit.copy_(logits.gather(1, t.local.view({-1, 1})).view({N}));
  target_logit.masked_fill_(t.inside.logical_not(), 0.0);
  logits.sub_(max.unsqueeze(1)).exp_();
  at::Tensor sum = stats[0];
  at::sum_out(sum, logits, {1});
  tp.AllReduceSum(stats);
  logits.div_(sum.unsqueeze(1));  // logits buffer = this rank's columns of the softmax
  return (sum.log() + max - target_logit).mean();
}

at::Tensor VocabParallelCrossEntropyBackward(at::Tensor probs, const at::Tensor& targets,
                                             int64_t vocab_start, double dloss) {
  const int64_t N = probs.size(0);
  const LocalIds t = ToLocal(targets, vocab_start, probs.size(1));
  // probs - onehot: -1 at the target column where this rank owns the target.
  probs.scatter_add_(1, t.local.view({-1, 1}), t.inside.to(probs.scalar_type()).neg_().view({-1, 1}));
  probs.mul_(dloss / static_cast<double>(N));
  return probs;
}

}  // namespace meshplan
