#!/usr/bin/env bash
# Configures (once) and builds meshplan into build/ (or $MESHPLAN_BUILD_DIR).
# Extra arguments go to CMake's configure step, e.g. -DMESHPLAN_WITH_GUI=OFF.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MESHPLAN_BUILD_DIR:-$root/build}"
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/CMakeCache.txt" ]; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
