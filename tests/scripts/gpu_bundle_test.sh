#!/usr/bin/env bash
# The GPU bundle (scripts/gpu_bundle.sh) from this build, run with nothing but the torch
# wheel's venv (CTest):
#   bundle  packs under 64 MiB; every library its programs load resolves in the bundle, the
#           venv's torch/lib or nvidia-* packages, or the C/C++ runtime; from a bare
#           environment (no LD_LIBRARY_PATH, no MESHPLAN_* variables) its meshplan trains a
#           tiny plan on the CPU and compares it, and its executor_tests run.
#   sweep   scripts/gpu_sweep.sh --cpu-smoke from the bundle: every part (a-d) packs its
#           tarball with records, and timings.tsv times each item.
#
#   gpu_bundle_test.sh MODE BUILD_DIR PYTHON
set -euo pipefail
mode="$1"; build="$2"; python="$3"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$here/refuses.sh"  # fail
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bash "$root/scripts/gpu_bundle.sh" --build "$build" --out "$work/bundle" || fail "gpu_bundle.sh failed"
bare=(env -i "PATH=/usr/bin:/bin" "HOME=$work" "MESHPLAN_PYTHON=$python")

case "$mode" in
  bundle)
    bytes="$(du -sb "$work/bundle" | cut -f1)"
    [ "$bytes" -le $((64 * 1024 * 1024)) ] || fail "the bundle is $bytes bytes, over 64 MiB"
    libs="$("${bare[@]}" "$work/bundle/launch" --libs)" || fail "launch --libs failed"
    for b in "$work"/bundle/bin/*; do
      resolved="$(env -i LD_LIBRARY_PATH="$work/bundle/lib:$libs" ldd "$b")"
      ! grep -q "not found" <<<"$resolved" || fail "$b: $(grep 'not found' <<<"$resolved")"
      outside="$(awk '$2 == "=>" { print $3 }' <<<"$resolved" |
        grep -Ev "^$work/bundle/lib/|/torch/lib/|/nvidia/|/(libc|libm|libdl|librt|libpthread|libutil|libstdc\+\+|libgcc_s)\.so" || true)"
      [ -z "$outside" ] || fail "$(basename "$b") loads libraries a GPU machine lacks: $outside"
    done
    cat > "$work/plan.yaml" <<'YAML'
model: tiny-llama
cluster: cpu-1x
training: {global_batch: 2, seq_len: 32, precision: fp32, steps: 3}
plan: {dp: 1}
YAML
    (cd "$work" && "${bare[@]}" OMP_NUM_THREADS=1 bundle/meshplan run plan.yaml --device cpu \
       --steps 3 --warmup 1 --out measured.json > run.log 2>&1) || fail "bundle run: $(tail -20 "$work/run.log")"
    rc=0
    (cd "$work" && "${bare[@]}" bundle/meshplan compare plan.yaml measured.json > compare.txt 2>&1) || rc=$?
    [ $rc -le 1 ] || fail "bundle compare exited $rc: $(cat "$work/compare.txt")"
    grep -q "step time" "$work/compare.txt" || fail "bundle compare printed no step time: $(cat "$work/compare.txt")"
    "${bare[@]}" OMP_NUM_THREADS=1 "$work/bundle/launch" executor_tests "[adamw]" > "$work/tests.log" 2>&1 ||
      fail "bundle executor_tests [adamw]: $(tail -20 "$work/tests.log")"
    echo "bundle: $((bytes / 1024 / 1024)) MiB; run, compare and executor_tests ran from a bare environment" ;;
  sweep)
    "${bare[@]}" bash "$root/scripts/gpu_sweep.sh" --cpu-smoke --bundle "$work/bundle" \
      --out "$work/out" --steps 3 --budget-s 1200 > "$work/sweep.out" 2>&1 ||
      fail "gpu_sweep.sh --cpu-smoke: $(tail -30 "$work/sweep.out")"
    for part in a-calibration b-single c-emulated d-shared; do
      tarball="$work/out/sweep-cpu-smoke-$part.tar.gz"
      [ -f "$tarball" ] || fail "no $part tarball: $(ls "$work/out")"
      # grep reads the whole listing: `tar | grep -q` under pipefail fails when grep quits
      # early and tar dies of SIGPIPE, which a loaded machine made look like a missing record
      members="$(tar tzf "$tarball")" || fail "$part: $tarball does not list"
      grep -q '\.\(json\|yaml\)$' <<<"$members" || fail "$part: no record in $tarball"
    done
    ! grep -q "FAILED" "$work/out/sweep.log" || fail "an item failed: $(grep FAILED "$work/out/sweep.log")"
    [ "$(ls "$work/out" | wc -l)" -le 8 ] || fail "more than 8 files in the output: $(ls "$work/out")"
    column -t -s $'\t' "$work/out/timings.tsv" ;;
  *) fail "unknown mode '$mode' (bundle | sweep)" ;;
esac
