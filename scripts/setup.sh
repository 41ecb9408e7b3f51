#!/usr/bin/env bash
# README command 1: install what is missing (Debian packages, then the torch wheel's cached
# venv: scripts/install_torch_wheel.sh), build, and run the main job (a plan search for the
# built-in default model and cluster). MESHPLAN_SKIP_TORCH_WHEEL=1: planner only, no venv.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
"${MESHPLAN_BUILD_DIR:-$root/build}/meshplan" search
