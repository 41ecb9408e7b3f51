#!/usr/bin/env bash
# The golden suite: commands whose output must stay byte-identical across refactors.
#
#   tests/golden/golden.sh --binary build/meshplan            check every command (exit 1 on a diff)
#   tests/golden/golden.sh --binary build/meshplan --update   rewrite tests/golden/expected/
#   tests/golden/golden.sh --binary build/meshplan --only NAME   one command
#
# tests/golden/commands.txt holds one command a line: a name, then the meshplan arguments (shell
# words, run from the repository root with MESHPLAN_CONFIGS=configs/). @TMP@ in the arguments is a
# fresh temporary folder; every file the command leaves there is appended to its output. The output
# file tests/golden/expected/NAME.out is the exit code, stdout and stderr, then those files.
# Only the search's own wall-clock figures are masked (@TIME@): they differ on every run; so are
# the paths of the temporary folder (@TMP@) and of the clone (@ROOT@).
# An expected output that changes is regenerated (--update) in its own commit that says why.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
binary="" update=0 only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="${2:-}"; shift 2 ;;
    --update) update=1; shift ;;
    --only) only="${2:-}"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "golden.sh: unknown argument '$1' (allowed: --binary PATH, --update, --only NAME)" >&2; exit 2 ;;
  esac
done
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
  echo "golden.sh: --binary must name the built meshplan executable (got '$binary')" >&2; exit 2
fi
binary="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
expected_dir="$root/tests/golden/expected"
export MESHPLAN_CONFIGS="$root/configs"
cd "$root" || exit 2

mask() {  # the search's wall-clock figures, the temporary folder's and the clone's names
  sed -E -e "s#$1#@TMP@#g" -e "s#$root#@ROOT@#g" \
         -e 's/[0-9.]+ s on [0-9]+ threads? \([0-9,]+ plans\/s\)/@TIME@/g' \
         -e 's/"(cpu_s|wall_s|evaluations_per_s|threads)": *[0-9.e+-]+/"\1": @TIME@/g'
}

run_one() {  # run_one NAME ARGS: prints the output file's text
  local name="$1" args="$2" tmp
  tmp="$(mktemp -d)"
  local words; eval "words=(${args//@TMP@/$tmp})"
  local out rc
  out="$(timeout 120 "$binary" "${words[@]}" 2>&1)"; rc=$?
  { echo "exit: $rc"; printf '%s\n' "$out"
    find "$tmp" -type f | sort | while read -r f; do
      echo "---- file ${f#"$tmp"/}"; cat "$f"; echo
    done; } | mask "$tmp"
  rm -rf "$tmp"
}

total=0 failed=0 names=()
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  name="${line%% *}" args="${line#* }"
  [ "$name" = "$line" ] && args=""
  if [ -n "$only" ] && [ "$name" != "$only" ]; then continue; fi
  for seen in "${names[@]}"; do
    [ "$seen" = "$name" ] && { echo "golden.sh: commands.txt names '$name' twice" >&2; exit 2; }
  done
  names+=("$name")
  total=$((total + 1))
  actual="$(run_one "$name" "$args")"
  if [ "$update" = 1 ]; then
    printf '%s\n' "$actual" > "$expected_dir/$name.out"
  elif ! diff -u "$expected_dir/$name.out" <(printf '%s\n' "$actual") > /tmp/golden-diff.$$ 2>&1; then
    failed=$((failed + 1))
    echo "FAILED $name: meshplan $args"; head -40 /tmp/golden-diff.$$
  fi
done < "$root/tests/golden/commands.txt"
rm -f /tmp/golden-diff.$$
if [ -n "$only" ] && [ "$total" = 0 ]; then echo "golden.sh: no command named '$only'" >&2; exit 2; fi
if [ "$update" = 1 ]; then echo "golden.sh: wrote $total expected outputs"; exit 0; fi
# An expected file no command writes is stale.
if [ -z "$only" ]; then
  for f in "$expected_dir"/*.out; do
    n="$(basename "$f" .out)"
    # A loop, not `printf | grep -q`: under pipefail grep's early exit can kill printf (SIGPIPE).
    written=0
    for seen in "${names[@]}"; do [ "$seen" = "$n" ] && written=1; done
    [ "$written" = 1 ] || { echo "FAILED stale expected output $n.out"; failed=$((failed + 1)); }
  done
fi
echo "golden: $((total - failed)) passed, $failed failed"
[ "$failed" = 0 ]
