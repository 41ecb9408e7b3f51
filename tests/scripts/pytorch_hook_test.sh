#!/usr/bin/env bash
# A real plain-PyTorch run read back (docs/framework_logs.md "The PyTorch hook"):
# scripts/pytorch_cpu_run.py trains tests/data/framework_logs/pytorch_cpu_plan.yaml's model on 2
# Gloo CPU ranks under the venv's torchrun and writes the hook's JSON per rank; `meshplan compare
# --log` reads them under the pytorch profile. Passes when compare exits 0 or 1 (a figure's error
# is not what this checks), its table names the profile, and its measured step time is the
# median after the first step of the slowest rank's step times in the JSON.
#   pytorch_hook_test.sh MESHPLAN PYTHON
# PYTHON empty (a build without the torch venv, MESHPLAN_SKIP_TORCH_WHEEL=1): skipped (exit 77).
set -euo pipefail
meshplan="$1"
python="${2:-}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ -z "$python" ] || [ ! -x "$python" ]; then
  echo "skipped: no torch venv in this build (scripts/build.sh installs it; MESHPLAN_REFERENCE_PYTHON is empty)"
  exit 77
fi
scratch="$(mktemp -d /tmp/pytorch_hook_XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
port=$((20000 + RANDOM % 20000))
OMP_NUM_THREADS=1 "$(dirname "$python")/torchrun" --nproc-per-node 2 --master-port "$port" \
  "$root/scripts/pytorch_cpu_run.py" --out "$scratch/out" --steps 4 > "$scratch/run.log" 2>&1 ||
  { cat "$scratch/run.log"; echo "FAIL: the PyTorch run failed"; exit 1; }
plan="$root/tests/data/framework_logs/pytorch_cpu_plan.yaml"
set +e
"$meshplan" compare "$plan" --log "$scratch"/out/meshplan_rank0.json "$scratch"/out/meshplan_rank1.json \
  --framework pytorch > "$scratch/table.txt" 2>&1
table=$?
"$meshplan" compare "$plan" --log "$scratch"/out/meshplan_rank0.json "$scratch"/out/meshplan_rank1.json \
  --framework pytorch --format json > "$scratch/compare.json" 2> /dev/null
set -e
cat "$scratch/table.txt"
if [ "$table" -ne 0 ] && [ "$table" -ne 1 ]; then echo "FAIL: compare exited $table"; exit 1; fi
grep -q "pytorch" "$scratch/table.txt" || { echo "FAIL: the table does not name the profile"; exit 1; }
"$python" - "$scratch" <<'PY'
import json, statistics, sys
d = sys.argv[1]
ranks = [json.load(open(f"{d}/out/meshplan_rank{r}.json")) for r in (0, 1)]
slowest = [max(t) for t in zip(*(r["step_times_s"] for r in ranks))]
expected = statistics.median(slowest[1:])
figures = {f["figure"]: f for f in json.load(open(f"{d}/compare.json"))["figures"]}
measured = figures["step time"]["measured"]
if abs(measured - expected) > 1e-9 * expected:
    sys.exit(f"FAIL: compare's measured step time {measured} is not the JSON's median {expected}")
print(f"ok: measured step time {measured:.4f} s = the hook's median after warm-up")
PY
