// Vocabulary-parallel embedding and cross-entropy (Megatron): tp rank i holds the vocab
// rows [vocab_start, vocab_start + V/t) of wte (and of the untied lm_head), so neither op
// ever holds a full (N,V) or (V,E) tensor. Same conventions and memory-contract wording as
// executor/model/ops.h; N = the tokens of the call, Vl = V/t.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "executor/comm/communicator.h"

namespace meshplan {

// ---------------------------------------------------------------------------------------
// Embedding, this rank's part: x = wte_local[ids - vocab_start] for ids in the range, 0
// elsewhere. The sum over the tp ranks (all-reduce, or a reduce-scatter along the sequence
// under sp: the caller's) is the full embedding.
//   ids (...) int64 (any shape, e.g. (B,S) or chunk-major (t,B,S/t)), wte_local (Vl,E)
//   -> x (...,E) act.
//   saves: ids (the caller's).   allocates: x; temporaries (N) int64 and bool.
at::Tensor VocabParallelEmbeddingForward(const at::Tensor& ids, const at::Tensor& wte_local,
                                         int64_t vocab_start);
// dwte_local (Vl,E) += scatter of the rows of dx (...,E) whose ids fall in the range.
// dx must be the full gradient of every token (all-gathered under sp), same order as ids.
// allocates: the in-range rows of dx, (n_in,E) with n_in <= N (about N/t), temporary.
void VocabParallelEmbeddingBackward(const at::Tensor& dx, const at::Tensor& ids,
                                    int64_t vocab_start, at::Tensor& dwte_local);

// ---------------------------------------------------------------------------------------
// Cross-entropy over a vocabulary split across the tp group, mean over the N tokens, fp32.
//   logits (N,Vl) fp32 (this rank's lm_head columns; CONSUMED: overwritten in place with
//   this rank's part of the softmax), targets (N) int64 (global ids, same on every rank)
//   -> loss (scalar fp32), equal on every tp rank.
// Communication (tp): all-gather of the (N) row maxima into (t,N) (the Communicator has
// only sum reductions), then one all-reduce of a (2,N) buffer (sum of exp, target logit).
//   saves: probs (N,Vl) fp32 = the logits buffer itself, and targets (not copied).
//   allocates: nothing of size (N,Vl); (t,N) maxima, (2,N) sums, (N) temporaries.
at::Tensor VocabParallelCrossEntropyForward(at::Tensor& logits, const at::Tensor& targets,
                                            int64_t vocab_start, Communicator& tp);
// dlogits = (probs - onehot(targets)) * dloss / N for this rank's columns, IN PLACE in the
// probs buffer, which is returned. No communication.
at::Tensor VocabParallelCrossEntropyBackward(at::Tensor probs, const at::Tensor& targets,
                                             int64_t vocab_start, double dloss);

}  // namespace meshplan
