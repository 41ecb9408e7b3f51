#!/usr/bin/env bash
# scripts/bench_against.sh (CTest "scripts: ..."): what it refuses before building anything:
# no revision, two, one that is not a commit, a bad --rounds or option; all exit 2.
set -uo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/bench_against.sh"
. "$(dirname "$0")/refuses.sh"
out="$(bash "$script" --help)" || fail "--help: exit $?"
grep -qF "Usage: scripts/bench_against.sh [--rounds N] [--filter REGEX] REV" <<<"$out" || fail "--help: $out"
refuses "which revision?"
refuses "one revision only, got HEAD and HEAD~1" HEAD HEAD~1
refuses "no-such-revision is not a commit of" no-such-revision
refuses "--rounds must be a whole number >= 1, got '0'" --rounds 0 HEAD
refuses "--rounds must be a whole number >= 1, got 'x'" --rounds x HEAD
refuses "--rounds needs a number" --rounds
refuses "unknown option --fast" --fast HEAD
echo "bench_against.sh: ok"
