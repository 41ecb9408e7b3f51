#!/usr/bin/env bash
# Speed against another revision, on this machine, in the same run (issue 30's "speed holds"):
# builds REV's `meshplan` and its Google Benchmark binary in a git worktree (Release; no
# LibTorch, CUDA or GUI; ccache when installed), builds this tree's, then runs the two in
# turn ROUNDS times: `meshplan search --bench --threads 2` (its wall and CPU lines) and the
# cost-model benchmarks matching FILTER (medians of 3 repetitions).
# Usage: scripts/bench_against.sh [--rounds N] [--filter REGEX] REV
#   scripts/bench_against.sh 71346fa                  (the base of issue 30: docs/benchmarks.md)
#   scripts/bench_against.sh --filter 'BuildStepWork$' HEAD~3
# The worktree stays in ${MESHPLAN_BENCH_DIR:-/tmp/meshplan-bench}/REV for the next run.
# A benchmark one side lacks prints nothing for that side.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MESHPLAN_BUILD_DIR:-$root/build}"
rounds=3
filter='BuildStepWork|Estimate/|AnalyticStepTime'
rev=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="${2:-}"; shift 2 || { echo "bench_against: --rounds needs a number" >&2; exit 2; } ;;
    --filter) filter="${2:-}"; shift 2 || { echo "bench_against: --filter needs a regex" >&2; exit 2; } ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_against: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$rev" ] || { echo "bench_against: one revision only, got $rev and $1" >&2; exit 2; }
       rev="$1"; shift ;;
  esac
done
[ -n "$rev" ] || { echo "bench_against: which revision? e.g. scripts/bench_against.sh 71346fa" >&2; exit 2; }
case "$rounds" in ''|*[!0-9]*|0) echo "bench_against: --rounds must be a whole number >= 1, got '$rounds'" >&2; exit 2 ;; esac
commit="$(git -C "$root" rev-parse --verify --quiet "$rev^{commit}")" ||
  { echo "bench_against: $rev is not a commit of $root" >&2; exit 2; }
short="$(git -C "$root" rev-parse --short "$commit")"

other="${MESHPLAN_BENCH_DIR:-/tmp/meshplan-bench}/$short"
if [ ! -d "$other/.git" ] && [ ! -f "$other/.git" ]; then
  mkdir -p "$(dirname "$other")"
  git -C "$root" worktree add --detach "$other" "$commit" >/dev/null
fi
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
configure() {  # $1: source tree, $2: build folder
  [ -f "$2/CMakeCache.txt" ] && return 0
  local generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  CCACHE_BASEDIR="$1" cmake -S "$1" -B "$2" "${generator[@]}" "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DMESHPLAN_WITH_TORCH=OFF -DMESHPLAN_WITH_CUDA=OFF \
    -DMESHPLAN_WITH_GUI=OFF >/dev/null
}
echo "bench_against: building $short in $other/build (minutes the first time)" >&2
configure "$other" "$other/build"
CCACHE_BASEDIR="$other" cmake --build "$other/build" -j "$(nproc)" --target meshplan meshplan_bench >/dev/null
echo "bench_against: building this tree in $build" >&2
[ -f "$build/CMakeCache.txt" ] || configure "$root" "$build"
CCACHE_BASEDIR="$root" cmake --build "$build" -j "$(nproc)" --target meshplan meshplan_bench >/dev/null

bench_binary() { find "$1" -name meshplan_bench -type f -perm -u+x | head -1; }
run_side() {  # $1: label, $2: source tree, $3: build folder
  local bench
  bench="$(bench_binary "$3")"
  MESHPLAN_CONFIGS="$2/configs" "$3/meshplan" search --bench --threads 2 2>&1 |
    awk -v side="$1" '/^[^ ].* on [0-9]+ / {name=$1} /^ +wall/ {sub(/^ +/, ""); print side "  search " name ": " $0}'
  "$bench" --benchmark_filter="$filter" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true 2>/dev/null |
    awk -v side="$1" '/_median/ {print side "  " $1 " " $2 " " $3}'
}
for round in $(seq 1 "$rounds"); do
  echo "round $round of $rounds"
  run_side "$short" "$other" "$other/build"
  run_side "this" "$root" "$build"
done
