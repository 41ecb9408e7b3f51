# Sourced by the scripts' refusal tests (tests/scripts/*_test.sh), after they set `script` to
# the script under test. fail MESSAGE: exit 1 with it. refuses "<what it must say>" ARGS...:
# `bash $script ARGS` must exit with code 2 and say that on stderr.
fail() { echo "FAIL: $1" >&2; exit 1; }
refuses() {
  local want="$1"; shift
  local err rc
  err="$(bash "$script" "$@" 2>&1 >/dev/null)"
  rc=$?
  [ $rc -eq 2 ] || fail "$*: exit $rc, want 2"
  grep -qF -- "$want" <<<"$err" || fail "$*: want '$want' in: $err"
}
