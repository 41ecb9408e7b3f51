#!/usr/bin/env bash
# scripts/cpu_rank_loop.sh's refusals (CTest "scripts: ..."): a bad argument exits with code 2
# and names the argument and what it accepts, before anything is calibrated or run.
set -uo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/cpu_rank_loop.sh"
fail() { echo "FAIL: $1" >&2; exit 1; }

refuses() {  # refuses "<what it must say>" ARGS...
  local want="$1"; shift
  local err rc
  err="$(bash "$script" "$@" 2>&1 >/dev/null)"
  rc=$?
  [ $rc -eq 2 ] || fail "$*: exit $rc, want 2"
  grep -qF -- "$want" <<<"$err" || fail "$*: want '$want' in: $err"
}

refuses "--repeats needs a positive integer, got 'x'" --repeats x
refuses "--repeats needs a positive integer, got '0'" --repeats 0
refuses "--repeats needs a positive integer, got ''" --repeats
refuses "--attempts needs a positive integer, got '-1'" --check --attempts -1
refuses "unknown argument '--bogus' (expected --build DIR, --keep DIR, --quick, --repeats N, --check, --attempts N)" --bogus
echo "cpu_rank_loop.sh refusals: ok"
