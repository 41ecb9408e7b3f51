#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test (CTest), then fuzz every
# input surface for a bounded time (scripts/fuzz.sh; MESHPLAN_FUZZ_SECONDS per target,
# default 20; 0 skips it). Extra arguments go to ctest.
# With the torch wheel (scripts/install_torch_wheel.sh, cached outside the clone) the
# outside-reference tests (tests/reference/) join the suite, and the executor is also built
# against the wheel's LibTorch 2.x with CUDA and NCCL on (scripts/build_torch2.sh,
# build-torch2/), where its executor and reference tests run again on the CPU
# (docs/executor.md, "Two LibTorch versions"). MESHPLAN_TORCH2=0 skips that second build
# (the wheel and the reference tests in build/ stay); MESHPLAN_SKIP_TORCH_WHEEL=1 skips the
# wheel and both (planning only: no wheel, no CUDA toolkit).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install_deps.sh"
venv="$("$root/scripts/install_torch_wheel.sh")"  # empty when skipped
reference=()
if [ -n "$venv" ]; then reference=(-DMESHPLAN_REFERENCE_PYTHON="$venv/bin/python"); fi
"$root/scripts/build.sh" "${reference[@]}"
(cd "${MESHPLAN_BUILD_DIR:-$root/build}" && ctest --output-on-failure -j "$(nproc)" "$@")
if [ -n "$venv" ] && [ "${MESHPLAN_TORCH2:-1}" != "0" ]; then
  "$root/scripts/build_torch2.sh"
  # The executor's and the references' tests against LibTorch 2.x (the planner, simulator and
  # GUI link no LibTorch: the first build covers them). [timing] is left out: it checks the
  # cost model's calibration, which does not depend on the LibTorch version.
  (cd "${MESHPLAN_TORCH2_BUILD_DIR:-$root/build-torch2}" &&
    ctest --output-on-failure -j "$(nproc)" -R '^(executor|reference):' -E '\[timing\]' "$@")
fi
fuzz_seconds="${MESHPLAN_FUZZ_SECONDS:-20}"
if [ "$fuzz_seconds" != "0" ]; then
  "$root/scripts/fuzz.sh" --seconds "$fuzz_seconds"
fi
