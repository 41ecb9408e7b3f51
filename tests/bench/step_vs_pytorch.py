"""Benchmark (not a test): one fp32 training step of the same Llama model and batch on this
CPU, meshplan's executor (`meshplan-exec run`, its median step time from measured.json)
against PyTorch eager (transformers' LlamaForCausalLM + torch.optim.AdamW, median of the same
number of timed steps). Both use every core (the launcher's OMP_NUM_THREADS for one rank;
torch.set_num_threads here). Prints both times and the ratio executor / PyTorch.
Usage (the README's figure):
  $(scripts/install_torch_wheel.sh)/bin/python tests/bench/step_vs_pytorch.py --exec build/meshplan-exec
Exit 2 without torch/transformers (run scripts/install_torch_wheel.sh) or without the executable.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from llama_reference import make_model  # noqa: E402 (exits 2 without torch)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

MODEL = "tiny-llama"  # configs/models/tiny-llama.yaml: V 8192, E 256, L 4, H 8, K 4, F 688
SHAPE = dict(vocab=8192, hidden=256, layers=4, heads=8, kv_heads=4, ffn_hidden=688, tied=False)
PLAN = """model: {model}
cluster: cpu-1x
training: {{global_batch: {batch}, seq_len: {seq}, precision: fp32, steps: {steps}, learning_rate: 3.0e-4}}
plan: {{dp: 1, mbs: {batch}}}
"""


def executor_step_s(exe, batch, seq, steps, warmup):
    with tempfile.TemporaryDirectory() as d:
        plan, out = os.path.join(d, "plan.yaml"), os.path.join(d, "measured.json")
        with open(plan, "w") as f:
            f.write(PLAN.format(model=MODEL, batch=batch, seq=seq, steps=steps))
        subprocess.run([exe, "run", plan, "--nproc", "1", "--steps", str(steps),
                        "--warmup", str(warmup), "--out", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["median_step_s"]


def pytorch_step_s(batch, seq, steps, warmup):
    model = make_model(seed=0, **SHAPE)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    tokens = torch.randint(0, SHAPE["vocab"], (batch, seq + 1))
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        logits = model(input_ids=tokens[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, SHAPE["vocab"]), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[warmup:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exec", default="build/meshplan-exec", help="the meshplan-exec to time")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    if not os.access(args.exec, os.X_OK):
        sys.stderr.write(f"{args.exec}: no such executable (scripts/build.sh builds it)\n")
        return 2
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    ours = executor_step_s(args.exec, args.batch, args.seq, args.steps, args.warmup)
    theirs = pytorch_step_s(args.batch, args.seq, args.steps, args.warmup)
    print(f"{MODEL}, batch {args.batch} x {args.seq} tokens, fp32, {threads} threads, "
          f"median of {args.steps - args.warmup} steps")
    print(f"meshplan executor  {ours * 1e3:8.1f} ms/step")
    print(f"PyTorch eager      {theirs * 1e3:8.1f} ms/step  (transformers {__import__('transformers').__version__}, "
          f"torch {torch.__version__})")
    print(f"ratio executor / PyTorch: {ours / theirs:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
