#!/usr/bin/env bash
# scripts/collective_after_compute.sh's refusals (CTest "scripts: ..."): a bad argument exits
# with code 2 and names it, before anything is calibrated.
set -uo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/collective_after_compute.sh"
fail() { echo "FAIL: $1" >&2; exit 1; }
refuses() {  # refuses "<what it must say>" ARGS...
  local want="$1"; shift
  local err rc
  err="$(bash "$script" "$@" 2>&1 >/dev/null)"
  rc=$?
  [ $rc -eq 2 ] || fail "$*: exit $rc, want 2"
  grep -qF -- "$want" <<<"$err" || fail "$*: want '$want' in: $err"
}
refuses "--sides needs a comma-separated list of positive integers, got '128,x'" --sides 128,x
refuses "--bytes needs a positive integer, got '0'" --bytes 0
refuses "unknown argument '--bogus'" --bogus
echo "collective_after_compute.sh refusals: ok"
