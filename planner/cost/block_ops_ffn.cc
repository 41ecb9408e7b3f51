// The FFN half of a block as BlockOpsBuilder lowers it (block_ops_builder.h): the dense MLP
// (GeLU or SwiGLU) or the MoE layer (router, permutation, experts).
#include <algorithm>
#include <cstdint>

#include "planner/cost/block_ops_builder.h"

namespace meshplan {

void BlockOpsBuilder::MlpHalf() {
  const double a = a_, L = sh_.linear_input_bytes, b = double(sh_.b), Sc = double(sh_.s_local);
  // (B,Sc,Ft) = (T, F/tp): every FFN-wide tensor and the activation's elements.
  const double normed = b * sh_.s_norm * sh_.hidden, inner = b * Sc * sh_.ffn;
  Norm("ffn_norm", /*layer_input=*/false);
  TpHalfCollectives(/*entering=*/true);
  const bool gpt = m_.block == BlockKind::kGpt;
  if (gpt) {
    const bool fc1_saved = Linear();  // fc1
    Save("fc1", "input: normed h (B,Sn,E)", normed, L);
    // bias-GeLU (jit-fused): read + write (T, F/tp); backward bias_gelu_back reads dy and x,
    // writes dx; the bias gradient reduces dx.
    Memory("bias_gelu", G::kActivation, {2 * a * inner, 1}, {4 * a * inner, 2});
    SaveOutputOf(fc1_saved, "gelu", "input: fc1 output (B,Sc,Ft)", inner, a);
    Linear();  // fc2
    Save("fc2", "input: GeLU output (B,Sc,Ft)", inner, L);
    Temporary("fc2 backward", "d(fc2 input) (B,Sc,Ft)", inner, a);
    Temporary("gelu backward", "d(fc1 output) (B,Sc,Ft)", inner, a);
    TpHalfCollectives(/*entering=*/false);
    Residual("mlp.residual", "mlp.residual_dropout");
    return;
  }
  if (sh_.experts > 0) {
    MoeFfn();
  } else if (!m_.gated_ffn()) {
    SquaredReluFfn();
  } else {
    const bool gate_saved = Linear();  // w_gate
    Save("w_up/w_gate", "input: normed h (B,Sn,E)", normed, L);
    const bool up_saved = Linear();  // w_up
    if (torchtitan_) InputGradientSums("w1/w3.input_grad_sum", 1);
    if (torchtitan_) {
      // torchtitan's FeedForward: w2(F.silu(w1(x)) * w3(x)). Forward silu (2A) and the
      // product (3A); backward the product's two gradients (3A each) and silu_backward
      // (3A). Autograd keeps w1's output (silu's input), silu's output and w3's output.
      Memory("swiglu", G::kActivation, {5 * a * inner, 2}, {9 * a * inner, 3});
      Save("swiglu", "silu output (B,Sc,Ft)", inner, a);
    } else {
      // SwiGLU (custom autograd function): read gate, up, write (T, F/tp); it saves the gate
      // and up outputs and recomputes silu(gate) in backward. Fused (Megatron-Core's
      // bias_swiglu_impl, torch.compile): one kernel each way.
      Elementwise("swiglu", G::kActivation, 3 * inner * a, fused_ ? 1 : 2, fused_ ? 1 : 10);
    }
    SaveOutputOf(gate_saved, "swiglu", "gate output (B,Sc,Ft)", inner, a);
    SaveOutputOf(up_saved, "swiglu", "up output (B,Sc,Ft)", inner, a);
    Linear();  // w_down
    Save("w_down", "input: silu(gate)*up (B,Sc,Ft)", inner, L);
    // executor/model/ops.h SwiGLUBackward: d up first holds sigmoid(gate) (no extra buffer).
    Temporary("w_down backward", "d(down input) (B,Sc,Ft)", inner, a);
    Temporary("swiglu backward", "d gate (B,Sc,Ft)", inner, a);
    Temporary("swiglu backward", "d up (B,Sc,Ft)", inner, a);
  }
  TpHalfCollectives(/*entering=*/false);
  Residual("mlp.residual", "mlp.residual_dropout");
}

// The non-gated FFN w_down(relu(w_up x)^2) (ffn_activation: squared-relu). Fused (Megatron-
// Core's and NeMo's squared_relu, torch.compile'd: megatron/training/activations.py at
// core_r0.8.0, nemo/collections/nlp/modules/common/megatron/utils.py at r2.0.0rc1): one kernel
// each way, forward read x + write (T, F/tp), backward read dy and x, write dx. Eager
// (torch.pow(F.relu(x), 2)): forward relu and pow (4A); backward pow_backward's
// grad * (2 * x.pow(1)) in three kernels (7A) and relu's threshold_backward (3A). Either keeps
// one (B,Sc,Ft) tensor for the activation's backward (w_up's output, or relu's, which
// autograd saves for both ops) and w_down's input.
void BlockOpsBuilder::SquaredReluFfn() {
  const double a = a_, L = sh_.linear_input_bytes;
  const double normed = double(sh_.b) * sh_.s_norm * sh_.hidden;
  const double inner = double(sh_.b) * sh_.s_local * sh_.ffn;  // (B,Sc,Ft) = (T, F/tp)
  const bool up_saved = Linear();  // w_up
  Save("w_up", "input: normed h (B,Sn,E)", normed, L);
  if (fused_)
    Memory("squared_relu", G::kActivation, {2 * a * inner, 1}, {3 * a * inner, 1});
  else
    Memory("squared_relu", G::kActivation, {4 * a * inner, 2}, {10 * a * inner, 4});
  SaveOutputOf(up_saved, "squared_relu", "input: up output (B,Sc,Ft)", inner, a);
  Linear();  // w_down
  Save("w_down", "input: relu(up)^2 (B,Sc,Ft)", inner, L);
  Temporary("w_down backward", "d(down input) (B,Sc,Ft)", inner, a);
  Temporary("squared_relu backward", "d(up output) (B,Sc,Ft)", inner, a);
}

// A MoE FFN (activation_memory.h, "MoE FFN"; R = expert_rows). Its memory-bound bytes sit
// on the routing op, summed as one term: the router's softmax and top-k over (T, X) fp32,
// the permutation of each token to its k experts (read (T, E), write (T*r, E),
// r = ExpertRowsPerToken) and back with the routing weights (read (T*r, E), write (T, E)),
// and the SwiGLUs of the routed rows this rank computes (T*r*u) and of the shared experts
// (read gate, up, write: 3 x (rows, Fe/tp)).
void BlockOpsBuilder::MoeFfn() {
  const double A = a_, rows = double(sh_.b) * sh_.s_local, R = sh_.expert_rows;
  const double normed = double(sh_.b) * sh_.s_norm * sh_.hidden;
  const MoeSpec& moe = m_.moe;
  const double X = static_cast<double>(moe.experts), r = ExpertRowsPerToken(m_);
  const double Fe = static_cast<double>(moe.expert_ffn_hidden) / tp_, T = sh_.T;
  const double router = 3 * T * X * 4;  // softmax read + write, top-k read
  const double dispatch = 2 * (T * E_ + T * r * E_) * A;
  const double swiglu =
      3 * (sh_.expert_work.rows_computed + T * static_cast<double>(moe.shared_experts)) * Fe * A;
  Linear();  // router
  Save("router/shared", "input: normed h (B,Sn,E)", normed, A);
  Elementwise("moe.routing", G::kRouting, router + dispatch + swiglu, 4, 4);
  Save("router", "probabilities (B,Sc,X) fp32", rows * sh_.experts, kFp32Bytes);
  Save("router", "top-k weights fp32 + ids int64 (B,Sc,k)", rows * sh_.top_k, kFp32Bytes + kIdBytes);
  Save("router", "row token and slot ids (R) int64 x 2", 2 * R, kIdBytes);
  Save("dispatch", "permuted tokens (R,E)", R * sh_.hidden, A);
  // Expert parallel (step_work.h, expert_parallel.h): the routed rows go to their experts'
  // ranks by all-to-all (with tp, all-gathered over it: the experts see every tp rank's rows)
  // and come back the same way; the backward runs each exchange on the gradients, the
  // combine's first. The op policy saves the reduce-scatter's output.
  const bool ep = sh_.ep > 1, regather = ep && sh_.tp > 1;
  const double a2a = sh_.expert_work.all_to_all_bytes;  // (T*r/tp, E) per rank
  const double gathered = sh_.expert_work.rows_computed * E_ * A;  // (T*r*u, E) over tp
  using K = CollectiveKind;
  if (ep)
    Collective("moe.dispatch", MeshDim::kEp, a2a, {K::kAllToAll, 1, P::kExpertDispatch},
               {K::kAllToAll, 1, P::kExpertDispatch});
  if (regather)
    Collective("moe.dispatch_gather", MeshDim::kTp, gathered,
               {K::kAllGather, 1, P::kExpertDispatch}, {K::kReduceScatter, 1, P::kExpertDispatch});
  ExpertSwiGlu({"experts.swiglu", "gate output (R,Fe/tp)", "up output (R,Fe/tp)",
                "experts.w_down", "input: silu(gate)*up (R,Fe/tp)"},
               R * sh_.expert_ffn);
  if (regather)
    Collective("moe.combine_scatter", MeshDim::kTp, gathered,
               {K::kReduceScatter, 1, P::kExpertCombine}, {K::kAllGather, 1, P::kExpertCombine},
               /*saved_by_op=*/true);
  if (ep)
    Collective("moe.combine", MeshDim::kEp, a2a, {K::kAllToAll, 1, P::kExpertCombine},
               {K::kAllToAll, 1, P::kExpertCombine});
  Memory("combine", G::kRouting, {}, {});
  Save("combine", "expert outputs (Rs,E)", sh_.routed_rows * sh_.hidden, A);
  // executor/model/moe_block.cc Backward: the routed experts' SwiGLU backward over their R
  // rows holds d gate and d up with either d(down input) (R,Fe/tp) (before) or the gradient
  // of the permuted tokens (R,E) (after): the larger of the two counts.
  Temporary("experts.swiglu backward", "d gate (R,Fe/tp)", R * sh_.expert_ffn, A);
  Temporary("experts.swiglu backward", "d up (R,Fe/tp)", R * sh_.expert_ffn, A);
  Temporary("experts backward", "max of d(down input) (R,Fe/tp), d(permuted tokens) (R,E)",
            R * double(std::max(sh_.expert_ffn, sh_.hidden)), A);
  if (sh_.ep > 1)
    Temporary("all-to-all", "routing buffers: rows received + sent (R+Rs,E)",
              (R + sh_.routed_rows) * sh_.hidden, A);
  if (moe.shared_experts == 0) return;
  ExpertSwiGlu({"shared.swiglu", "gate output (B,Sc,Xs*Fe/tp)", "up output (B,Sc,Xs*Fe/tp)",
                "shared.w_down", "input: silu(gate)*up (B,Sc,Xs*Fe/tp)"},
               rows * sh_.shared_ffn);
}

// The gate and up linears of a MoE layer's experts, their SwiGLU (one launch each way; its
// bytes are the routing op's) and the down linear, each saved tensor `elements` large.
void BlockOpsBuilder::ExpertSwiGlu(const ExpertNames& n, double elements) {
  const bool gate_saved = Linear();  // w_gate
  const bool up_saved = Linear();    // w_up
  Elementwise(n.swiglu, G::kActivation, 0, 1, 1);
  SaveOutputOf(gate_saved, n.swiglu, n.gate_output, elements, a_);
  SaveOutputOf(up_saved, n.swiglu, n.up_output, elements, a_);
  Linear();  // w_down
  Save(n.down, n.down_input, elements, a_);
}

}  // namespace meshplan
