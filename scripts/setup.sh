#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job
# (a plan search for the built-in default model and cluster).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
"${MESHPLAN_BUILD_DIR:-$root/build}/meshplan" search
