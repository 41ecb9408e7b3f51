// The fused attention core through a local autograd graph (see fused_attention.h).
#include "executor/model/fused_attention.h"

#include <torch/version.h>

#include <optional>
#include <stdexcept>
#include <utility>

#define MESHPLAN_HAS_SDPA_GQA \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5))
#if MESHPLAN_HAS_SDPA_GQA
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#endif

namespace meshplan {

bool FusedAttentionBuiltIn() { return MESHPLAN_HAS_SDPA_GQA; }

bool UseFusedAttention(const at::Device& device, Precision precision) {
  return FusedAttentionBuiltIn() && device.is_cuda() && precision != Precision::kFp32;
}

AttentionImpl ExecutorAttention(const at::Device& device, Precision precision) {
  return UseFusedAttention(device, precision) ? AttentionImpl::kFused : AttentionImpl::kNaive;
}

#if MESHPLAN_HAS_SDPA_GQA

at::Tensor FusedAttentionForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 FusedAttentionGraph* graph) {
  c10::AutoGradMode grad_mode(true);
  graph->q = q.detach().requires_grad_(true);
  graph->k = k.detach().requires_grad_(true);
  graph->v = v.detach().requires_grad_(true);
  // No mask tensor (flash takes none): is_causal; K/V heads shared by their query heads.
  graph->out = at::scaled_dot_product_attention(graph->q, graph->k, graph->v, /*attn_mask=*/{},
                                                /*dropout_p=*/0.0, /*is_causal=*/true,
                                                /*scale=*/std::nullopt, /*enable_gqa=*/true);
  return graph->out.detach();
}

AttentionGrads FusedAttentionBackward(const at::Tensor& dout, FusedAttentionGraph graph) {
  std::vector<at::Tensor> grads = torch::autograd::grad({graph.out}, {graph.q, graph.k, graph.v},
                                                        {dout});
  graph = FusedAttentionGraph{};  // frees the graph (the logsumexp) before the caller goes on
  return {std::move(grads[0]), std::move(grads[1]), std::move(grads[2])};
}

#else

at::Tensor FusedAttentionForward(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                 FusedAttentionGraph*) {
  throw std::logic_error("fused attention needs LibTorch 2.5 or later (this one is " TORCH_VERSION ")");
}

AttentionGrads FusedAttentionBackward(const at::Tensor&, FusedAttentionGraph) {
  throw std::logic_error("fused attention needs LibTorch 2.5 or later (this one is " TORCH_VERSION ")");
}

#endif

}  // namespace meshplan
