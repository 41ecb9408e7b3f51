#!/usr/bin/env bash
# README command 2: install what is missing, build, and run every test (CTest).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
cd "${MESHPLAN_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
