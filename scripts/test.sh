#!/usr/bin/env bash
# README command 2: install what is missing, build (scripts/build.sh: one build, the executor
# against the torch wheel's LibTorch), run every test (CTest), then fuzz every input surface
# for a bounded time (scripts/fuzz.sh; MESHPLAN_FUZZ_SECONDS per target, default 20; 0 skips
# it). Extra arguments go to ctest. MESHPLAN_SKIP_TORCH_WHEEL=1: planning only (no wheel, no
# CUDA toolkit, no executor or reference tests).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
(cd "${MESHPLAN_BUILD_DIR:-$root/build}" && ctest --output-on-failure -j "$(nproc)" "$@")
fuzz_seconds="${MESHPLAN_FUZZ_SECONDS:-20}"
if [ "$fuzz_seconds" != "0" ]; then
  "$root/scripts/fuzz.sh" --seconds "$fuzz_seconds"
fi
