#!/usr/bin/env bash
# scripts/install_torch_wheel.sh's refusals (CTest "scripts: ..."): each exits with code 2 and
# its reason and leaves no venv behind (an argument too); --help prints the opening comment;
# the skip prints nothing and exits 0. No network: pip is pointed at a closed local port, with
# the user's pip configuration ignored.
set -uo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/install_torch_wheel.sh"
source "$(dirname "$0")/cached_venv_cases.sh"

takes_no_arguments
skips MESHPLAN_TORCH_VENV

# No python3 on PATH: exit 2 naming what to install.
err="$(env -i PATH=/nonexistent MESHPLAN_TORCH_VENV="$tmp/nopython" /bin/bash "$script" 2>&1 >/dev/null)"
rc=$?
[ $rc -eq 2 ] || fail "no python3: exit $rc, want 2"
grep -q "needs python3 with venv and pip" <<<"$err" || fail "no python3: reason missing: $err"

if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "python3 has no venv/ensurepip here: the pip cases are not checked"
  exit 0
fi

refuses_offline "pip failure" "pip could not install torch==" "$tmp/venv" MESHPLAN_TORCH_VENV="$tmp/venv"

# A venv whose stamp names other pins is not used: it is rebuilt (here refused and removed).
mkdir -p "$tmp/old/bin" && ln -s "$(command -v python3)" "$tmp/old/bin/python"
echo "torch==0.0" > "$tmp/old/.meshplan-complete"
refuses_offline "stale stamp" "pip could not install torch==" "$tmp/old" MESHPLAN_TORCH_VENV="$tmp/old"
echo "install_torch_wheel.sh: arguments, skip, no python3, pip failure and a stale stamp behave"
