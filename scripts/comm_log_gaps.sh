#!/usr/bin/env bash
# How long a CPU rank computed before each communicator call, and how long the calls took,
# from a timed comm log (`meshplan run PLAN --comm-log PREFIX --comm-timing` writes
# PREFIX.rankR). A CPU rank's collectives complete inside the call that issues them, so the
# compute before call i is its issue time less the time call i-1 returned, and a call takes
# from its issue to its return. Prints the share of calls in each band of preceding compute,
# the share of calls that took over 2 ms, the time in calls, and per call (group, operation,
# tensors) its count and the median, mean and largest time in it.
#
#   scripts/comm_log_gaps.sh PREFIX.rankR
set -euo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") echo "comm_log_gaps.sh: expected a timed comm log (PREFIX.rankR of meshplan run --comm-log PREFIX --comm-timing)" >&2; exit 2 ;;
esac
[[ -r "$1" ]] || { echo "comm_log_gaps.sh: cannot read '$1'" >&2; exit 2; }
grep -q ' returned_ms=' "$1" || { echo "comm_log_gaps.sh: '$1' has no times (run with --comm-timing)" >&2; exit 2; }
awk '
  { issued = -1; returned = -1
    for (i = 1; i <= NF; i++) {
      if ($i ~ /^issued_ms=/) { split($i, a, "="); issued = a[2] }
      if ($i ~ /^returned_ms=/) { split($i, b, "="); returned = b[2] }
    }
    if (issued < 0 || returned < 0) next
    if (calls > 0) {
      gap = issued - previous; gaps++
      band[gap < 0.2 ? 1 : gap < 0.5 ? 2 : gap < 1 ? 3 : gap < 5 ? 4 : 5]++
    }
    took = returned - issued; in_calls += took
    if (took > 2) slow++
    previous = returned; calls++ }
  END {
    if (gaps == 0) { print "comm_log_gaps.sh: fewer than two timed calls" > "/dev/stderr"; exit 2 }
    printf "compute before a call (%d calls): <0.2 ms %.0f%%, 0.2-0.5 ms %.0f%%, 0.5-1 ms %.0f%%, 1-5 ms %.0f%%, >5 ms %.0f%%\n",
           gaps, 100 * band[1] / gaps, 100 * band[2] / gaps, 100 * band[3] / gaps, 100 * band[4] / gaps, 100 * band[5] / gaps
    printf "calls that took over 2 ms: %.1f%% of %d; %.1f ms in calls\n", 100 * slow / calls, calls, in_calls }
' "$1"
# Per call: "<call>\t<ms in it>" lines, sorted by call and time, then counted.
echo "time in calls, per call (group operation tensors): calls, median / mean / max ms"
awk '
  { issued = -1; returned = -1; call = $0; sub(/ issued_ms=.*/, "", call)
    for (i = 1; i <= NF; i++) {
      if ($i ~ /^issued_ms=/) { split($i, a, "="); issued = a[2] }
      if ($i ~ /^returned_ms=/) { split($i, b, "="); returned = b[2] }
    }
    if (issued >= 0 && returned >= 0) printf "%s\t%.6f\n", call, returned - issued }
' "$1" | LC_ALL=C sort -t "$(printf '\t')" -k1,1 -k2,2g | awk -F '\t' '
  function flush() { if (n > 0) printf "  %-56s %6d  %.2f / %.2f / %.2f\n", key, n, t[int((n + 1) / 2)], sum / n, t[n] }
  $1 != key { flush(); key = $1; n = 0; sum = 0 }
  { t[++n] = $2; sum += $2 }
  END { flush() }'
