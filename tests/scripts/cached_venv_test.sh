#!/usr/bin/env bash
# scripts/cached_venv.sh's protocol (CTest "scripts: ..."), through a fake install script that
# "installs" a venv whose python is python3: the first run installs and stamps; the next one
# reuses it; other pins or no python rebuild it; a failed or interrupted install exits 2 and
# removes the venv; a run that waited for another's lock finds the venv complete and leaves it.
# No network, no pip.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cached_venv_cases.sh"  # fail, skips, tmp
export MESHPLAN_SKIP_TORCH_WHEEL=0 CACHED_VENV_SH="$here/../../scripts/cached_venv.sh"
script="$tmp/fake_install.sh"
cat > "$script" <<'EOF'
set -euo pipefail
source "$CACHED_VENV_SH"
cached_venv_init fake_install "the fake"
cached_venv_reuse "$VENV" "${PINS:-pins 1}" "$VENV/bin/python"
[ -z "${CHECKED:-}" ] || touch "$CHECKED"  # the venv was checked before the lock
cached_venv_lock
mkdir -p "$VENV/bin" && ln -s "$(command -v python3)" "$VENV/bin/python"
case "${STEP:-}" in
  fail) refuse "the install failed" ;;
  hang) sleep 30 & echo $! > "$VENV.hanging"; wait ;;
esac
cached_venv_done
EOF
venv="$tmp/venv"
run() {  # run NAME=VALUE...: the fake install into $venv; sets rc, out, err
  out="$(env VENV="$venv" "$@" bash "$script" 2>"$tmp/err")"
  rc=$?
  err="$(<"$tmp/err")"
}
expect() {  # expect CASE RC STDERR: the last run's exit code, its stdout the venv's python
  [ "$rc" -eq "$2" ] || fail "$1: exit $rc, want $2 ($err)"
  [ "$out" = "$venv/bin/python" ] || fail "$1: stdout '$out', want $venv/bin/python"
  [ "$err" = "$3" ] || fail "$1: stderr '$err', want '$3'"
}

run
expect "first run" 0 "fake_install: ready at $venv"
[ "$(<"$venv/.meshplan-complete")" = "pins 1" ] || fail "first run: the stamp does not hold the pins"
run
expect "second run" 0 "fake_install: cached at $venv"
run PINS="pins 2"
expect "other pins" 0 "fake_install: ready at $venv"
rm "$venv/bin/python"
run PINS="pins 2"
expect "no python" 0 "fake_install: ready at $venv"

run PINS="pins 3" STEP=fail
[ $rc -eq 2 ] && [ -z "$out" ] || fail "failed install: exit $rc, stdout '$out'; want 2 and nothing"
[ "$err" = "fake_install: the install failed (MESHPLAN_SKIP_TORCH_WHEEL=1 skips the fake)" ] ||
  fail "failed install: stderr '$err'"
[ ! -e "$venv" ] || fail "failed install: the venv was left"

# Interrupted while installing: exit 2, the venv removed.
rm -f "$venv.hanging"
VENV="$venv" STEP=hang bash "$script" >/dev/null 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do [ -s "$venv.hanging" ] && break; sleep 0.1; done
[ -s "$venv.hanging" ] || fail "interrupted: the install never started ($(<"$tmp/err"))"
kill -TERM "$pid"
wait "$pid"
rc=$?
kill "$(<"$venv.hanging")" 2>/dev/null
[ $rc -eq 2 ] || fail "interrupted: exit $rc, want 2"
grep -qF "fake_install: interrupted" "$tmp/err" || fail "interrupted: stderr $(<"$tmp/err")"
[ ! -e "$venv" ] || fail "interrupted: the venv was left"

# Another run holds the lock and completes the venv meanwhile: this one waits, finds it
# complete, prints it and neither reinstalls nor says "cached".
run
exec 8>"$venv.lock"
flock 8
VENV="$venv" PINS="pins 2" CHECKED="$tmp/checked" bash "$script" >"$tmp/out" 2>"$tmp/err" 8>&- &
pid=$!
for _ in $(seq 100); do [ -e "$tmp/checked" ] && break; sleep 0.1; done
[ -e "$tmp/checked" ] || fail "waited for the lock: the run never got to the lock ($(<"$tmp/err"))"
echo "pins 2" > "$venv/.meshplan-complete"
exec 8>&-
wait "$pid"
rc=$? out="$(<"$tmp/out")" err="$(<"$tmp/err")"
expect "waited for the lock" 0 ""

skips VENV

# The venv's folder cannot be made: exit 2 naming it.
touch "$tmp/file"
venv="$tmp/file/venv"
run
[ $rc -eq 2 ] && grep -qxF "fake_install: cannot create $tmp/file" <<<"$err" ||
  fail "no folder: exit $rc, stderr '$err'"
echo "cached_venv.sh: install, reuse, rebuild, refusal, interruption, waiting and skip behave"
