#!/usr/bin/env python3
"""A plain-PyTorch training run as the `pytorch` framework profile describes it
(configs/frameworks/pytorch.yaml): a Llama-style model cast to bf16 (model.to(torch.bfloat16)),
torch.optim.AdamW (foreach), DistributedDataParallel with gradient accumulation over
micro-batches (no_sync until the last), on Gloo CPU ranks or NCCL GPUs. It writes what the
documented PyTorch hook writes (docs/framework_logs.md "The PyTorch hook"), one JSON per rank,
which `meshplan compare PLAN --log OUT/meshplan_rank*.json --framework pytorch` reads.

    torchrun --nproc-per-node 2 scripts/pytorch_cpu_run.py --out DIR [--steps 6]

The defaults are the model and batch of tests/data/framework_logs/pytorch_cpu_plan.yaml (a
Llama of 2 blocks, width 128, global batch 4 of 32 tokens, one sequence per micro-batch).
"""
import argparse
import gc
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.attn_norm = nn.RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        self.ffn_norm = nn.RMSNorm(hidden)
        self.up = nn.Linear(hidden, 2 * ffn, bias=False)  # up and gate
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).split(
            [self.heads * self.head_dim, self.kv_heads * self.head_dim, self.kv_heads * self.head_dim], -1)
        q = rope(q.view(b, s, self.heads, self.head_dim).transpose(1, 2), cos, sin)
        k = rope(k.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2), cos, sin)
        v = v.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, -1))
        up, gate = self.up(self.ffn_norm(x)).chunk(2, -1)
        return x + self.down(up * F.silu(gate))


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class Llama(nn.Module):
    def __init__(self, vocab, hidden, layers, heads, kv_heads, ffn, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = nn.RMSNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        half = hidden // heads // 2
        angles = torch.outer(torch.arange(seq), 10000.0 ** (-torch.arange(half) / half))
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for meshplan_rank<R>.json")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--global-batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--mbs", type=int, default=1, help="sequences per micro-batch")
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=352)
    a = p.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = Llama(a.vocab, a.hidden, a.layers, a.heads, a.kv_heads, a.ffn, a.seq).to(device, torch.bfloat16)
    model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=True)
    micro_batches = a.global_batch // (world * a.mbs)
    generator = torch.Generator().manual_seed(1 + rank)

    step_times, losses = [], []
    for _ in range(a.steps):
        batch = torch.randint(0, a.vocab, (micro_batches, a.mbs, a.seq + 1), generator=generator).to(device)
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        total = torch.zeros((), device=device)
        for i in range(micro_batches):
            sync = i == micro_batches - 1
            with model.no_sync() if not sync else torch.enable_grad():
                loss = model(batch[i, :, :-1], batch[i, :, 1:]) / micro_batches
                loss.backward()
            total += loss.detach().float()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        dist.all_reduce(total)
        if cuda:
            torch.cuda.synchronize()
        step_times.append(time.perf_counter() - start)
        losses.append(total.item() / world)

    # meshplan's PyTorch hook (docs/framework_logs.md): one JSON per rank after training.
    os.makedirs(a.out, exist_ok=True)
    json.dump({"format": "meshplan-pytorch-hook/1", "rank": rank, "world_size": world,
               "device": torch.cuda.get_device_name() if cuda else "cpu",
               "step_times_s": step_times, "losses": losses,
               "max_memory_allocated": torch.cuda.max_memory_allocated() if cuda else None,
               "max_memory_reserved": torch.cuda.max_memory_reserved() if cuda else None},
              open(os.path.join(a.out, f"meshplan_rank{rank}.json"), "w"))
    # Tear down in order: every rank done, then the DDP reducer (it holds the process group)
    # freed before the group is destroyed. Left to interpreter exit, Gloo's threads were
    # sometimes destroyed still joinable and rank 1 aborted ("terminate called without an
    # active exception", about 1 run in 30 with two runs side by side).
    dist.barrier()
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
