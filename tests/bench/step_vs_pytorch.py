"""Benchmark (not a test): one fp32 training step of the same Llama model, batch and thread
count on this CPU, in one run: meshplan's executor (`meshplan-exec run`, the median step time
of its measured.json) against PyTorch eager (transformers' LlamaForCausalLM +
torch.optim.AdamW with their defaults, the median of the same number of timed steps).
Prints each time and the ratio executor / PyTorch (below 1: meshplan is faster).

Same work on both sides: the model of configs/models/tiny-llama.yaml (checked against SHAPE),
one micro-batch of --batch x --seq tokens, next-token cross-entropy, AdamW (lr 3e-4, betas
0.9/0.95, weight decay 0.1), fp32. Same threads: OMP_NUM_THREADS for the executor's one rank
(checked in measured.json) and torch.set_num_threads here. PyTorch runs twice: with eager
attention (the softmax(QK^T)V the executor's CPU core computes) and with transformers' default
SDPA attention (PyTorch's fused CPU kernel). --exec may be given more than once (the Debian
LibTorch 1.13 build and the wheel's 2.x build, build-torch2/).
Usage (the figure in docs/benchmarks.md):
  $(scripts/install_torch_wheel.sh)/bin/python tests/bench/step_vs_pytorch.py \\
      --exec build/meshplan-exec --exec build-torch2/meshplan-exec
Exit 2 without torch/transformers (run scripts/install_torch_wheel.sh) or an executable.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from llama_reference import make_model  # noqa: E402 (exits 2 without torch)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402

MODEL = "tiny-llama"
SHAPE = dict(vocab=8192, hidden=256, layers=4, heads=8, kv_heads=4, ffn_hidden=688, tied=False)
YAML_KEYS = dict(vocab="vocab_size", hidden="hidden", layers="layers", heads="heads",
                 kv_heads="kv_heads", ffn_hidden="ffn_hidden", tied="tied_embeddings")
PLAN = """model: {model}
cluster: cpu-1x
training: {{global_batch: {batch}, seq_len: {seq}, precision: fp32, steps: {steps}, learning_rate: 3.0e-4}}
plan: {{dp: 1, mbs: {batch}}}
"""


def check_shape():
    """SHAPE must be the model the executor loads by name."""
    values = {}
    with open(os.path.join(ROOT, "configs", "models", MODEL + ".yaml")) as f:
        for line in f:
            key, _, rest = line.partition(":")
            values[key.strip()] = rest.split("#")[0].strip()
    for name, key in YAML_KEYS.items():
        want = str(SHAPE[name]).lower()
        if values.get(key) != want:
            sys.exit(f"step_vs_pytorch: configs/models/{MODEL}.yaml has {key}: {values.get(key)}, "
                     f"this benchmark builds {want}")


def executor_step_s(exe, batch, seq, steps, warmup, threads):
    with tempfile.TemporaryDirectory() as d:
        plan, out = os.path.join(d, "plan.yaml"), os.path.join(d, "measured.json")
        with open(plan, "w") as f:
            f.write(PLAN.format(model=MODEL, batch=batch, seq=seq, steps=steps))
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MESHPLAN_CONFIGS=os.path.join(ROOT, "configs"))
        run = subprocess.run([exe, "run", plan, "--nproc", "1", "--device", "cpu", "--steps", str(steps),
                              "--warmup", str(warmup), "--out", out],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit(f"step_vs_pytorch: {exe} run failed (exit {run.returncode}):\n{run.stderr}")
        with open(out) as f:
            measured = json.load(f)
    env_ = measured["environment"]
    if int(env_["intra_op_threads"]) != threads:
        sys.exit(f"step_vs_pytorch: {exe} ran on {env_['intra_op_threads']} threads, PyTorch on {threads}")
    return measured["median_step_s"], env_["libtorch_version"]


def pytorch_step_s(batch, seq, steps, warmup, attention):
    model = make_model(seed=0, **SHAPE)
    model.config._attn_implementation = attention
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    generator = torch.Generator().manual_seed(0)
    times = []
    for _ in range(steps):
        tokens = torch.randint(0, SHAPE["vocab"], (batch, seq + 1), generator=generator)
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
    parser.add_argument("--exec", action="append", dest="execs",
                        help="a meshplan-exec to time (repeatable; default build/meshplan-exec)")
    parser.add_argument("--batch", type=int, default=8, help="sequences in the step (default 8)")
    parser.add_argument("--seq", type=int, default=128, help="tokens per sequence (default 128)")
    parser.add_argument("--steps", type=int, default=12, help="steps per side (default 12)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps (default 2)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds, each timing every side once in turn; the figure is the median "
                             "of the rounds' medians (default 3: a machine shared with other work)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="threads on both sides (default: the usable cores)")
    args = parser.parse_args()
    execs = args.execs or [os.path.join("build", "meshplan-exec")]
    for exe in execs:
        if not os.access(exe, os.X_OK):
            sys.stderr.write(f"{exe}: no such executable (scripts/build.sh or scripts/build_torch2.sh builds it)\n")
            return 2
    if args.rounds < 1:
        sys.stderr.write("--rounds must be at least 1\n")
        return 2
    if not 0 <= args.warmup < args.steps:
        sys.stderr.write("--warmup must be at least 0 and below --steps\n")
        return 2
    check_shape()
    torch.set_num_threads(args.threads)

    print(f"{MODEL}, one step of {args.batch} x {args.seq} tokens, fp32, AdamW, {args.threads} threads, "
          f"median over {args.rounds} rounds of the median of {args.steps - args.warmup} steps "
          f"after {args.warmup} warm-up")
    times = {}  # side -> one median per round
    versions = {}
    for _ in range(args.rounds):
        for exe in execs:
            seconds, versions[exe] = executor_step_s(exe, args.batch, args.seq, args.steps, args.warmup,
                                                     args.threads)
            times.setdefault(exe, []).append(seconds)
        for attention in ("eager", "sdpa"):
            times.setdefault(attention, []).append(
                pytorch_step_s(args.batch, args.seq, args.steps, args.warmup, attention))
    ours = [(exe, statistics.median(times[exe]), versions[exe]) for exe in execs]
    theirs = [(attention, statistics.median(times[attention])) for attention in ("eager", "sdpa")]
    for side, rounds in times.items():
        print(f"  rounds, {side}: " + ", ".join(f"{t * 1e3:.1f}" for t in rounds) + " ms")
    for exe, seconds, version in ours:
        print(f"meshplan executor ({exe}, LibTorch {version}, naive attention)  {seconds * 1e3:8.1f} ms/step")
    for attention, seconds in theirs:
        print(f"PyTorch {torch.__version__} + transformers {transformers.__version__}, {attention} attention  "
              f"{seconds * 1e3:8.1f} ms/step")
    for exe, seconds, version in ours:
        ratios = ", ".join(f"vs {attention} {seconds / t:.2f}" for attention, t in theirs)
        print(f"ratio executor / PyTorch, LibTorch {version}: {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
