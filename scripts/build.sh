#!/usr/bin/env bash
# Configures (once) and builds meshplan into build/ (or $MESHPLAN_BUILD_DIR).
# Extra arguments go to CMake's configure step, e.g. -DMESHPLAN_WITH_GUI=OFF.
# Uses ccache when installed (CCACHE_BASEDIR = the clone, so another clone of the same tree
# on this machine hits the cache).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MESHPLAN_BUILD_DIR:-$root/build}"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/CMakeCache.txt" ]; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" "${launcher[@]}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
