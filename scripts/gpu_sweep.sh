#!/usr/bin/env bash
# The GPU sweep in one command on a lent H100 / H200 (see docs/gpu_sweep.md):
# build meshplan against the machine's PyTorch LibTorch and NCCL, calibrate the GPU, run
# single-GPU plans of spec-246m and llama-1b (micro-batch, sequence 512-8192, recompute
# none/selective/full, bf16 and mixed), and write one record per plan with the prediction
# and the measurement side by side and the commands that produced them. Also asks NCCL
# whether it accepts two ranks on one GPU.
#
# On the device machine, from the repository root, with .deps carried (docs/gpu_sweep.md):
#   bash scripts/gpu_sweep.sh                 # everything (about 8-10 minutes)
#   bash scripts/gpu_sweep.sh --part 1/2      # calibration + the first half of the plans
#   bash scripts/gpu_sweep.sh --part 2/2      # calibration + the second half
# Here, without a GPU, the pipeline itself (plan files, run, estimate, compare, records,
# table) is checked on the CPU with tiny-llama:
#   bash scripts/gpu_sweep.sh --cpu-smoke --binary build/meshplan --out /tmp/sweep
#
# What it writes, repository-relative, then packs into $OUT/sweep-<gpu>.tar.gz (the device
# tool returns at most 8 files): configs/hardware/<gpu>-calibrated.yaml,
# configs/clusters/<gpu>-calibrated-1x.yaml, docs/measurements/<gpu>/<plan>.json (records:
# planner/measure/sweep_table.h), calibration.json, nccl_two_ranks_one_gpu.txt, README.md (the
# table: `meshplan measurements docs/measurements/<gpu>`). Unpack it at the repository
# root: `tar xzf sweep-h100.tar.gz`.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${OUT:-/tmp/meshplan-sweep}"
binary=""
part="1/1"
steps=10
warmup=3
cpu_smoke=0
build="$root/build-gpu"
while [ $# -gt 0 ]; do
  case "$1" in
    --part) part="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --cpu-smoke) cpu_smoke=1; shift ;;
    *) echo "gpu_sweep: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
log="$out/sweep.log"
exec > >(tee -a "$log") 2>&1
say() { echo "[gpu_sweep $(date +%H:%M:%S)] $*"; }

# A JSON string literal of $1 (backslashes, quotes, control characters escaped).
json_str() {
  printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' -e 's/\r//g' |
    awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }')"
}

# ---------------------------------------------------------------------------------------
# 1. Build (GPU) or take the given binary (CPU smoke)
if [ "$cpu_smoke" = 1 ]; then
  [ -n "$binary" ] || { echo "gpu_sweep: --cpu-smoke needs --binary PATH" >&2; exit 2; }
  gpu="cpu-smoke"
  device="cpu"
  export OMP_NUM_THREADS=1
else
  say "environment: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true)"
  if [ -d .deps ]; then
    mkdir -p /opt/deps
    for f in .deps/*.deb; do dpkg -x "$f" /opt/deps; done
  fi
  torch_prefix="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')"
  nccl_root="$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))')"
  export LD_LIBRARY_PATH="/opt/deps/usr/lib/x86_64-linux-gnu:$nccl_root/lib:${LD_LIBRARY_PATH:-}"
  say "LibTorch: $torch_prefix; NCCL: $nccl_root"
  if [ -z "$binary" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$torch_prefix;/opt/deps/usr" -DNCCL_ROOT="$nccl_root" \
      -DMESHPLAN_WITH_GUI=OFF -DMESHPLAN_BUILD_BENCHMARKS=OFF > "$out/cmake.log" 2>&1 ||
      { tail -40 "$out/cmake.log"; exit 1; }
    time cmake --build "$build" -j16 --target meshplan executor_tests > "$out/build.log" 2>&1 ||
      { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; exit 1; }
    binary="$build/meshplan"
  fi
  name="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z')"
  case "$name" in
    *h200*) gpu="h200" ;;
    *h100*) gpu="h100" ;;
    *) gpu="$(echo "$name" | tr -c 'a-z0-9\n' '-' | sed 's/^nvidia-//')" ;;
  esac
  device="cuda"
fi
mp() { "$binary" "$@"; }
hw="$gpu-calibrated"
# Where the repository-relative outputs go: the repository (the device machine's copy) on a
# GPU; a scratch tree for the CPU smoke run, which must not touch the checkout.
dest="$root"
[ "$cpu_smoke" = 1 ] && dest="$out/tree"
mkdir -p "$dest"
cd "$dest"
meas="docs/measurements/$gpu"
mkdir -p "$meas" configs/hardware configs/clusters
cluster_ref="$hw-1x"                                              # a configs/ name on the GPU
[ "$cpu_smoke" = 1 ] && cluster_ref="$dest/configs/clusters/$hw-1x.yaml"  # a path here
say "device $gpu, binary $binary, part $part"

# ---------------------------------------------------------------------------------------
# 2. Calibrate (every part: each call of the device tool is a fresh machine)
if [ "$cpu_smoke" = 1 ]; then
  cal_cmd=(calibrate --device cpu --quick --threads 1 --collective-ranks 2
           --out "configs/hardware/$hw.yaml" --report "$meas/calibration.json")
else
  cal_cmd=(calibrate --device cuda --precision bf16 --model llama-1b
           --out "configs/hardware/$hw.yaml" --report "$meas/calibration.json")
fi
say "meshplan ${cal_cmd[*]}"
mp "${cal_cmd[@]}"
cat > "configs/clusters/$hw-1x.yaml" <<EOF
# One $gpu calibrated by \`meshplan ${cal_cmd[*]}\`
# (scripts/gpu_sweep.sh); tiers from the hardware file's network block.
name: $hw-1x
gpu: ../hardware/$hw.yaml   # relative to this file
nodes: 1
gpus_per_node: 1
EOF

# Two ranks sharing the one GPU (multi-rank plans' per-rank memory; Gloo over CUDA tensors:
# NCCL refuses two ranks on one device). Their time is not the plan's time.
cat > "configs/clusters/$hw-2x-shared.yaml" <<EOF
# Two ranks on ONE $gpu (per-rank memory only; scripts/gpu_sweep.sh)
name: $hw-2x-shared
gpu: ../hardware/$hw.yaml   # relative to this file
nodes: 1
gpus_per_node: 2
EOF

# ---------------------------------------------------------------------------------------
# 3. The plans: name model global_batch seq micro_batch recompute precision [mesh nproc]
#    (mesh: extra plan keys, e.g. dp:2,zero:3; nproc > 1 shares the GPU over Gloo)
if [ "$cpu_smoke" = 1 ]; then
  plans=(
    "tiny-fp32-s128-mbs2-none tiny-llama 4 128 2 none fp32"
    "tiny-fp32-s256-mbs1-full tiny-llama 2 256 1 full fp32"
    "tiny-mixed-s128-mbs2-zero3-2ranks tiny-llama 4 128 2 none mixed dp:2,zero:3 2"
  )
else
  plans=(
    "s246-bf16-s512-mbs8-none spec-246m 8 512 8 none bf16"
    "s246-mixed-s2048-mbs4-none spec-246m 8 2048 4 none mixed"
    "s246-mixed-s2048-mbs4-selective spec-246m 8 2048 4 selective mixed"
    "s246-bf16-s4096-mbs2-selective spec-246m 4 4096 2 selective bf16"
    "s246-mixed-s8192-mbs1-full spec-246m 2 8192 1 full mixed"
    "l1b-mixed-s2048-mbs4-none llama-1b 8 2048 4 none mixed"
    "l1b-bf16-s2048-mbs4-none llama-1b 8 2048 4 none bf16"
    "l1b-mixed-s2048-mbs8-selective llama-1b 8 2048 8 selective mixed"
    "l1b-mixed-s512-mbs16-none llama-1b 16 512 16 none mixed"
    "l1b-mixed-s4096-mbs2-full llama-1b 4 4096 2 full mixed"
    "l1b-bf16-s8192-mbs1-selective llama-1b 2 8192 1 selective bf16"
    "l1b-mixed-s8192-mbs1-full llama-1b 2 8192 1 full mixed"
    "s246-mixed-s2048-mbs2-zero3-2ranks spec-246m 4 2048 2 none mixed dp:2,zero:3 2"
    "s246-mixed-s2048-mbs2-tp2-2ranks spec-246m 2 2048 2 selective mixed tp:2,sp:true 2"
  )
fi
k="${part%/*}"
n="${part#*/}"
work="$out/work"
mkdir -p "$work"
for i in "${!plans[@]}"; do
  [ $((i % n)) -eq $((k - 1)) ] || continue
  read -r pname model gb seq mbs rc prec mesh nproc <<< "${plans[$i]}"
  mesh="${mesh:-dp:1}"
  nproc="${nproc:-1}"
  cluster="$cluster_ref"
  [ "$nproc" = 1 ] || cluster="${cluster_ref/-1x/-2x-shared}"
  plan="$work/$pname.yaml"
  cat > "$plan" <<EOF
model: $model
cluster: $cluster
training: {global_batch: $gb, seq_len: $seq, precision: $prec, steps: $steps}
plan: {$(echo "$mesh" | sed 's/:/: /g; s/,/, /g'), mbs: $mbs, recompute: $rc}
EOF
  run_cmd=(run "$plan" --nproc "$nproc" --device "$device" --backend gloo --steps "$steps"
           --warmup "$warmup" --out "$work/$pname.measured.json")
  est_cmd=(estimate --plan-file "$plan" --format json)
  cmp_cmd=(compare "$plan" "$work/$pname.measured.json" --tolerance 10 --format json)
  say "$pname: meshplan ${run_cmd[*]}"
  if ! mp "${run_cmd[@]}" > "$work/$pname.run.log" 2>&1; then
    tail -20 "$work/$pname.run.log"
    say "$pname: run FAILED (kept in $work/$pname.run.log; no record)"
    continue
  fi
  mp "${est_cmd[@]}" > "$work/$pname.estimate.json"
  mp "${cmp_cmd[@]}" > "$work/$pname.compare.json" || true  # exit 1: outside the tolerance
  {
    printf '{\n"record": "meshplan sweep v1",\n"name": %s,\n' "$(json_str "$pname")"
    printf '"plan_file": %s,\n' "$(json_str "$(cat "$plan")")"
    printf '"commands": [%s, %s, %s],\n' "$(json_str "meshplan ${run_cmd[*]}")" \
      "$(json_str "meshplan ${est_cmd[*]}")" "$(json_str "meshplan ${cmp_cmd[*]}")"
    printf '"estimate": '; cat "$work/$pname.estimate.json"
    printf ',\n"measured": '; cat "$work/$pname.measured.json"
    printf ',\n"comparison": '; cat "$work/$pname.compare.json"
    printf '}\n'
  } > "$meas/$pname.json"
  grep -h '"figure"\|"error_pct"' "$work/$pname.compare.json" | paste - - | sed 's/^ */  /' || true
done

# ---------------------------------------------------------------------------------------
# 4. NCCL with two ranks on one GPU (docs/executor.md): the answer, either way, goes to docs/
if [ "$cpu_smoke" = 0 ] && [ "$k" = 1 ]; then
  tests="$(dirname "$binary")/tests/executor_tests"
  if [ -x "$tests" ]; then
    say "NCCL two ranks on one GPU: $tests [two_ranks_one_gpu] -s"
    { echo "# $(date -u +%F) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
      echo "# command: build-gpu/tests/executor_tests \"[two_ranks_one_gpu]\" -s"
      "$tests" "[two_ranks_one_gpu]" -s 2>&1 | grep -A3 "NCCL .* two ranks" || echo "test output not found"
    } > "$meas/nccl_two_ranks_one_gpu.txt" 2>&1 || true
    cat "$meas/nccl_two_ranks_one_gpu.txt"
  fi
fi

# ---------------------------------------------------------------------------------------
# 5. The table, and everything packed for the trip back
if ls "$meas"/*.json > /dev/null 2>&1 && mp measurements "$meas" > "$out/table.md" 2>/dev/null; then
  { echo "# Predicted vs measured on $gpu"
    echo
    echo "Generated by \`meshplan measurements $meas\` from the sweep records here, which"
    echo "\`bash scripts/gpu_sweep.sh\` wrote (each record holds the exact commands). Hardware:"
    echo "configs/hardware/$hw.yaml, from \`meshplan ${cal_cmd[*]}\`."
    echo
    cat "$out/table.md"
  } > "$meas/README.md"
  cat "$out/table.md"
fi
tar czf "$out/sweep-$gpu-part$k.tar.gz" "configs/hardware/$hw.yaml" "configs/clusters/$hw-1x.yaml" \
  "configs/clusters/$hw-2x-shared.yaml" "$meas"
say "packed $out/sweep-$gpu-part$k.tar.gz (unpack at the repository root)"
