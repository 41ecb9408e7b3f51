#!/usr/bin/env bash
# What a collective costs between 2 CPU ranks after compute of each length
# (docs/validation/cpu_ranks.md, item 6). For every matmul side S it runs
#   meshplan calibrate --threads 1 --collective-ranks 2 --collective-bytes BYTES,8388608 --collective-chunks S
# so every collective of the benchmark follows an S^3 fp32 matmul on its rank's core, and
# prints one Markdown row per side: the chunk's compute (2 S^3 over the matmul rate that
# calibration fitted) and, per collective kind, the range of the timed rounds at BYTES, in us.
# The 8 MiB samples are there for the network fit only (one size cannot be fitted). A
# measurement: it exits 0 when every command ran; run it on a quiet machine.
#
#   scripts/collective_after_compute.sh [--build DIR] [--sides LIST] [--bytes N] [--keep DIR]
#     --build DIR   the build folder with meshplan (default: build)
#     --sides LIST  matmul sides, comma-separated (default: 128,192,256,320,384,512,768)
#     --bytes N     the collectives' full buffer in bytes (default: 196608, 192 KiB: tp2-sp's
#                   activations in tests/data/cpu_loop)
#     --keep DIR    keep each side's report (calibration JSON) in DIR; default: a temporary
#                   folder, removed at the end
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
sides="128,192,256,320,384,512,768"
bytes=196608
keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --sides)
      [[ "${2:-}" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "collective_after_compute.sh: --sides needs a comma-separated list of positive integers, got '${2:-}'" >&2; exit 2; }
      sides="$2"; shift 2 ;;
    --bytes)
      [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "collective_after_compute.sh: --bytes needs a positive integer, got '${2:-}'" >&2; exit 2; }
      bytes="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "collective_after_compute.sh: unknown argument '$1' (expected --build DIR, --sides LIST, --bytes N, --keep DIR)" >&2; exit 2 ;;
  esac
done
meshplan="$build/meshplan"
[[ -x "$meshplan" ]] || { echo "collective_after_compute.sh: no $meshplan (build first: scripts/build.sh)" >&2; exit 2; }
command -v jq >/dev/null || { echo "collective_after_compute.sh: needs jq" >&2; exit 2; }
[[ "$bytes" != 8388608 ]] || { echo "collective_after_compute.sh: --bytes must differ from the fit's 8388608" >&2; exit 2; }
if [[ -n "$keep" ]]; then work="$keep"; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi

echo "| chunk side (compute) | all-reduce | reduce-scatter | all-gather |"
echo "|---|---|---|---|"
IFS=, read -r -a side_list <<< "$sides"
for side in "${side_list[@]}"; do
  report="$work/side-$side.json"
  "$meshplan" calibrate --threads 1 --collective-ranks 2 --collective-bytes "$bytes,8388608" \
    --collective-chunks "$side" --out "$work/side-$side.yaml" --report "$report" > "$work/side-$side.log"
  # The rounds' range per kind at $bytes (the benchmark rounds the buffer to whole fp32
  # elements per rank, so match the size within 8 bytes), in us.
  jq -r --argjson side "$side" --argjson bytes "$bytes" '
    def range(k): [.collectives[] | select(.kind == k and ((.bytes - $bytes) | fabs) < 8)][0].round_s
                  | "\(min * 1e6 | round)-\(max * 1e6 | round)";
    "| \($side) (\(2 * $side * $side * $side / .rates.matmul_flops_per_s * 1e3 * 100 | round / 100) ms) | \(range("all_reduce")) | \(range("reduce_scatter")) | \(range("all_gather")) |"
  ' "$report"
done
