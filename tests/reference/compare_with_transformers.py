"""CTest: the executor's Llama model, its gradients and its training loop with AdamW against
code written elsewhere: Hugging Face transformers' LlamaForCausalLM and torch.optim.AdamW.
CPU, fp32, same weights and tokens (exchanged as safetensors with reference_step):
  logits, loss                  one forward of the first batch
  every parameter gradient      of that loss
  losses and every parameter    after `steps` AdamW steps (one batch per step)
Each tensor must satisfy max|executor - reference| <= RTOL * max|reference| (RTOL = 1e-5,
fp32 summation order is the only expected difference; the weights after the AdamW steps
PARAM_RTOL = 1e-3 over their well-conditioned elements, see ill_conditioned). untied-gqa also runs a negative
control: q/k rows permuted to the interleaved RoPE pairing must FAIL the logits check.
Exit 0 pass, 1 mismatch, 2 setup error (no torch/transformers).
"""
import argparse
import copy
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_reference import interleaved_rows, make_model, named_parameters  # noqa: E402 (exits 2 without torch)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

RTOL = 1e-5
# Weights after AdamW steps: Adam divides each gradient element by its own RMS, so an element
# whose gradient is near 0 turns fp32 rounding noise into an update of up to lr, and the
# steps after it carry that into the other weights. The elements whose gradient at some step
# is nonzero but below the gradient check's resolution (ill_conditioned) are left out of
# this check (and counted); the others must agree to PARAM_RTOL of the tensor's scale.
# Measurements behind both numbers: tests/reference/README.md, "AdamW tolerance".
PARAM_RTOL = 1e-3
# A tensor with more than this share of its elements ill-conditioned fails, so the check
# cannot shrink to nothing (measured at most 0.073%: tied-gqa, embedding.wte, 6 of 8192).
MAX_ILL_SHARE = 1e-2
SHAPE = dict(vocab=128, hidden=64, layers=2, heads=4, ffn_hidden=160)
BATCH, SEQ, STEPS, LR = 4, 16, 3, 1e-2
VARIANTS = {  # name: (kv_heads, tied, attention, head_dim; 0: hidden / heads)
    "untied-gqa": (2, False, "naive", 0),
    "tied-gqa": (2, True, "naive", 0),
    "untied-mha": (4, False, "naive", 0),
    "fused-untied-gqa": (2, False, "fused", 0),
    "untied-gqa-head-dim": (2, False, "naive", 32),  # q and wo 4 x 32 = 128 wide on hidden 64
}


def run_executor(reference_step, weights, tokens, kv_heads, tied, attention, workdir, head_dim=0):
    """reference_step on these weights (executor names) and tokens; its outputs."""
    meta = {k: str(v) for k, v in SHAPE.items()} | {
        "kv_heads": str(kv_heads), "tied_embeddings": str(int(tied)), "batch": str(BATCH),
        "steps": str(STEPS), "lr": repr(LR), "attention": attention, "head_dim": str(head_dim)}
    meta["vocab_size"] = meta.pop("vocab")
    inputs, outputs = os.path.join(workdir, "in.safetensors"), os.path.join(workdir, "out.safetensors")
    save_file({n: t.detach().contiguous() for n, t in weights.items()} | {"tokens": tokens}, inputs, metadata=meta)
    done = subprocess.run([reference_step, inputs, outputs])
    if done.returncode != 0:
        sys.exit(f"reference_step failed with exit code {done.returncode}")
    with open(outputs, "rb") as f:
        header_meta = _metadata(f.read())
    return load_file(outputs), header_meta


def _metadata(raw):
    import json
    n = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + n]).get("__metadata__", {})


def mismatch(got, want):
    """max|got - want| / max|want| (0 when equal)."""
    scale = want.abs().max().item() or 1.0
    return (got.double() - want.double()).abs().max().item() / scale


def reference_pass(model, tokens):
    """logits (B*S,V), loss and gradients (executor names) of the first batch."""
    model = copy.deepcopy(model)
    batch = tokens[:BATCH]
    logits = model(input_ids=batch[:, :-1]).logits.reshape(-1, SHAPE["vocab"])
    loss = F.cross_entropy(logits, batch[:, 1:].reshape(-1))  # no shift: targets given
    loss.backward()
    return logits.detach(), loss.detach(), {n: p.grad for n, p in named_parameters(model)}


def ill_conditioned(step_grads):
    """Elements whose gradient, at some step, is nonzero but below RTOL * max|gradient| of its
    tensor at that step: there the gradient check cannot vouch for the gradient's size or sign,
    and Adam's m / (sqrt(v) + eps) (eps 1e-8, gradients near it) turns that into up to lr of
    movement. Exact zeros (tokens absent from a batch) stay: Adam leaves them exact."""
    ill = torch.zeros_like(step_grads[0], dtype=torch.bool)
    for g in step_grads:
        a = g.abs()
        ill |= (a > 0) & (a < RTOL * a.max())
    return ill


def reference_training(model, tokens, hyper):
    """Losses, parameters after STEPS torch.optim.AdamW steps (batch s = rows [sB, (s+1)B)),
    and for each parameter its ill-conditioned elements (ill_conditioned over the steps)."""
    model = copy.deepcopy(model)
    params = [p for _, p in named_parameters(model)]
    opt = torch.optim.AdamW(params, lr=LR, betas=(float(hyper["beta1"]), float(hyper["beta2"])),
                            eps=float(hyper["eps"]), weight_decay=float(hyper["weight_decay"]),
                            foreach=False)
    losses, grads = [], {n: [] for n, _ in named_parameters(model)}
    for s in range(STEPS):
        batch = tokens[s * BATCH:(s + 1) * BATCH]
        logits = model(input_ids=batch[:, :-1]).logits.reshape(-1, SHAPE["vocab"])
        loss = F.cross_entropy(logits, batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        for n, p in named_parameters(model):
            grads[n].append(p.grad.detach().clone())
        opt.step()
        losses.append(loss.item())
    return (torch.tensor(losses), {n: p.detach() for n, p in named_parameters(model)},
            {n: ill_conditioned(g) for n, g in grads.items()})


def check_trained(name, got, want, ill):
    """The AdamW-weights check of one tensor (see PARAM_RTOL); prints its line, True if ok."""
    got = got.reshape(want.shape)
    scale = want.abs().max().item() or 1.0
    diff = (got.double() - want.double()).abs()
    err = diff[~ill].max().item() / scale
    left_out = int(ill.sum())
    ok = err <= PARAM_RTOL and left_out <= MAX_ILL_SHARE * ill.numel()
    note = ""
    if left_out:
        note = (f"; {left_out} ill-conditioned element(s) left out (at most "
                f"{MAX_ILL_SHARE * ill.numel():.0f}), their max|diff|/max|ref| {diff[ill].max().item() / scale:.2e}")
    print(f"{'ok  ' if ok else 'FAIL'} {name} after {STEPS} AdamW steps: max|diff|/max|ref| = {err:.2e} "
          f"(tolerance {PARAM_RTOL:.0e}){note}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=VARIANTS, required=True)
    parser.add_argument("--reference-step", required=True, help="the reference_step executable")
    args = parser.parse_args()
    kv_heads, tied, attention, head_dim = VARIANTS[args.variant]
    torch.set_num_threads(1)
    model = make_model(kv_heads=kv_heads, tied=tied, seed=0, head_dim=head_dim, **SHAPE)
    torch.manual_seed(1)
    tokens = torch.randint(0, SHAPE["vocab"], (STEPS * BATCH, SEQ + 1), dtype=torch.int64)
    weights = dict(named_parameters(model))

    with tempfile.TemporaryDirectory() as workdir:
        got, hyper = run_executor(args.reference_step, weights, tokens, kv_heads, tied, attention,
                                  workdir, head_dim)
        logits, loss, grads = reference_pass(model, tokens)
        losses, trained, ill = reference_training(model, tokens, hyper)
        checks = [("logits", got["logits"], logits, RTOL), ("loss", got["loss"], loss, RTOL),
                  (f"losses of {STEPS} steps", got["losses"], losses, RTOL)]
        checks += [(f"gradient of {n}", got["grad." + n], g, RTOL) for n, g in grads.items()]
        failed = 0
        for what, g, w, tol in checks:
            err = mismatch(g, w.reshape(g.shape))
            ok = err <= tol
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {what}: max|diff|/max|ref| = {err:.2e} (tolerance {tol:.0e})")
        for n, p in trained.items():
            failed += not check_trained(n, got["param." + n], p, ill[n])
        moved = max(mismatch(trained[n], weights[n].detach()) for n in trained)
        print(f"weights moved by up to {moved:.2e} of their scale in {STEPS} steps "
              f"(fused AdamW in the executor: {hyper['fused_adamw']})")
        if moved < 100 * RTOL:
            print("FAIL the steps barely moved the weights: the comparison would prove nothing")
            failed += 1

        if args.variant == "untied-gqa":  # negative control: a wrong RoPE pairing must be caught
            D = SHAPE["hidden"] // SHAPE["heads"]
            wrong = dict(weights)
            for name in weights:
                if name.endswith(".wq") or name.endswith(".wk"):
                    heads = SHAPE["heads"] if name.endswith(".wq") else kv_heads
                    wrong[name] = weights[name][interleaved_rows(heads, D)]
            bad, _ = run_executor(args.reference_step, wrong, tokens, kv_heads, tied, attention, workdir)
            err = mismatch(bad["logits"], logits)
            caught = err > 100 * RTOL
            print(f"{'ok  ' if caught else 'FAIL'} negative control (interleaved RoPE rows): logits "
                  f"mismatch {err:.2e} must exceed {100 * RTOL:.0e}")
            failed += not caught
    print(f"{args.variant}: {'FAILED' if failed else 'passed'} ({failed} failures)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
