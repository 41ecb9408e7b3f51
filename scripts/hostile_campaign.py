#!/usr/bin/env python3
"""A hostile-input campaign against the built meshplan binaries (docs/limits.md).

Runs over 1,000 command lines, each under `timeout`, over every input surface: the numbers
of every kind of input file (model, hardware and cluster YAML, plan files, config.json,
measured.json, validate rows, sweep records), every command's numeric and text flags, plan
strings, input paths that are not regular files, output paths that are special files, and
ambiguous input (second YAML documents, NUL bytes, hex flags, unknown commands). Each case
is judged on four promises, and any broken one is a finding:

  crash      killed by a signal, an abort ("terminate called"), a raw c10 stack trace
  hang       still running at the timeout (exit 124)
  clobbered  a sentinel FIFO, directory, symlink or device, or an input file, changed
  bad figure exit 0 with a figure that is not finite (inf or nan in text, null or a non-finite
             number in JSON) or is negative (JSON)
  unexpected exit 1 "unexpected error" (an input's fault should be exit 2)

Standard library only. Usage (from the repository root, after a build):

  scripts/hostile_campaign.py [--build build] [--jobs 2] [--timeout 60] [--only SURFACE]
                              [--list] [--verbose]

It prints the cases per surface and per outcome (exit code) and every finding, and exits 1
when there is one. MESHPLAN_CONFIGS is set to the repository's configs/.
"""
import argparse
import collections
import concurrent.futures
import hashlib
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------- value shapes

# Numbers as YAML scalars: denormals, zero, negatives, huge, hex, NaN, past int64, typos.
YAML_NUMBERS = ["1e-320", "4.9e-324", "1e-300", "0", "-0", "-1", "1e308", "1e400", "0x10",
                ".nan", ".inf", "1e15", "10000000", "1099511627776", "9223372036854775808",
                "1.5", "'8'", "''", "[]"]
# The same as JSON values.
JSON_NUMBERS = ["1e-320", "5e-324", "0", "-1", "-0.5", "1e308", "1e15", "10000000",
                "1099511627776", "9223372036854775808", "1.5", "\"8\"", "null", "true"]
# Flag values.
FLAG_VALUES = ["", "0x10", "-1", "1e400", "nan", "inf", " 8", "+8", "1e3", "0", "1.5",
               "99999999999999999999", "0x0p0", "1e-320"]


def yaml_set(text, key, value):
    """`text` with the first `key: ...` line's value replaced (its comment dropped)."""
    pattern = re.compile(r"^(\s*" + re.escape(key) + r":)[^\n]*$", re.M)
    new, n = pattern.subn(lambda m: m.group(1) + " " + value, text, count=1)
    if n != 1:
        raise KeyError(key)
    return new


# ---------------------------------------------------------------- one case


class Case:
    def __init__(self, surface, args, files=None, exe="meshplan", shell_prefix=""):
        self.surface = surface
        self.args = args  # argv after the binary; "{dir}" is the case's scratch folder
        self.files = files or {}  # name -> text (bytes for binary)
        self.exe = exe
        self.shell_prefix = shell_prefix  # e.g. "ulimit -v 2500000;"


def make_sentinels(d):
    """Special files every case may be pointed at; their kinds are checked afterwards."""
    os.mkfifo(os.path.join(d, "fifo"))
    os.mkdir(os.path.join(d, "dir"))
    os.symlink(os.path.join(d, "dir"), os.path.join(d, "link_to_dir"))
    os.symlink(os.path.join(d, "fifo"), os.path.join(d, "link_to_fifo"))
    os.symlink(os.path.join(d, "loop_a"), os.path.join(d, "loop_b"))
    os.symlink(os.path.join(d, "loop_b"), os.path.join(d, "loop_a"))
    if os.geteuid() == 0:  # a character device of our own, never /dev/null itself
        os.mknod(os.path.join(d, "null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    else:
        os.symlink("/dev/null", os.path.join(d, "null"))


def snapshot(d):
    """The kind (and for regular files the hash) of everything in `d`, not following links."""
    out = {}
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        st = os.lstat(p)
        kind = stat.S_IFMT(st.st_mode)
        digest = None
        if stat.S_ISREG(st.st_mode) and name.startswith("in_"):
            with open(p, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
        out[name] = (kind, digest)
    return out


FIGURE_SKIP = re.compile(r"error|pct|loss|delta|diff|seed|rank|stage|step$|steps|index|"
                         r"ordinal|line|column|exit|imbalance|source", re.I)


def bad_json_figures(value, path=""):
    """Paths of non-finite numbers, and negative ones under figure-like keys."""
    found = []
    if isinstance(value, dict):
        for k, v in value.items():
            found += bad_json_figures(v, path + "/" + str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += bad_json_figures(v, path + "[%d]" % i)
    elif value is None:  # nlohmann writes inf and nan as null: a figure that is null is one
        if not FIGURE_SKIP.search(path.rsplit("/", 1)[-1]):
            found.append("%s = null" % path)
    elif isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)):
        if isinstance(value, float) and not math.isfinite(value):
            found.append("%s = %r" % (path, value))
        elif value < 0 and not FIGURE_SKIP.search(path.rsplit("/", 1)[-1]):
            found.append("%s = %r" % (path, value))
    return found


NON_FINITE_TEXT = re.compile(r"(?<![\w.-])-?(inf|nan)(?![\w])", re.I)


def judge(case, code, output, before, after):
    """The case's findings (empty: it kept every promise)."""
    findings = []
    if code == 124:
        findings.append("hang")
    elif code < 0 or code >= 128 or "terminate called" in output or "Exception raised from" in output:
        findings.append("crash (exit %d)" % code)
    for name, kind in before.items():
        if after.get(name) != kind:
            findings.append("clobbered %s" % name)
    if code == 1 and "unexpected error" in output:
        findings.append("unexpected error")
    if code == 0:
        text = output
        brace = min([i for i in (output.find("{"), output.find("[")) if i >= 0], default=-1)
        if brace >= 0:
            try:
                doc = json.loads(output[brace:], parse_constant=lambda c: float(c.replace("Infinity", "inf")))
                findings += ["bad figure " + f for f in bad_json_figures(doc)[:3]]
                text = output[:brace]
            except ValueError:
                pass
        m = NON_FINITE_TEXT.search(text)
        if m:
            findings.append("bad figure in text: ..." + text[max(0, m.start() - 40):m.end() + 10])
    return findings


def run_case(case, build, timeout):
    d = tempfile.mkdtemp(prefix="hostile_")
    try:
        make_sentinels(d)
        for name, text in case.files.items():
            mode = "wb" if isinstance(text, bytes) else "w"
            with open(os.path.join(d, name), mode) as f:
                f.write(text)
        args = [a.replace("{dir}", d) for a in case.args]
        exe = os.path.join(build, case.exe)
        before = snapshot(d)
        cmd = " ".join(_quote(a) for a in [exe] + args)
        shell = "%s exec timeout -k 5 %d %s" % (case.shell_prefix, timeout, cmd)
        env = dict(os.environ, MESHPLAN_CONFIGS=os.path.join(ROOT, "configs"))
        p = subprocess.run(["bash", "-c", shell], cwd=d, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        output = p.stdout.decode("utf-8", "replace")
        code = p.returncode
        after = snapshot(d)
        # Only what existed before is checked: new outputs may appear.
        before_kinds = {k: v for k, v in before.items()}
        after_kinds = {k: after.get(k) for k in before}
        return code, output, judge(case, code, output, before_kinds, after_kinds), cmd
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _quote(a):
    if a and re.fullmatch(r"[\w@%+=:,./{}-]+", a):
        return a
    return "'" + a.replace("'", "'\\''") + "'"


# ---------------------------------------------------------------- the cases


def read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def model_cases():
    base = read("configs/models/tiny-llama.yaml")
    keys = ["vocab_size", "hidden", "layers", "heads", "kv_heads", "ffn_hidden", "max_seq"]
    cmds = [["estimate", "--plan", "dp=1", "--cluster", "1xcpu-ci", "--global-batch", "2",
             "--seq", "64", "--format", "json"],
            ["search", "--cluster", "8xH100", "--global-batch", "8", "--seq", "64", "--top", "2",
             "--format", "json"]]
    cases = []
    for i, key in enumerate(keys):
        for j, v in enumerate(YAML_NUMBERS):
            cmd = cmds[(i + j) % 2]
            cases.append(Case("model yaml", cmd + ["--model", "{dir}/in_model.yaml"],
                              {"in_model.yaml": yaml_set(base, key, v)}))
    for v in ["1e-320", "0", "-1", "1000000000", "1e308"]:
        cases.append(Case("model yaml", cmds[0] + ["--model", "{dir}/in_model.yaml"],
                          {"in_model.yaml": base + "head_dim: %s\n" % v}))
    return cases


def hardware_cases():
    base = read("configs/hardware/a100-80gb.yaml")
    keys = ["memory_MiB", "fp32", "tf32", "bf16", "fp8", "memory_bandwidth_TBps", "matmul",
            "attention", "kernel_overhead_us", "comm_overlap_slowdown", "bandwidth_GBps",
            "latency_us", "bus_efficiency", "memory_GB_per_node", "optimizer_GBps", "sm_count"]
    cmds = [["estimate", "--plan", "dp=8", "--global-batch", "8", "--seq", "512",
             "--format", "json"],
            ["simulate", "--plan", "dp=2,tp=4", "--global-batch", "8", "--seq", "512",
             "--format", "json"],
            ["search", "--global-batch", "8", "--seq", "512", "--top", "2", "--format", "json"],
            ["estimate", "--plan", "dp=8,offload_opt=1,zero=3", "--global-batch", "8", "--seq",
             "512", "--format", "json"]]
    cluster = "name: c\ngpu: in_hw.yaml\nnodes: 1\ngpus_per_node: 8\n"
    cases = []
    for i, key in enumerate(keys):
        for j, v in enumerate(YAML_NUMBERS):
            cmd = cmds[(i + j) % len(cmds)]
            try:
                hw = yaml_set(base, key, v)
            except KeyError:
                continue
            cases.append(Case("hardware yaml", cmd + ["--cluster", "{dir}/in_cluster.yaml"],
                              {"in_hw.yaml": hw, "in_cluster.yaml": cluster}))
    return cases


def cluster_cases():
    base = read("configs/clusters/1024xh100-ib.yaml").replace("nodes: 128", "nodes: 8")
    keys = ["nodes", "gpus_per_node", "bandwidth_GBps", "latency_us", "bus_efficiency"]
    cmds = [["estimate", "--plan", "dp=8,tp=8", "--global-batch", "64", "--seq", "512",
             "--format", "json"],
            ["simulate", "--plan", "dp=8,pp=8", "--global-batch", "64", "--seq", "512",
             "--format", "json"],
            ["search", "--global-batch", "64", "--seq", "512", "--top", "2", "--format", "json"]]
    cases = []
    for i, key in enumerate(keys):
        for j, v in enumerate(YAML_NUMBERS):
            cmd = cmds[(i + j) % len(cmds)]
            cases.append(Case("cluster yaml", cmd + ["--cluster", "{dir}/in_cluster.yaml"],
                              {"in_cluster.yaml": yaml_set(base, key, v)}))
    # inter_node's tier (the second of each key)
    for j, v in enumerate(YAML_NUMBERS):
        text = base
        idx = text.find("inter_node:")
        text = text[:idx] + yaml_set(text[idx:], "bandwidth_GBps", v)
        cases.append(Case("cluster yaml", cmds[j % 3] + ["--cluster", "{dir}/in_cluster.yaml"],
                          {"in_cluster.yaml": text}))
    return cases


PLAN_FILE = """model: tiny-llama
cluster: 1xcpu-ci
training: {global_batch: 4, seq_len: 128, precision: fp32, steps: 5}
plan: {dp: 1, mbs: 2, recompute: none}
"""


def plan_file_cases():
    keys = ["global_batch", "seq_len", "steps", "dp", "mbs"]
    cases = []
    for i, key in enumerate(keys):
        for j, v in enumerate(YAML_NUMBERS):
            text = re.sub(r"\b" + key + r": [^,}]+", key + ": " + v, PLAN_FILE, count=1)
            cmd = [["estimate", "--format", "json"], ["simulate", "--format", "json"]][(i + j) % 2]
            cases.append(Case("plan file", cmd + ["--plan-file", "{dir}/in_plan.yaml"],
                              {"in_plan.yaml": text}))
    for v in ["1e-320", "-1", "0", "1e308", "0x10"]:
        text = PLAN_FILE.replace("steps: 5}", "steps: 5, learning_rate: %s}" % v)
        cases.append(Case("plan file", ["estimate", "--plan-file", "{dir}/in_plan.yaml"],
                          {"in_plan.yaml": text}))
    return cases


HF = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688,
      "num_attention_heads": 8, "num_key_value_heads": 4, "num_hidden_layers": 4,
      "vocab_size": 8192, "max_position_embeddings": 1024}
HF_MOE = {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 688,
          "num_attention_heads": 8, "num_key_value_heads": 4, "num_hidden_layers": 4,
          "vocab_size": 8192, "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2,
          "moe_intermediate_size": 128}


def hf_cases():
    cases = []
    cmds = [["estimate", "--plan", "dp=8", "--global-batch", "8", "--seq", "256",
             "--format", "json"],
            ["search", "--global-batch", "8", "--seq", "256", "--top", "2", "--format", "json"]]
    for base in (HF, HF_MOE):
        for i, key in enumerate(k for k in base if k != "model_type"):
            for j, v in enumerate(JSON_NUMBERS):
                text = json.dumps(base).replace('"%s": %s' % (key, json.dumps(base[key])),
                                                '"%s": %s' % (key, v))
                cases.append(Case("config.json", cmds[(i + j) % 2] +
                                  ["--model", "{dir}/in_config.json"], {"in_config.json": text}))
    return cases


def sweep_record():
    with open(os.path.join(ROOT, "tests/data/sweep/tiny-fp32-s128-mbs2-none.json")) as f:
        return json.load(f)


def measured_cases():
    record = sweep_record()
    measured = record["measured"]
    cases = []
    for key in ["median_step_s", "tokens_per_s", "steps", "warmup_steps", "tokens_per_step",
                "first_step"]:
        for v in JSON_NUMBERS:
            m = json.loads(json.dumps(measured))
            m[key] = json.loads(v)
            cases.append(Case("measured.json", ["compare", "{dir}/in_plan.yaml",
                                                "{dir}/in_measured.json", "--format", "json"],
                              {"in_plan.yaml": PLAN_FILE, "in_measured.json": json.dumps(m)}))
    for key in ["step_times_s", "peak_memory_bytes"]:
        for v in JSON_NUMBERS[:8]:
            m = json.loads(json.dumps(measured))
            m[key] = [json.loads(v)] * len(m[key])
            cases.append(Case("measured.json", ["compare", "{dir}/in_plan.yaml",
                                                "{dir}/in_measured.json"],
                              {"in_plan.yaml": PLAN_FILE, "in_measured.json": json.dumps(m)}))
    for tail in ["\0{}", "\0garbage", "\n{}", "]"]:
        cases.append(Case("measured.json", ["compare", "{dir}/in_plan.yaml",
                                            "{dir}/in_measured.json"],
                          {"in_plan.yaml": PLAN_FILE,
                           "in_measured.json": json.dumps(measured) + tail}))
    return cases


def sweep_cases():
    record = sweep_record()
    cases = []
    paths = [("estimate", "mfu"), ("measured", "tokens_per_s")]
    for a, b in paths:
        for v in JSON_NUMBERS:
            r = json.loads(json.dumps(record))
            r[a][b] = json.loads(v)
            cases.append(Case("sweep record", ["measurements", "{dir}/in_r.json", "--format", "json"],
                              {"in_r.json": json.dumps(r)}))
    for fig in ["step time", "peak memory rank 0"]:
        for field in ["predicted", "measured"]:
            for v in JSON_NUMBERS:
                r = json.loads(json.dumps(record))
                for f in r["comparison"]["figures"]:
                    if f["figure"].startswith(fig):
                        f[field] = json.loads(v)
                cases.append(Case("sweep record", ["measurements", "{dir}/in_r.json"],
                                  {"in_r.json": json.dumps(r)}))
    return cases


def validate_cases():
    row = "{name: r, heads: 16, hidden: 1024, layers: 4, gpus: 8, global_batch: 64, plan: \"dp=8\", published: 100}"
    table = ("tables:\n  - id: t\n    paper: p\n    source: s\n    page: x.md\n    figure: FIG\n"
             "    common: {block: gpt, vocab_size: 51200, seq_len: 2048, tied_embeddings: true,\n"
             "             ffn_multiplier: 4, gpu: GPU, precision: PREC}\n    rows:\n      - ROW\n")
    cases = []
    for fig in ["tflops_per_gpu", "step_time_s", "activation_GiB"]:
        for key in ["published", "heads", "hidden", "layers", "gpus", "global_batch"]:
            for v in YAML_NUMBERS[:14]:
                r = re.sub(r"\b" + key + r": [^,}]+", key + ": " + v, row, count=1)
                text = table.replace("FIG", fig).replace("GPU", "a100-80gb").replace(
                    "PREC", "mixed").replace("ROW", r)
                cases.append(Case("validate row", ["validate", "--runs", "{dir}/in_runs.yaml",
                                                   "--format", "json"], {"in_runs.yaml": text}))
    for gpu in ["a100-80gb", "a40", "h100-sxm"]:
        for prec in ["fp8", "fp32", "bf16"]:
            text = table.replace("FIG", "tflops_per_gpu").replace("GPU", gpu).replace(
                "PREC", prec).replace("ROW", row)
            cases.append(Case("validate row", ["validate", "--runs", "{dir}/in_runs.yaml"],
                              {"in_runs.yaml": text}))
    return cases


TINY_RUN_PLAN = """model: tiny-llama
cluster: 1xcpu-ci
training: {global_batch: 2, seq_len: 32, precision: fp32, steps: 3}
plan: {dp: 1, mbs: 2}
"""


def flag_cases():
    setup = ["--global-batch", "8", "--seq", "512"]
    flags = [
        (["estimate", "--plan", "dp=8"], ["--headroom", "--global-batch", "--seq"]),
        (["search", "--top", "2"] + setup, ["--top", "--threads", "--simulate-top", "--headroom"]),
        (["simulate", "--plan", "dp=8"], ["--global-batch", "--seq"]),
        (["compare", "{dir}/in_plan.yaml", "{dir}/in_measured.json"], ["--tolerance"]),
    ]
    record = sweep_record()
    files = {"in_plan.yaml": PLAN_FILE, "in_measured.json": json.dumps(record["measured"])}
    cases = []
    for cmd, names in flags:
        for name in names:
            for v in FLAG_VALUES:
                cases.append(Case("flags", cmd + [name, v], dict(files)))
    run_files = {"in_plan.yaml": TINY_RUN_PLAN}
    run = ["run", "{dir}/in_plan.yaml", "--out", "{dir}/m.json", "--device", "cpu"]
    for name in ["--steps", "--warmup", "--nproc", "--comm-timeout", "--seed", "--save-every"]:
        for v in ["", "0x10", "-1", "1e400", "nan", "99999999999999999999", "1.5", "0x0p0"]:
            cases.append(Case("flags", run + [name, v], dict(run_files), exe="meshplan"))
    cal = ["calibrate", "--quick", "--shapes", "2x64"]
    for name in ["--threads", "--collective-ranks"]:
        for v in ["", "0x10", "-1", "99999999999999999999", "1.5", "nan"]:
            cases.append(Case("flags", cal + [name, v]))
    for name, v in [("--shapes", "99999999x99999999"), ("--shapes", "1000000x1000000"),
                    ("--shapes", ""), ("--shapes", "0x8"), ("--shapes", "1x1"),
                    ("--shapes", "-1x8"), ("--shapes", "1x8,"), ("--device", "cuda"),
                    ("--device", ""), ("--precision", "fp8"), ("--model", "{dir}/fifo")]:
        cases.append(Case("flags", cal + [name, v]))
    # Text flags whose empty value would read as "not given".
    for cmd in [["search", "--explain-plan", ""], ["search", "--only", ""],
                ["validate", "--table", ""], ["validate", "--runs", ""],
                ["estimate", "--plan", ""], ["estimate", "--model", ""],
                ["estimate", "--cluster", ""], ["simulate", "--plan-file", ""],
                ["run", "{dir}/in_plan.yaml", "--data", ""], ["run", "{dir}/in_plan.yaml",
                                                              "--resume", ""]]:
        cases.append(Case("flags", cmd, dict(run_files)))
    return cases


PLAN_STRINGS = ["dp=8", "dp=8,dp=4", "tp=0", "dp=-8", "dp=0x8", "dp=8,", ",", "=", "dp",
                "dp=1e3", "dp=4611686018427387906,tp=4", "dp=8,mbs=99999999999",
                "pp=2,vpp=1000000", "dp=2,tp=2,pp=2,schedule=interleaved,vpp=2",
                "dp=8,recompute=maybe", "dp=8,zero=4", "dp=8,zero=3,offload_opt=1",
                "dp=4,cp=2", "dp=\u00e9", "dp=8;tp=2", "DP=8", " dp=8",
                "dp=8,mbs=0", "pp=8,first_stage_layers=99999999", "ep=8", "dp=8,tp_overlap=1"]


def plan_string_cases():
    cases = []
    for s in PLAN_STRINGS:
        for cmd in (["estimate", "--format", "json"], ["simulate", "--format", "json"]):
            cases.append(Case("plan string", cmd + ["--plan", s, "--global-batch", "64"]))
        cases.append(Case("plan string", ["search", "--only", s, "--global-batch", "64",
                                          "--top", "1", "--format", "json"]))
        cases.append(Case("plan string", ["search", "--explain-plan", s, "--global-batch", "64",
                                          "--top", "1"]))
    return cases


def input_path_cases():
    kinds = ["{dir}/fifo", "{dir}/dir", "{dir}/null", "{dir}/missing", "{dir}/loop_a",
             "{dir}/link_to_fifo", "{dir}/link_to_dir", "{dir}/in_empty.yaml",
             "{dir}/in_junk.bin", "{dir}/in_nul.yaml", "/dev/zero", "/proc/self/status"]
    files = {"in_empty.yaml": "", "in_junk.bin": bytes(range(256)) * 4,
             "in_nul.yaml": "name: x\n\0block: llama\n", "in_plan.yaml": PLAN_FILE,
             "in_measured.json": json.dumps(sweep_record()["measured"])}
    templates = [
        ["estimate", "--plan", "dp=8", "--model", "P"],
        ["estimate", "--plan", "dp=8", "--cluster", "P"],
        ["estimate", "--plan-file", "P"],
        ["simulate", "--plan-file", "P"],
        ["compare", "P", "{dir}/in_measured.json"],
        ["compare", "{dir}/in_plan.yaml", "P"],
        ["validate", "--runs", "P"],
        ["measurements", "P"],
        ["run", "P", "--device", "cpu", "--out", "{dir}/m.json"],
        ["run", "{dir}/in_plan.yaml", "--data", "P", "--out", "{dir}/m.json"],
        ["run", "{dir}/in_plan.yaml", "--resume", "P", "--out", "{dir}/m.json"],
        ["calibrate", "--quick", "--model", "P"],
    ]
    cases = []
    for t in templates:
        for k in kinds:
            cases.append(Case("input path", [k if a == "P" else a for a in t], dict(files)))
    # A resume folder whose `latest` or rank file is a FIFO.
    for setup in ["mkfifo {dir}/snap/latest", "printf 'step_00000001\\n' > {dir}/snap/latest; "
                  "mkdir -p {dir}/snap/step_00000001; mkfifo {dir}/snap/step_00000001/rank_00000.bin"]:
        cases.append(Case("input path", ["run", "{dir}/in_plan.yaml", "--resume", "{dir}/snap",
                                         "--out", "{dir}/m.json", "--device", "cpu"],
                          {"in_plan.yaml": TINY_RUN_PLAN},
                          shell_prefix="cd {dir} && mkdir -p snap && " + setup + ";"))
    return cases


def output_path_cases():
    kinds = ["{dir}/fifo", "{dir}/dir", "{dir}/null", "{dir}/link_to_dir", "{dir}/link_to_fifo",
             "{dir}/loop_a", "", "{dir}/missing/x.out", "{dir}/dir/", "{dir}/new.out"]
    templates = [
        ["search", "--global-batch", "8", "--seq", "512", "--top", "1", "--out", "P"],
        ["search", "--global-batch", "8", "--seq", "512", "--top", "1", "--dump", "P"],
        ["search", "--global-batch", "8", "--seq", "512", "--top", "1", "--dump", "P.csv"],
        ["simulate", "--plan", "dp=8", "--global-batch", "8", "--seq", "512", "--trace", "P"],
        ["run", "{dir}/in_plan.yaml", "--device", "cpu", "--steps", "3", "--warmup", "1",
         "--out", "P"],
        ["calibrate", "--quick", "--shapes", "2x64", "--out", "P"],
        ["calibrate", "--quick", "--shapes", "2x64", "--report", "P"],
    ]
    cases = []
    for t in templates:
        for k in kinds:
            args = [a.replace("P", k) if "P" in a and a in ("P", "P.csv") else a for a in t]
            cases.append(Case("output path", args, {"in_plan.yaml": TINY_RUN_PLAN}))
    same = "{dir}/same.csv"
    cases.append(Case("output path", ["search", "--global-batch", "8", "--seq", "512",
                                      "--out", same, "--dump", same]))
    cases.append(Case("output path", ["search", "--global-batch", "8", "--seq", "512",
                                      "--out", "{dir}/./same.csv", "--dump", same]))
    return cases


def ambiguity_cases():
    model = read("configs/models/tiny-llama.yaml")
    cases = []
    for tail in ["---\nlayers: 8\n", "...\n---\n[[[", "---\n", "\0layers: 8\n", "...\n"]:
        cases.append(Case("ambiguity", ["estimate", "--model", "{dir}/in_m.yaml", "--plan", "dp=8"],
                          {"in_m.yaml": model + tail}))
        cases.append(Case("ambiguity", ["estimate", "--plan-file", "{dir}/in_p.yaml"],
                          {"in_p.yaml": PLAN_FILE + tail}))
    for word in ["frobnicate", "Estimate", "estimat", "--", "help", "run2", "''", "estimate\u00e9"]:
        cases.append(Case("ambiguity", [word]))
    cases.append(Case("ambiguity", ["run", "{dir}/in_plan.yaml", "--out", "{dir}/m.json",
                                    "--steps", "2", "--warmup", "0", "--save-every", "2",
                                    "--snapshot", "{dir}/snap"], {"in_plan.yaml": TINY_RUN_PLAN},
                      shell_prefix=""))
    return cases


def thread_cases():
    meshplan_search = ["search", "--global-batch", "8", "--seq", "512", "--top", "1"]
    cases = []
    for cap in ["2500000", "1500000"]:
        for threads in ["512", "1024", "64"]:
            cases.append(Case("threads", meshplan_search + ["--threads", threads],
                              shell_prefix="ulimit -v %s;" % cap))
            cases.append(Case("threads", meshplan_search + ["--threads", threads,
                                                            "--simulate-top", "8"],
                              shell_prefix="ulimit -v %s;" % cap))
    return cases


SURFACES = collections.OrderedDict([
    ("model yaml", model_cases), ("hardware yaml", hardware_cases),
    ("cluster yaml", cluster_cases), ("plan file", plan_file_cases),
    ("config.json", hf_cases), ("measured.json", measured_cases),
    ("sweep record", sweep_cases), ("validate row", validate_cases), ("flags", flag_cases),
    ("plan string", plan_string_cases), ("input path", input_path_cases),
    ("output path", output_path_cases), ("ambiguity", ambiguity_cases),
    ("threads", thread_cases),
])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="folder with the meshplan and meshplan-exec binaries")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=60, help="seconds per case")
    ap.add_argument("--only", action="append", help="run only this surface (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the cases, run none")
    ap.add_argument("--verbose", action="store_true", help="print every case's exit code")
    opts = ap.parse_args()

    cases = []
    for name, make in SURFACES.items():
        if not opts.only or name in opts.only:
            cases += make()
    for c in cases:  # the shell prefix may name the case folder too
        c.shell_prefix = c.shell_prefix
    if opts.list:
        for c in cases:
            print(c.surface, "|", " ".join(_quote(a) for a in c.args))
        print(len(cases), "cases")
        return 0
    if not os.access(os.path.join(opts.build, "meshplan"), os.X_OK):
        sys.exit("hostile_campaign.py: no meshplan binary in %s (build first, or --build DIR)"
                 % opts.build)

    def one(c):
        # "{dir}" in a shell prefix: substituted inside run_case through the args' folder.
        return c, run_case_with_prefix(c, opts.build, opts.timeout)

    by_surface = collections.Counter()
    by_outcome = collections.Counter()
    by_surface_outcome = collections.defaultdict(collections.Counter)
    findings = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        for c, (code, output, found, cmd) in pool.map(one, cases):
            outcome = "exit %d" % code
            by_surface[c.surface] += 1
            by_outcome[outcome] += 1
            by_surface_outcome[c.surface][outcome] += 1
            if opts.verbose:
                print("%-14s %-8s %s" % (c.surface, outcome, cmd[:200]))
            if found:
                findings.append((c.surface, cmd, code, found, output[-600:]))

    print("hostile campaign: %d cases" % len(cases))
    print("by surface:")
    for s, n in by_surface.items():
        print("  %-14s %5d   %s" % (s, n, ", ".join("%s: %d" % kv for kv in
                                                     sorted(by_surface_outcome[s].items()))))
    print("by outcome: " + ", ".join("%s: %d" % kv for kv in sorted(by_outcome.items())))
    kinds = collections.Counter(f.split(" ")[0] for _, _, _, found, _ in findings for f in found)
    print("findings: %d (%s)" % (len(findings), ", ".join("%s: %d" % kv for kv in kinds.items())
                                 or "none"))
    for surface, cmd, code, found, output in findings:
        print("\n[%s] exit %d: %s\n  %s\n  %s" % (surface, code, "; ".join(found), cmd[:400],
                                                  output.strip().replace("\n", "\n  ")[-400:]))
    return 1 if findings else 0


def run_case_with_prefix(case, build, timeout):
    """run_case, with "{dir}" in the shell prefix resolved to the case's folder."""
    if "{dir}" not in case.shell_prefix:
        return run_case(case, build, timeout)
    prefix = case.shell_prefix
    patched = Case(case.surface, case.args, case.files, case.exe)
    patched.shell_prefix = prefix.replace("{dir}", '"$PWD"')
    return run_case(patched, build, timeout)


if __name__ == "__main__":
    sys.exit(main())
