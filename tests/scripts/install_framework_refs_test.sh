#!/usr/bin/env bash
# scripts/install_framework_refs.sh's refusals (CTest "scripts: ..."): each exits with code 2
# and its reason and leaves no venv behind (an argument too); --help prints the opening
# comment; the skip prints nothing and exits 0. No network: pip is pointed at a closed local
# port, with the user's pip configuration ignored.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
script="$root/scripts/install_framework_refs.sh"
source "$(dirname "$0")/cached_venv_cases.sh"

takes_no_arguments
skips MESHPLAN_FRAMEWORK_VENV

# No torch venv (its install fails offline): exit 2 saying so.
refuses_offline "no torch venv" "no torch venv" "$tmp/fw0" MESHPLAN_TORCH_VENV="$tmp/torch" MESHPLAN_FRAMEWORK_VENV="$tmp/fw0"

# With the cached torch venv, pip cannot install the pins offline: exit 2 with the reason, the
# half-made venv removed.
if ! "${offline[@]}" "$root/scripts/install_torch_wheel.sh" >/dev/null 2>&1; then
  echo "no cached torch venv here: the pip case is not checked"
  exit 0
fi
refuses_offline "pip failure" "pip could not install" "$tmp/fw" MESHPLAN_FRAMEWORK_VENV="$tmp/fw"
echo "install_framework_refs.sh: arguments, skip, no torch venv and a pip failure behave"
