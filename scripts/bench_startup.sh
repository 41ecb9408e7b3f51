#!/usr/bin/env bash
# Whole-process speed of the planner commands (issue goals in brackets), medians by
# hyperfine, peak memory (max RSS) by GNU time:
#   meshplan --help                                      [< 15 ms, < 15 MB]
#   meshplan estimate, one llama3-70b plan on 64 H100    [< 20 ms]
#   meshplan search, llama3.1-405b on 16,384 H100        [< 0.2 s on 2 threads]
#   meshplan search, mt-nlg-530b on 5,120 A100           [< 0.2 s on 2 threads]
#   meshplan simulate, one 405B-class step               [< 30 ms]
#     (llama3.1-405b with 128 layers, dp=128 tp=8 pp=16 interleaved, 16 micro-batches:
#     the shape of tests/bench/sim_bench.cc; 126 layers do not split into 16 x 2 chunks)
# Usage: scripts/bench_startup.sh [--binary PATH] [--runs N] [--json FILE]
# Needs hyperfine (Debian: hyperfine; scripts/install_deps.sh installs it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
binary="${MESHPLAN_BUILD_DIR:-$root/build}/meshplan"
runs=30
json=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_startup: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v hyperfine >/dev/null || { echo "bench_startup: hyperfine is missing (apt-get install hyperfine)" >&2; exit 2; }
[ -x "$binary" ] || { echo "bench_startup: no meshplan binary at $binary (scripts/build.sh builds it)" >&2; exit 2; }
export MESHPLAN_CONFIGS="$root/configs"

# The 405B-class model of the simulate row: llama3.1-405b with 128 layers.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
sed 's/^layers: 126 /layers: 128 /' "$root/configs/models/llama3.1-405b.yaml" > "$tmp/405b-128l.yaml"
grep -q '^layers: 128 ' "$tmp/405b-128l.yaml" || { echo "bench_startup: cannot make the 128-layer 405B model" >&2; exit 1; }

names=("--help" "estimate 70B" "search 405B/16384" "search 530B/5120" "simulate 405B")
goals_ms=(15 20 200 200 30)
commands=(
  "$binary --help"
  "$binary estimate --model llama3-70b --cluster 64xH100 --global-batch 512 --seq 4096 --plan dp=8,tp=8,zero=1,sp=1,mbs=1"
  "$binary search --model llama3.1-405b --cluster 16384xh100-ib --global-batch 2048 --seq 8192 --threads 2 --top 1"
  "$binary search --model mt-nlg-530b --cluster 5120xa100-ib --global-batch 1920 --seq 2048 --threads 2 --top 1"
  "$binary simulate --model $tmp/405b-128l.yaml --cluster 16384xh100-ib --global-batch 2048 --seq 8192 --plan dp=128,tp=8,pp=16,sp=1,zero=1,schedule=interleaved,vpp=2"
)

printf '%-20s %12s %10s %12s %8s\n' "command" "median ms" "goal ms" "max RSS MB" "status"
rows=()
for i in "${!commands[@]}"; do
  cmd="${commands[$i]}"
  # Each command must succeed before it is timed (a refusal would be fast and wrong).
  $cmd >/dev/null 2>"$tmp/err" || { echo "bench_startup: failed: $cmd" >&2; cat "$tmp/err" >&2; exit 1; }
  hyperfine --shell=none --warmup 3 --runs "$runs" --export-json "$tmp/h.json" "$cmd" >/dev/null 2>&1
  median_ms=$(python3 -c "import json,sys; print(f\"{json.load(open(sys.argv[1]))['results'][0]['median']*1e3:.1f}\")" "$tmp/h.json")
  /usr/bin/time -f '%M' -o "$tmp/rss" $cmd >/dev/null 2>&1
  rss_mb=$(python3 -c "import sys; print(f'{int(open(sys.argv[1]).read().split()[-1])/1024:.1f}')" "$tmp/rss")
  status=$(python3 -c "import sys; print('ok' if float(sys.argv[1]) < float(sys.argv[2]) else 'SLOW')" "$median_ms" "${goals_ms[$i]}")
  if [ "$i" -eq 0 ]; then
    status=$(python3 -c "import sys; print(sys.argv[1] if float(sys.argv[2]) < 15 else 'BIG')" "$status" "$rss_mb")
  fi
  printf '%-20s %12s %10s %12s %8s\n' "${names[$i]}" "$median_ms" "${goals_ms[$i]}" "$rss_mb" "$status"
  rows+=("{\"name\": \"${names[$i]}\", \"median_ms\": $median_ms, \"goal_ms\": ${goals_ms[$i]}, \"max_rss_mb\": $rss_mb, \"status\": \"$status\"}")
done
if [ -n "$json" ]; then
  (IFS=,; echo "{\"binary\": \"$binary\", \"runs\": $runs, \"results\": [${rows[*]}]}") > "$json"
fi
