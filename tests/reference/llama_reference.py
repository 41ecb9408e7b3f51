"""The Hugging Face side of the outside-reference checks: a small LlamaForCausalLM built from
a config (random weights, no hub access), and the mapping between its parameter names and the
executor's ("<group>.<slot>", executor/model/param_layout.h).

RoPE: transformers rotates with rotate_half (element i of a head pairs with element i + D/2);
the executor's RopeForward does the same (executor/model/ops.h, "half-split pairs"). So the
q_proj / k_proj rows map over unpermuted. Meta's original checkpoints pair (2i, 2i+1) instead;
INTERLEAVED_ROWS is the row order that would turn one convention into the other, used as a
negative control (a wrong convention must fail the comparison).
"""
import sys

try:
    import torch
    import transformers
except ImportError as missing:
    sys.stderr.write(f"{missing}: this needs the torch wheel's venv; run scripts/install_torch_wheel.sh "
                     "and use the python it prints (bin/python)\n")
    sys.exit(2)


def make_model(vocab, hidden, layers, heads, kv_heads, ffn_hidden, tied, seed, head_dim=0):
    """fp32 LlamaForCausalLM with eager attention; norm weights perturbed away from 1 so a
    misplaced norm weight shows."""
    config = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn_hidden,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=256, rms_norm_eps=1e-5, hidden_act="silu",
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        attention_bias=False, mlp_bias=False, tie_word_embeddings=tied, initializer_range=0.1,
        head_dim=head_dim or hidden // heads)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config).float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
    return model


_BLOCK_SLOTS = {
    "input_layernorm.weight": "attn_norm",
    "self_attn.q_proj.weight": "wq",
    "self_attn.k_proj.weight": "wk",
    "self_attn.v_proj.weight": "wv",
    "self_attn.o_proj.weight": "wo",
    "post_attention_layernorm.weight": "ffn_norm",
    "mlp.up_proj.weight": "w_up",
    "mlp.gate_proj.weight": "w_gate",
    "mlp.down_proj.weight": "w_down",
}


def executor_name(hf_name):
    """model.layers.3.self_attn.q_proj.weight -> block3.wq; None for a tied lm_head."""
    if hf_name == "model.embed_tokens.weight":
        return "embedding.wte"
    if hf_name == "model.norm.weight":
        return "head.final_norm"
    if hf_name == "lm_head.weight":
        return "head.lm_head"
    parts = hf_name.split(".")
    if parts[:2] == ["model", "layers"]:
        return f"block{parts[2]}." + _BLOCK_SLOTS[".".join(parts[3:])]
    raise KeyError(f"no executor weight for {hf_name}")


def named_parameters(model):
    """(executor name, parameter) of every distinct parameter (a tied lm_head is the wte)."""
    return [(executor_name(n), p) for n, p in model.named_parameters(remove_duplicate=True)]


def interleaved_rows(heads, head_dim):
    """Row order of a q/k projection that makes a half-split RoPE act like an interleaved one."""
    per_head = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    return torch.cat([h * head_dim + per_head for h in range(heads)])
