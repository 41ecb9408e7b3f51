// One forward + backward of the executor's LlamaModel over whole (unsharded, tp = 1) flat
// parameter groups on one process: the loss, the logits and every group's gradient. Shared
// by the model tests (against autograd) and tests/reference/ (against Hugging Face).
// Shapes: ids, targets (B,S) int64; flats[g] the padded flat buffer of layout.groups[g].
#pragma once

#include <ATen/ATen.h>

#include <utility>
#include <vector>

#include "executor/model/llama_model.h"
#include "executor/model/ops.h"
#include "executor/model/param_layout.h"

namespace meshplan::test {

struct ModelPass {
  double loss = 0;                 // mean cross-entropy over the B*S tokens
  at::Tensor logits;               // (B*S,V): lm_head applied to the final norm's output
  std::vector<at::Tensor> grads;   // per group, padded: d(dloss * loss)/d(flats[g])
  std::vector<BlockStash> kept;    // with keep_stashes: what each block's forward saved
};

// dloss scales the loss gradient. keep_stashes: copy each block's stash into ModelPass::kept
// before its backward consumes it (the recompute tests look at what was saved).
inline ModelPass RunModelPass(const ModelSpec& m, const ParamLayout& layout,
                              const std::vector<at::Tensor>& flats, const at::Tensor& ids,
                              const at::Tensor& targets, Recompute recompute, double dloss,
                              AttentionImpl attention = AttentionImpl::kNaive,
                              bool keep_stashes = false) {
  const LlamaModel model(m, ids.size(1), {}, {}, attention);
  ModelPass r;
  for (const ParamGroup& g : layout.groups) r.grads.push_back(at::zeros({g.padded_numel}));
  const int emb = layout.embedding_group, head = layout.head_group;
  const ParamSlot& wte = layout.groups[emb].slot("wte");
  const ParamGroup& hg = layout.groups[head];
  at::Tensor x = model.EmbeddingForward(ids, SlotView(flats[emb], wte));
  std::vector<BlockStash> stash(static_cast<size_t>(layout.num_blocks));
  for (int64_t i = 0; i < layout.num_blocks; ++i) {
    const int g = layout.first_block_group + int(i);
    x = model.BlockForward(BlockViews(layout.groups[g], flats[g]), x, recompute, &stash[i]);
    if (keep_stashes) r.kept.push_back(stash[i]);
  }
  const at::Tensor lm = m.tied_embeddings ? SlotView(flats[emb], wte)
                                          : SlotView(flats[head], hg.slot("lm_head"));
  at::Tensor dlm = m.tied_embeddings ? SlotView(r.grads[emb], wte)
                                     : SlotView(r.grads[head], hg.slot("lm_head"));
  const at::Tensor fnorm = SlotView(flats[head], hg.slot("final_norm"));
  at::Tensor dfnorm = SlotView(r.grads[head], hg.slot("final_norm"));
  HeadStash hs;
  r.loss = model.HeadForward(fnorm, lm, x, targets, &hs).item<double>();
  r.logits = LinearForward(hs.hf.reshape({-1, m.hidden}).contiguous(), lm);
  at::Tensor dx = model.HeadBackward(fnorm, lm, dfnorm, dlm, dloss, std::move(hs));
  for (int64_t i = layout.num_blocks - 1; i >= 0; --i) {
    const int g = layout.first_block_group + int(i);
    BlockWeights dw = BlockViews(layout.groups[g], r.grads[g]);
    dx = model.BlockBackward(BlockViews(layout.groups[g], flats[g]), dw, std::move(dx),
                             std::move(stash[i]));
  }
  at::Tensor dwte = SlotView(r.grads[emb], wte);
  model.EmbeddingBackward(dx, ids, dwte);
  return r;
}

}  // namespace meshplan::test
