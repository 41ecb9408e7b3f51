#!/usr/bin/env bash
# scripts/collective_after_compute.sh's refusals (CTest "scripts: ..."): a bad argument exits
# with code 2 and names it, before anything is calibrated.
set -uo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/collective_after_compute.sh"
. "$(dirname "$0")/refuses.sh"
refuses "--sides needs a comma-separated list of positive integers, got '128,x'" --sides 128,x
refuses "--bytes needs a positive integer, got '0'" --bytes 0
refuses "unknown argument '--bogus'" --bogus
echo "collective_after_compute.sh refusals: ok"
