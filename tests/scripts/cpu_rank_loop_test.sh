#!/usr/bin/env bash
# scripts/cpu_rank_loop.sh's refusals (CTest "scripts: ..."): a bad argument exits with code 2
# and names the argument and what it accepts, before anything is calibrated or run.
set -uo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/cpu_rank_loop.sh"
. "$(dirname "$0")/refuses.sh"

refuses "--repeats needs a positive integer, got 'x'" --repeats x
refuses "--repeats needs a positive integer, got '0'" --repeats 0
refuses "--repeats needs a positive integer, got ''" --repeats
refuses "--attempts needs a positive integer, got '-1'" --check --attempts -1
refuses "unknown argument '--bogus' (expected --build DIR, --keep DIR, --quick, --repeats N, --check, --attempts N)" --bogus
echo "cpu_rank_loop.sh refusals: ok"
