#!/usr/bin/env bash
# scripts/comm_log_gaps.sh (CTest "scripts: ..."): the bands of a hand-made timed comm log,
# counted by hand; refusals (no file, an untimed log) exit 2.
set -uo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/comm_log_gaps.sh"
. "$(dirname "$0")/refuses.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# Gaps (issue less the previous return): 0.1 (<0.2), 0.3 (0.2-0.5), 2.0 (1-5), 7.0 (>5);
# the fourth call took 3 ms (over 2 ms): 1 of 5; 1 + 0.1 + 0.05 + 3 + 0.15 = 4.3 ms in
# calls. done_ms does not count (a CPU rank's collective completes at post).
cat > "$tmp/log.rank0" <<'LOG'
tp all_gather Float[2] -> Float[4] issued_ms=0.000 returned_ms=1.000 done_ms=1.000
tp all_gather Float[2] -> Float[4] issued_ms=1.100 returned_ms=1.200 done_ms=1.200
dp all_reduce Float[8] issued_ms=1.500 returned_ms=1.550 done_ms=-1.000
tp all_gather Float[2] -> Float[4] issued_ms=3.550 returned_ms=6.550 done_ms=9.000
tp all_gather Float[2] -> Float[4] issued_ms=13.550 returned_ms=13.700 done_ms=13.700
LOG
out="$(bash "$script" "$tmp/log.rank0")" || fail "exit $? on a good log"
grep -qF "compute before a call (4 calls): <0.2 ms 25%, 0.2-0.5 ms 25%, 0.5-1 ms 0%, 1-5 ms 25%, >5 ms 25%" <<<"$out" || fail "bands: $out"
grep -qF "calls that took over 2 ms: 20.0% of 5; 4.3 ms in calls" <<<"$out" || fail "slow calls: $out"
# Per call: the 4 all-gathers took 1.0, 0.1, 3.0 and 0.15 ms (median of 4: the lower middle).
grep -qE "^  tp all_gather Float\[2\] -> Float\[4\] +4  0.15 / 1.06 / 3.00$" <<<"$out" || fail "per call: $out"
grep -qE "^  dp all_reduce Float\[8\] +1  0.05 / 0.05 / 0.05$" <<<"$out" || fail "per call: $out"

echo "tp all_gather Float[2] -> Float[4]" > "$tmp/plain.rank0"
refuses "expected a timed comm log"
refuses "cannot read" "$tmp/missing"
refuses "has no times (run with --comm-timing)" "$tmp/plain.rank0"
echo "comm_log_gaps.sh: ok"
