#!/usr/bin/env bash
# scripts/install_framework_refs.sh's refusals (CTest "scripts: ..."): each exits with code 2
# and its reason and leaves no venv behind; the skip prints nothing and exits 0. No network:
# pip is pointed at a closed local port, with the user's pip configuration ignored.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
script="$root/scripts/install_framework_refs.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $1" >&2; exit 1; }
offline=(env PIP_CONFIG_FILE=/dev/null PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_FIND_LINKS=
         PIP_RETRIES=0 PIP_TIMEOUT=1 PIP_NO_CACHE_DIR=1 MESHPLAN_SKIP_TORCH_WHEEL=0)

# Skipped: exit 0, nothing on stdout.
out="$(MESHPLAN_SKIP_TORCH_WHEEL=1 MESHPLAN_FRAMEWORK_VENV="$tmp/skip" "$script" 2>/dev/null)"
[ $? -eq 0 ] && [ -z "$out" ] && [ ! -e "$tmp/skip" ] || fail "skip: want exit 0, empty stdout, no venv"

# No torch venv (its install fails offline): exit 2 saying so.
err="$("${offline[@]}" MESHPLAN_TORCH_VENV="$tmp/torch" MESHPLAN_FRAMEWORK_VENV="$tmp/fw0" "$script" 2>&1 >/dev/null)"
rc=$?
[ $rc -eq 2 ] || fail "no torch venv: exit $rc, want 2"
grep -q "no torch venv" <<<"$err" || fail "no torch venv: reason missing: $err"
[ ! -e "$tmp/fw0" ] || fail "no torch venv: a venv was left at $tmp/fw0"

# With the cached torch venv, pip cannot install the pins offline: exit 2 with the reason, the
# half-made venv removed.
if ! "${offline[@]}" "$root/scripts/install_torch_wheel.sh" >/dev/null 2>&1; then
  echo "no cached torch venv here: the pip case is not checked"
  exit 0
fi
err="$("${offline[@]}" MESHPLAN_FRAMEWORK_VENV="$tmp/fw" "$script" 2>&1 >/dev/null)"
rc=$?
[ $rc -eq 2 ] || fail "pip failure: exit $rc, want 2"
grep -q "pip could not install" <<<"$err" || fail "pip failure: reason missing: $err"
[ ! -e "$tmp/fw" ] || fail "pip failure: a half-made venv was left at $tmp/fw"
echo "install_framework_refs.sh: skip, no torch venv and a pip failure behave"
