#!/usr/bin/env bash
# The GPU sweep in one command, from the GPU bundle (scripts/gpu_bundle.sh: no build on the
# GPU machine), saving as it goes (docs/gpu_sweep.md). In order of value:
#   a. calibrate: micro-benchmarks (the model's GEMM shapes, the attention core (flash on a
#      GPU), HBM bandwidth, kernel launch overhead) -> a calibrated hardware file;
#   b. single-GPU plans of llama-1b (sequence 2048, micro-batch 1/2/4/8, recompute
#      none/selective/full, bf16): predicted against measured;
#   c. emulated ranks of large plans (llama3-70b tp=8 on 64 x H100, llama3.1-405b tp=8 pp=16
#      first and last stage, llama3-8b ZeRO-3 at dp=64; `run --emulate-rank`): their memory
#      and compute are real, their communication is not;
#   d. two ranks sharing the GPU over Gloo (their time is not the plan's), and whether NCCL
#      takes two ranks on one GPU.
# Each part packs its folder into OUT/sweep-<gpu>-<part>.tar.gz after every item it finishes
# (a call killed at its limit still returns what finished; at most 8 files come back: the
# four tarballs, sweep.log and timings.tsv). Unpack them at the repository root. A part past
# its share of --budget-s (a: 25%, b: up to 65%, c: up to 85%, d: the rest) skips what is left
# of it, saying so.
#
#   bash scripts/gpu_sweep.sh [--bundle DIR] [--out DIR] [--budget-s S] [--steps N] [--cpu-smoke]
#     --bundle DIR  the bundle (default .gpu-bundle)
#     --out DIR     where the results go (default $OUT, else /tmp/meshplan-sweep)
#     --budget-s S  the seconds the sweep may take (default 450: 7.5 of the 8 minutes)
#     --steps N     optimizer steps per run (default 6, 2 of them warm-up)
#     --cpu-smoke   the same parts end to end on this CPU with tiny-llama (CI)
# Exit 2 on bad arguments or a bundle that does not start; otherwise 0, with every failed
# item named in sweep.log (the sweep goes on past it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$root/.gpu-bundle"
out="${OUT:-/tmp/meshplan-sweep}"
budget_s=450
steps=6
cpu_smoke=0
refuse() { echo "gpu_sweep: $1" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle="${2:?}"; shift 2 ;;
    --out) out="${2:?}"; shift 2 ;;
    --budget-s) budget_s="${2:?}"; shift 2 ;;
    --steps) steps="${2:?}"; shift 2 ;;
    --cpu-smoke) cpu_smoke=1; shift ;;
    *) refuse "unknown argument '$1' (expected --bundle, --out, --budget-s, --steps, --cpu-smoke)" ;;
  esac
done
[[ "$budget_s" =~ ^[1-9][0-9]*$ ]] || refuse "--budget-s needs a positive integer, got '$budget_s'"
[[ "$steps" =~ ^[3-9]$|^[1-9][0-9]+$ ]] || refuse "--steps needs an integer >= 3, got '$steps'"
[ -x "$bundle/launch" ] || refuse "no bundle at $bundle (scripts/gpu_bundle.sh makes it)"
bundle="$(cd "$bundle" && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
tree="$(mktemp -d "${TMPDIR:-/tmp}/meshplan-sweep.XXXXXX")"  # the repository-relative results
trap 'rm -rf "$tree"' EXIT
exec > >(tee -a "$out/sweep.log") 2>&1
start_ns="$(date +%s%N)"
elapsed_s() { echo $((($(date +%s%N) - start_ns) / 1000000000)); }
say() { echo "[gpu_sweep $(date -u +%H:%M:%S) +$(elapsed_s)s] $*"; }
printf 'part\titem\tseconds\tresult\n' > "$out/timings.tsv"
# timed PART ITEM COMMAND...: runs it, records its wall time and result; its status is returned.
timed() {
  local part="$1" item="$2" t0 rc=0
  shift 2
  t0="$(date +%s%N)"
  "$@" || rc=$?
  printf '%s\t%s\t%s\t%s\n' "$part" "$item" \
    "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')" \
    "$([ $rc -eq 0 ] && echo ok || echo "exit $rc")" >> "$out/timings.tsv"
  return $rc
}
# within PERCENT: true while the sweep is inside that share of its budget.
within() { [ "$(elapsed_s)" -lt $((budget_s * $1 / 100)) ]; }

# The bundle's libraries found once (not by every command's launcher).
export MESHPLAN_TORCH_LIBS
MESHPLAN_TORCH_LIBS="$(timed start "find torch" "$bundle/launch" --libs)" ||
  refuse "the bundle cannot find the torch wheel (see above)"
mp() { "$bundle/launch" meshplan "$@"; }
timed start "bundle starts" mp --help > /dev/null || refuse "the bundle's meshplan does not start"

if [ "$cpu_smoke" = 1 ]; then
  gpu="cpu-smoke"
  device="cpu"
  backend="gloo"
  export OMP_NUM_THREADS=1
else
  say "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true)"
  name="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z')"
  case "$name" in
    *h200*) gpu="h200"; base="h200" ;;
    *h100*) gpu="h100"; base="h100-sxm" ;;
    *) gpu="$(echo "$name" | tr -c 'a-z0-9\n' '-' | sed 's/^nvidia-//')"; base="h100-sxm" ;;
  esac
  device="cuda"
  backend="nccl"
fi
hw="$gpu-calibrated"
meas="docs/measurements/$gpu"
# Names resolve in a copy of the bundle's configs/ that also holds the calibrated files, so
# the plan files in the records name them as the repository will once unpacked.
cp -r "$bundle/configs" "$tree/configs"
export MESHPLAN_CONFIGS="$tree/configs"
cd "$tree"
mkdir -p "$meas/single" "$meas/emulated" "$meas/shared"
say "device $gpu ($device), bundle $bundle ($(head -1 "$bundle/BUILD_INFO")), budget ${budget_s}s"

# pack PART PATH...: OUT/sweep-<gpu>-PART.tar.gz holds PATHs (repository-relative), now.
pack() {
  local part="$1"
  shift
  tar czf "$out/sweep-$gpu-$part.tar.gz.tmp" "$@" && mv "$out/sweep-$gpu-$part.tar.gz.tmp" "$out/sweep-$gpu-$part.tar.gz"
}

# A JSON string literal of $1 (backslashes, quotes, control characters escaped).
json_str() {
  printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' -e 's/\r//g' |
    awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }')"
}

# dp=2,zero=3 -> "dp: 2, zero: 3" (the plan keys of the lists below, as YAML).
yaml_keys() { echo "$1" | sed 's/=/: /g; s/,/, /g'; }

# measure PART DIR NAME MODEL CLUSTER GB SEQ PRECISION PLAN-KEYS [RUN-FLAGS...]: writes the plan
# file (run by meshplan's executor: the `meshplan` profile), runs it, predicts and compares it, and writes the record DIR/NAME.json
# (planner/measure/sweep_table.h). Returns non-zero when the run failed (no record).
measure() {
  local part="$1" dir="$2" pname="$3" model="$4" cluster="$5" gb="$6" seq="$7" prec="$8" keys="$9"
  shift 9
  local work="$tree/work/$pname"
  mkdir -p "$work"
  local plan="$work/plan.yaml"
  cat > "$plan" <<EOF
model: $model
cluster: $cluster
training: {global_batch: $gb, seq_len: $seq, precision: $prec, steps: $steps, framework: meshplan}
plan: {$keys}
EOF
  local run_cmd=(run "$plan" --device "$device" --steps "$steps" --warmup 2 --out "$work/measured.json" "$@")
  local est_cmd=(estimate --plan-file "$plan" --format json)
  local cmp_cmd=(compare "$plan" "$work/measured.json" --tolerance 10 --format json)
  say "$part $pname: meshplan ${run_cmd[*]}"
  if ! timed "$part" "$pname" mp "${run_cmd[@]}" > "$work/run.log" 2>&1; then
    tail -15 "$work/run.log"
    say "$part $pname: run FAILED (no record)"
    cp "$work/run.log" "$dir/$pname.failed.log"
    return 1
  fi
  mp "${est_cmd[@]}" > "$work/estimate.json"
  mp "${cmp_cmd[@]}" > "$work/compare.json" || true  # exit 1: outside the tolerance
  {
    printf '{\n"record": "meshplan sweep v1",\n"name": %s,\n' "$(json_str "$pname")"
    printf '"plan_file": %s,\n' "$(json_str "$(cat "$plan")")"
    printf '"commands": [%s, %s, %s],\n' "$(json_str "meshplan ${run_cmd[*]}")" \
      "$(json_str "meshplan ${est_cmd[*]}")" "$(json_str "meshplan ${cmp_cmd[*]}")"
    printf '"estimate": '; cat "$work/estimate.json"
    printf ',\n"measured": '; cat "$work/measured.json"
    printf ',\n"comparison": '; cat "$work/compare.json"
    printf '}\n'
  } > "$dir/$pname.json"
  grep -h '"figure"\|"error_pct"' "$work/compare.json" | paste - - | sed 's/^ */  /' || true
}

# ---------------------------------------------------------------------------------------
# a. Calibration (the GPU's: its model's GEMM shapes, the attention core, copies for the
#    HBM bandwidth, tiny kernels for the launch overhead; the fit goes to the hardware file)
if [ "$cpu_smoke" = 1 ]; then
  cal_cmd=(calibrate --device cpu --quick --threads 1 --base cpu-ci --out "configs/hardware/$hw.yaml"
           --report "$meas/calibration.json")
else
  cal_cmd=(calibrate --device cuda --precision bf16 --model llama-1b --base "$base"
           --out "configs/hardware/$hw.yaml" --report "$meas/calibration.json")
fi
say "a: meshplan ${cal_cmd[*]}"
if ! timed a calibrate timeout $((budget_s * 25 / 100)) "$bundle/launch" meshplan "${cal_cmd[@]}"; then
  [ "$cpu_smoke" = 1 ] && base="cpu-ci"
  say "a: calibration FAILED or ran out of its time: predicting with configs/hardware/$base.yaml as is"
  cp "configs/hardware/$base.yaml" "configs/hardware/$hw.yaml"
fi
for n in 1 2 8; do
  cat > "configs/clusters/$hw-${n}x.yaml" <<EOF
# $n x $gpu, calibrated by \`meshplan ${cal_cmd[*]}\` (scripts/gpu_sweep.sh);
# the network from the hardware file's network block. 2x: two ranks sharing ONE GPU.
name: $hw-${n}x
gpu: $hw
nodes: 1
gpus_per_node: $n
EOF
done
cal_files=("configs/hardware/$hw.yaml" configs/clusters/"$hw"-*x.yaml)
[ -f "$meas/calibration.json" ] && cal_files+=("$meas/calibration.json")
pack a-calibration "${cal_files[@]}"

# ---------------------------------------------------------------------------------------
# b. Single-GPU plans: predicted against measured (time, MFU, peak memory)
if [ "$cpu_smoke" = 1 ]; then
  model=tiny-llama; seq=128; mbs_list=(1 2); prec=fp32
else
  model=llama-1b; seq=2048; mbs_list=(1 2 4 8); prec=bf16
fi
for mbs in "${mbs_list[@]}"; do
  for rc in none selective full; do
    pname="${model}-${prec}-s${seq}-mbs${mbs}-${rc}"
    if ! within 65; then say "b: $pname skipped (past 65% of the budget)"; continue; fi
    measure b "$meas/single" "$pname" "$model" "$hw-1x" "$mbs" "$seq" "$prec" \
      "dp: 1, mbs: $mbs, recompute: $rc" || true
    pack b-single "$meas/single"
  done
done
if ls "$meas"/single/*.json > /dev/null 2>&1 && mp measurements "$meas/single" > "$meas/single/README.md"; then
  cat "$meas/single/README.md"
  pack b-single "$meas/single"
fi

# ---------------------------------------------------------------------------------------
# c. Emulated ranks of large plans: one real rank, its peers emulated (--emulate-rank)
#    name model cluster gb seq precision plan-keys ranks (last stage: (pp-1)*cp*tp)
if [ "$cpu_smoke" = 1 ]; then
  emulated=(
    "tiny-tp2-of-8 tiny-llama $hw-8x 4 128 fp32 dp=4,tp=2,zero=1 0"
    "tiny-tp2-pp2-first-last tiny-llama $hw-8x 4 128 fp32 dp=2,tp=2,pp=2,zero=1 0,2"
    "tiny-zero3-dp8 tiny-llama $hw-8x 8 128 fp32 dp=8,zero=3 0"
  )
else
  emulated=(
    "llama3-70b-tp8-of-64 llama3-70b 64xh100-ib 16 4096 mixed dp=8,tp=8,sp=true,zero=2,recompute=selective 0"
    "llama3.1-405b-tp8-pp16-first-last llama3.1-405b 1024xh100-ib 32 4096 mixed dp=8,tp=8,pp=16,sp=true,zero=1,recompute=full,first_stage_layers=7,last_stage_layers=7 0,120"
    "llama3-8b-zero3-dp64 llama3-8b 64xh100-ib 64 4096 mixed dp=64,zero=3,recompute=selective 0"
  )
fi
for e in "${emulated[@]}"; do
  read -r pname emodel cluster gb eseq eprec keys ranks <<< "$e"
  for rank in ${ranks//,/ }; do
    if ! within 85; then say "c: $pname rank $rank skipped (past 85% of the budget)"; continue; fi
    measure c "$meas/emulated" "$pname-rank$rank" "$emodel" "$cluster" "$gb" "$eseq" "$eprec" \
      "$(yaml_keys "$keys,mbs=1")" --emulate-rank "$rank" --backend "$backend" || true
    pack c-emulated "$meas/emulated"
  done
done

# ---------------------------------------------------------------------------------------
# d. Two ranks sharing the GPU over Gloo (per-rank memory; their time is not the plan's)
if [ "$cpu_smoke" = 1 ]; then
  shared=("tiny-zero3-2ranks tiny-llama 4 128 fp32 dp=2,zero=3" "tiny-tp2-2ranks tiny-llama 2 128 fp32 tp=2,sp=true")
else
  shared=("spec-246m-zero3-2ranks spec-246m 4 2048 mixed dp=2,zero=3" "spec-246m-tp2-2ranks spec-246m 2 2048 mixed tp=2,sp=true")
fi
for s in "${shared[@]}"; do
  read -r pname smodel gb sseq sprec keys <<< "$s"
  if ! within 100; then say "d: $pname skipped (past the budget)"; continue; fi
  measure d "$meas/shared" "$pname" "$smodel" "$hw-2x" "$gb" "$sseq" "$sprec" "$(yaml_keys "$keys,mbs=1")" \
    --nproc 2 --backend gloo || true
  pack d-shared "$meas/shared"
done
if [ "$cpu_smoke" = 0 ] && within 100; then
  say "d: NCCL with two ranks on one GPU: executor_tests \"[two_ranks_one_gpu]\""
  { echo "# $(date -u +%F) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
    echo "# command: .gpu-bundle/launch executor_tests \"[two_ranks_one_gpu]\" -s"
    timed d nccl-two-ranks timeout 60 "$bundle/launch" executor_tests "[two_ranks_one_gpu]" -s 2>&1 |
      grep -A3 "NCCL .* two ranks" || echo "test output not found"
  } > "$meas/shared/nccl_two_ranks_one_gpu.txt" 2>&1 || true
  pack d-shared "$meas/shared"
fi
say "done: $(ls "$out" | tr '\n' ' ')"
