# Sourced by the tests of the scripts built on scripts/cached_venv.sh, after they set `script`
# to the script under test. Provides, besides fail and refuses (refuses.sh):
#   tmp        a fresh folder, removed at exit
#   offline    an env prefix with no network: pip pointed at a closed local port, the user's
#              pip configuration ignored, MESHPLAN_SKIP_TORCH_WHEEL=0
#   takes_no_arguments
#              --help: exit 0, the script's opening comment without its '#'s and nothing
#              more; another argument: exit 2 naming it
#   skips VENV_VARIABLE
#              MESHPLAN_SKIP_TORCH_WHEEL=1: exit 0, nothing on stdout, no venv made
#   refuses_offline CASE "<what it must say>" VENV [NAME=VALUE...]
#              offline and with those variables: exit 2, that reason on stderr, nothing on
#              stdout, nothing left at VENV
source "$(dirname "${BASH_SOURCE[0]}")/refuses.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
offline=(env PIP_CONFIG_FILE=/dev/null PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_FIND_LINKS=
         PIP_RETRIES=0 PIP_TIMEOUT=1 PIP_NO_CACHE_DIR=1 MESHPLAN_SKIP_TORCH_WHEEL=0)

takes_no_arguments() {
  local help first
  help="$(bash "$script" --help 2>&1)" || fail "--help: exit $?, want 0"
  first="$(sed -n '2s/^# //p' "$script")"
  [ "$(head -n 1 <<<"$help")" = "$first" ] || fail "--help: want '$first' first, got: $help"
  ! grep -q '^#\|set -euo' <<<"$help" || fail "--help: more than the opening comment: $help"
  refuses "unknown argument '--bogus' (it takes none; see --help)" --bogus
  refuses "unknown argument '' (it takes none; see --help)" ""
}

skips() {
  local out
  out="$(env MESHPLAN_SKIP_TORCH_WHEEL=1 "$1=$tmp/skip" bash "$script" 2>/dev/null)"
  [ $? -eq 0 ] && [ -z "$out" ] && [ ! -e "$tmp/skip" ] || fail "skip: want exit 0, empty stdout, no venv"
}

refuses_offline() {
  local case="$1" want="$2" venv="$3"
  shift 3
  local out rc
  out="$("${offline[@]}" "$@" bash "$script" 2>"$tmp/stderr")"
  rc=$?
  [ $rc -eq 2 ] && [ -z "$out" ] || fail "$case: exit $rc, stdout '$out'; want 2 and nothing"
  grep -qF -- "$want" "$tmp/stderr" || fail "$case: want '$want' in: $(<"$tmp/stderr")"
  [ ! -e "$venv" ] || fail "$case: a half-made venv was left at $venv"
}
