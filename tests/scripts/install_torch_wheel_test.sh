#!/usr/bin/env bash
# scripts/install_torch_wheel.sh's refusals (CTest "scripts: ..."): each exits with code 2 and
# its reason and leaves no venv behind; the skip prints nothing and exits 0. No network: pip
# is pointed at a closed local port, with the user's pip configuration ignored.
set -uo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/install_torch_wheel.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $1" >&2; exit 1; }
offline=(env PIP_CONFIG_FILE=/dev/null PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_RETRIES=0
         PIP_TIMEOUT=1 PIP_NO_CACHE_DIR=1 MESHPLAN_SKIP_TORCH_WHEEL=0)

# Skipped: exit 0, nothing on stdout.
out="$(MESHPLAN_SKIP_TORCH_WHEEL=1 MESHPLAN_TORCH_VENV="$tmp/skip" "$script" 2>/dev/null)"
[ $? -eq 0 ] && [ -z "$out" ] && [ ! -e "$tmp/skip" ] || fail "skip: want exit 0, empty stdout, no venv"

# No python3 on PATH: exit 2 naming what to install.
err="$(env -i PATH=/nonexistent MESHPLAN_TORCH_VENV="$tmp/nopython" /bin/bash "$script" 2>&1 >/dev/null)"
rc=$?
[ $rc -eq 2 ] || fail "no python3: exit $rc, want 2"
grep -q "needs python3 with venv and pip" <<<"$err" || fail "no python3: reason missing: $err"

if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "python3 has no venv/ensurepip here: the pip cases are not checked"
  exit 0
fi

# pip cannot install the pins: exit 2 with the reason, the half-made venv removed.
err="$("${offline[@]}" MESHPLAN_TORCH_VENV="$tmp/venv" "$script" 2>&1 >/dev/null)"
rc=$?
[ $rc -eq 2 ] || fail "pip failure: exit $rc, want 2"
grep -q "pip could not install torch==" <<<"$err" || fail "pip failure: reason missing: $err"
[ ! -e "$tmp/venv" ] || fail "pip failure: a half-made venv was left at $tmp/venv"

# A venv whose stamp names other pins is not used: it is rebuilt (here refused and removed).
mkdir -p "$tmp/old/bin" && ln -s "$(command -v python3)" "$tmp/old/bin/python"
echo "torch==0.0" > "$tmp/old/.meshplan-complete"
out="$("${offline[@]}" MESHPLAN_TORCH_VENV="$tmp/old" "$script" 2>/dev/null)"
rc=$?
[ $rc -eq 2 ] && [ -z "$out" ] || fail "stale stamp: exit $rc, stdout '$out'; want 2 and nothing"
[ ! -e "$tmp/old" ] || fail "stale stamp: the old venv was left"
echo "install_torch_wheel.sh: skip, no python3, pip failure and a stale stamp behave"
