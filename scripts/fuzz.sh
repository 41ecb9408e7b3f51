#!/usr/bin/env bash
# Fuzzes the planner's input surfaces: builds the libFuzzer targets of tests/fuzz/ with clang
# (-fsanitize=fuzzer,address,undefined; cached in build-fuzz/) and runs each for N seconds on
# its seed corpus (configs/, tests/data/, tests/fuzz/seeds/). A crash, sanitizer report,
# stack overflow, leak, per-input timeout (10 s) or more than 2 GB of memory is a finding:
# the script then exits 1 and names the input libFuzzer saved (build-fuzz/findings/).
#
#   scripts/fuzz.sh [--seconds N] [--target NAME]     (default: 20 s, every target)
#
# Targets: model_yaml hardware_yaml cluster_yaml plan_yaml hf_config plan_string
# measured_json snapshot_header token_file output_path framework_log. Every target also gets the number and
# path shapes of tests/fuzz/hostile.dict (denormals, 1e308, hex, a second YAML document, a
# NUL) and the seeds of tests/fuzz/seeds/<target>/. Replay one input:
# build-fuzz/tests/fuzz/fuzz_NAME FILE.
# MESHPLAN_FUZZ_BUILD_DIR overrides the build folder.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MESHPLAN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
all_targets=(model_yaml hardware_yaml cluster_yaml plan_yaml hf_config plan_string measured_json
             snapshot_header token_file output_path framework_log)
seconds=20
targets=()

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --target) targets+=("${2:?--target needs a name}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --seconds must be a positive integer, got '$seconds'" >&2; exit 2
fi
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  if [[ ! " ${all_targets[*]} " =~ " $t " ]]; then
    echo "fuzz.sh: unknown target '$t'; targets: ${all_targets[*]}" >&2; exit 2
  fi
done

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found; scripts/install_deps.sh installs clang and libclang-rt-dev" >&2
  exit 2
fi

# ---- Build (configured once, then incremental) ----
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESHPLAN_FUZZ=ON -DMESHPLAN_WITH_TORCH=OFF \
    -DMESHPLAN_WITH_CUDA=OFF -DMESHPLAN_WITH_GUI=OFF -DMESHPLAN_BUILD_TESTS=OFF \
    -DMESHPLAN_BUILD_BENCHMARKS=OFF >/dev/null
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

# ---- Seed corpora: the real files of each kind ----
seeds_of() {
  case "$1" in
    model_yaml) ls "$root"/configs/models/*.yaml "$root"/tests/data/configs/model_*.yaml ;;
    hardware_yaml) ls "$root"/configs/hardware/*.yaml "$root"/tests/data/configs/gpu_*.yaml \
                      "$root"/tests/data/configs/hardware_*.yaml ;;
    cluster_yaml) ls "$root"/configs/clusters/*.yaml "$root"/tests/data/configs/cluster_*.yaml ;;
    plan_yaml) ls "$root"/configs/plans/*.yaml "$root"/tests/data/configs/plan_*.yaml ;;
    hf_config) find "$root/tests/data/hf" -name '*.json' ;;
    framework_log) ls "$root"/tests/data/framework_logs/*.log "$root"/tests/data/framework_logs/*.json ;;
  esac
  ls "$root/tests/fuzz/seeds/$1"/* 2>/dev/null || true  # each target's own seeds
}

# ---- Run ----
mkdir -p "$build/findings" "$build/logs" "$build/work"
failed=()
for t in "${targets[@]}"; do
  seeds="$build/seeds/$t" corpus="$build/corpus/$t" log="$build/logs/$t.log"
  rm -rf "$seeds"
  mkdir -p "$seeds" "$corpus"
  { seeds_of "$t" 2>/dev/null || true; } | while read -r f; do cp "$f" "$seeds/"; done
  # Run in an empty folder: relative paths in fuzzed files resolve to nothing there.
  status=0
  (cd "$build/work" && MESHPLAN_CONFIGS="$root/configs" \
    "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
    -dict="$root/tests/fuzz/hostile.dict" \
    -rss_limit_mb=2048 -artifact_prefix="$build/findings/$t-" "$corpus" "$seeds") \
    >"$log" 2>&1 || status=$?
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
  if [ "$status" -eq 0 ]; then
    echo "fuzz_$t: ${execs:-?} executions in ${seconds} s, no finding"
  else
    failed+=("$t")
    echo "fuzz_$t: FINDING after ${execs:-?} executions (exit $status); log: $log"
    grep -E '^==[0-9]+==ERROR|runtime error|SUMMARY|Test unit written|deadly signal|uncaught' \
      "$log" | head -8 | sed 's/^/  /' || true
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in ${failed[*]} (inputs in $build/findings/)" >&2
  exit 1
fi
