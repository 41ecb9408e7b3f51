#!/usr/bin/env bash
# The multi-rank CPU step-time loop (docs/validation/cpu_ranks.md): calibrate this CPU once
# (meshplan calibrate --collective-ranks 2: the default calibration of its default model,
# tiny-llama), then for every plan in tests/data/cpu_loop (a model of other shapes, 2 ranks:
# dp, ZeRO-1/2/3, tp, tp+sp, pp) predict the step time, run the plan on 2 local ranks
# (meshplan run) and compare. Prints one line per plan (predicted, measured, error, and peak memory error of rank 0) and
# the median |error|. A measurement on a shared machine, not a test: it exits 0 when every
# command ran, whatever the errors. Run it on a quiet machine.
#
#   scripts/cpu_rank_loop.sh [--build DIR] [--keep DIR] [--quick]
#     --build DIR  the build folder with meshplan (default: build)
#     --quick      calibrate with --quick (about 35 s sooner, noisier figures)
#     --keep DIR   work in DIR and keep it (calibration, measured.json files); default: a
#                  temporary folder, removed at the end
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
keep=""
quick=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    --quick) quick=(--quick); shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cpu_rank_loop.sh: unknown argument '$1' (expected --build DIR, --keep DIR, --quick)" >&2; exit 2 ;;
  esac
done
meshplan="$build/meshplan"
[[ -x "$meshplan" ]] || { echo "cpu_rank_loop.sh: no $meshplan (build first: scripts/build.sh)" >&2; exit 2; }
command -v jq >/dev/null || { echo "cpu_rank_loop.sh: needs jq" >&2; exit 2; }
if [[ -n "$keep" ]]; then work="$keep"; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
cp "$root"/tests/data/cpu_loop/*.yaml "$work/"

echo "calibrating: meshplan calibrate ${quick[*]} --collective-ranks 2 --out cpu.yaml"
"$meshplan" calibrate "${quick[@]}" --collective-ranks 2 --out "$work/cpu.yaml" --report "$work/calibration.json" \
  > "$work/calibrate.log"
grep -E '^(rates|network)' "$work/calibrate.log"
printf '%-16s %12s %12s %8s %10s\n' plan predicted_ms measured_ms error_% memory_%
errors=()
for plan in "$work"/*.yaml; do
  name=$(basename "$plan" .yaml)
  grep -q '^plan:' "$plan" || continue
  "$meshplan" run "$plan" --out "$work/$name.measured.json" > "$work/$name.run.log" 2>&1
  json=$("$meshplan" compare "$plan" "$work/$name.measured.json" --format json --tolerance 1000)
  step=$(jq -r '.figures[] | select(.figure == "step time") | "\(.predicted * 1000) \(.measured * 1000) \(.error_pct)"' <<< "$json")
  memory=$(jq -r '[.figures[] | select(.figure | startswith("peak memory rank 0"))][0].error_pct' <<< "$json")
  read -r predicted measured error <<< "$step"
  printf '%-16s %12.1f %12.1f %+8.1f %+10.2f\n' "$name" "$predicted" "$measured" "$error" "$memory"
  errors+=("${error#-}")
done
printf '%s\n' "${errors[@]}" | sort -g | awk '{a[NR]=$1} END {m = NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2;
  printf "median |error| %.1f%% over %d plans; max %.1f%%\n", m, NR, a[NR]}'
