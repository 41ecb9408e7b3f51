// The fused attention core through a local autograd graph (see fused_attention.h).
#include "executor/model/fused_attention.h"

#include <ATen/SDPBackend.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include <optional>
#include <string>
#include <utility>

#include "planner/attention_kernel.h"

namespace meshplan {

bool UseFusedAttention(const at::Device& device, Precision precision) {
  return device.is_cuda() && precision != Precision::kFp32;
}

AttentionImpl ExecutorAttention(const at::Device& device, Precision precision) {
  return UseFusedAttention(device, precision) ? AttentionImpl::kFused : AttentionImpl::kNaive;
}

std::string SdpaKernel(const at::Device& device, Precision precision, const SdpaShape& s) {
  if (!UseFusedAttention(device, precision)) return "";
  // (B,H,S,D) views of (B,S,H,D) storage, as the block passes them (FusedAttentionForward).
  const auto options = at::TensorOptions().device(device).dtype(at::kBFloat16);
  auto input = [&](int64_t heads, int64_t width) {
    return at::empty({s.batch, s.seq, heads, width}, options).transpose(1, 2);
  };
  const at::Tensor q = input(s.heads, s.head_dim), k = input(s.kv_heads, s.head_dim);
  const at::Tensor v = input(s.kv_heads, s.v_head_dim);
  switch (static_cast<at::SDPBackend>(at::_fused_sdp_choice(
      q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true, /*scale=*/std::nullopt,
      /*enable_gqa=*/true))) {
    case at::SDPBackend::flash_attention: return ToString(AttentionKernel::kFlash2);
    case at::SDPBackend::cudnn_attention: return ToString(AttentionKernel::kCudnn);
    case at::SDPBackend::efficient_attention: return "efficient";
    case at::SDPBackend::math: return "math";
    default: return "other";
  }
}

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

}  // namespace meshplan
