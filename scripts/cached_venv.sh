# Sourced by the scripts that create a cached Python virtual environment once, outside the
# clone (install_torch_wheel.sh, install_framework_refs.sh): the protocol they share, so that
# a venv is either complete or absent.
# - A venv is complete only once its stamp file VENV/.meshplan-complete, written last, holds
#   the same pins and VENV/bin/python is executable; anything else is rebuilt.
# - Runs on one machine take turns (flock on VENV.lock) and check again once their turn
#   comes, so one never deletes a venv another is filling.
# - A failed or interrupted install removes its half-made venv and exits 2 with the reason.
# - The script takes no arguments: --help prints its opening comment; any other argument
#   exits 2 naming it.
# - MESHPLAN_SKIP_TORCH_WHEEL=1 skips the script (exit 0, nothing on stdout).
# How a script calls it, in this order (each exits the script where the protocol says so):
#   source "$here/cached_venv.sh"
#   cached_venv_init NAME WHAT "$@"      # NAME prefixes every message; WHAT: what the skip skips
#   cached_venv_reuse VENV PINS PRINTED  # complete: says "cached at", prints PRINTED, exit 0
#   ...checks that must not touch the disk (exit 2 with their own reason)...
#   cached_venv_lock                     # our turn; complete meanwhile: prints PRINTED, exit 0;
#                                        # otherwise the old venv is removed, refuse on INT/TERM
#   ...the install into VENV, `|| refuse REASON` after each step...
#   cached_venv_done                     # the stamp, "ready at", prints PRINTED
# Uses only bash builtins until cached_venv_lock (a script may run with no PATH before it).

cached_venv_init() {  # cached_venv_init NAME WHAT ARGS...
  cached_venv_name="$1" cached_venv_skips="$2"
  shift 2
  [ $# -eq 0 ] || case "$1" in
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "$cached_venv_name: unknown argument '$1' (it takes none; see --help)" >&2; exit 2 ;;
  esac
  if [ "${MESHPLAN_SKIP_TORCH_WHEEL:-0}" = "1" ]; then
    echo "$cached_venv_name: skipped (MESHPLAN_SKIP_TORCH_WHEEL=1)" >&2
    exit 0
  fi
}

cached_venv_complete() {
  [ -f "$cached_venv_stamp" ] && [ "$(<"$cached_venv_stamp")" = "$cached_venv_pins" ] &&
    [ -x "$cached_venv_dir/bin/python" ]
}

cached_venv_reuse() {  # cached_venv_reuse VENV PINS PRINTED
  cached_venv_dir="$1" cached_venv_pins="$2" cached_venv_printed="$3"
  cached_venv_stamp="$1/.meshplan-complete"
  if cached_venv_complete; then
    echo "$cached_venv_name: cached at $cached_venv_dir" >&2
    echo "$cached_venv_printed"
    exit 0
  fi
}

refuse() {  # refuse REASON: nothing half-made stays behind
  echo "$cached_venv_name: $1 (MESHPLAN_SKIP_TORCH_WHEEL=1 skips $cached_venv_skips)" >&2
  rm -rf "$cached_venv_dir"
  exit 2
}

cached_venv_lock() {
  local parent
  parent="$(dirname "$cached_venv_dir")"
  mkdir -p "$parent" || { echo "$cached_venv_name: cannot create $parent" >&2; exit 2; }
  exec 9>"$cached_venv_dir.lock"
  flock 9
  if cached_venv_complete; then  # another run finished it while this one waited
    echo "$cached_venv_printed"
    exit 0
  fi
  trap 'refuse "interrupted"' INT TERM
  rm -rf "$cached_venv_dir"
}

cached_venv_done() {
  echo "$cached_venv_pins" > "$cached_venv_stamp.tmp" && mv "$cached_venv_stamp.tmp" "$cached_venv_stamp"
  echo "$cached_venv_name: ready at $cached_venv_dir" >&2
  echo "$cached_venv_printed"
}
