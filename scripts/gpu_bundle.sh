#!/usr/bin/env bash
# Packs what a GPU machine needs to run meshplan without building there (docs/gpu_sweep.md):
# the binaries a build made (meshplan, meshplan-exec, executor_tests; stripped), the shared
# libraries they need that such a machine lacks (it carries CUDA 13, Python with the torch
# wheel and its nvidia-* packages, and no Debian packages of ours), configs/, and launchers,
# into one folder under 64 MiB (default .gpu-bundle/, ignored by git):
#
#   scripts/gpu_bundle.sh [--build DIR] [--out DIR]
#   .gpu-bundle/meshplan ARGS...           meshplan, against this machine's torch
#   .gpu-bundle/launch PROGRAM ARGS...     any program of bin/ (executor_tests, meshplan-exec)
#
# The launcher finds the torch wheel with `${MESHPLAN_PYTHON:-python3} -c 'import torch'` and
# puts its torch/lib and every nvidia-* package's lib/ on LD_LIBRARY_PATH, after the bundle's
# lib/. A library is packed unless it comes from torch/lib, an nvidia-* package or the CUDA
# toolkit (the wheel's nvidia-* packages carry the same CUDA 13 runtime), is the CUDA driver,
# or is the C and C++ runtime (glibc's libc, libm, libdl, librt, libpthread, the loader;
# libstdc++, libgcc_s: a bundled older libstdc++ ahead of the machine's would break its newer
# libraries; BUILD_INFO says which glibc and GLIBCXX versions the bundle needs). The binaries'
# RUNPATH (absolute paths into this machine's venv and build folders) becomes $ORIGIN/../lib.
# Exit 2 with the reason: a binary not built, a RUNPATH it cannot rewrite, over 64 MiB.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build"
out="$root/.gpu-bundle"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "gpu_bundle: unknown argument '$1' (expected --build DIR, --out DIR)" >&2; exit 2 ;;
  esac
done
refuse() { echo "gpu_bundle: $1" >&2; exit 2; }
programs=("$build/meshplan" "$build/meshplan-exec" "$build/tests/executor_tests")
for p in "${programs[@]}"; do
  [ -x "$p" ] || refuse "$p is not built (scripts/build.sh builds it against the torch wheel)"
done
limit_bytes=$((64 * 1024 * 1024))

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for p in "${programs[@]}"; do
  strip -o "$out/bin/$(basename "$p")" "$p"
done

# The libraries the binaries resolve here that the GPU machine does not carry.
skip='/torch/lib/|/nvidia/|/cuda(-[0-9.]+)?/|/libcuda\.so|/(libc|libm|libdl|librt|libpthread|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'
for p in "${programs[@]}"; do ldd "$p"; done |
  awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | { grep -Ev "$skip" || true; } |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
for lib in "$out"/lib/*; do [ -e "$lib" ] && strip --strip-unneeded "$lib"; done

# The build's RUNPATH -> $ORIGIN/../lib, written over the old string in place (it is longer).
for b in "$out"/bin/*; do
  python3 - "$b" <<'PY' || refuse "cannot rewrite the RUNPATH of $b"
import subprocess, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
for line in dynamic.splitlines():
    if "(RUNPATH)" in line or "(RPATH)" in line:
        old = line.split("[", 1)[1].rsplit("]", 1)[0].encode()
        new = b"$ORIGIN/../lib"
        at = data.find(old + b"\0")
        if at < 0 or len(new) > len(old):
            sys.exit(f"{path}: RUNPATH {old!r} not found or too short")
        data[at:at + len(old)] = new + b"\0" * (len(old) - len(new))
open(path, "wb").write(data)
PY
done

cp -r "$root/configs" "$out/configs"
cat > "$out/launch" <<'SH'
#!/usr/bin/env bash
# launch PROGRAM ARGS...: bin/PROGRAM of this bundle against this machine's torch wheel
# (scripts/gpu_bundle.sh); launch --libs prints the library path it would use.
# MESHPLAN_PYTHON: the python with torch (default python3); MESHPLAN_TORCH_LIBS: that path,
# found before (python is then not asked).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
libs="${MESHPLAN_TORCH_LIBS:-}"
if [ -z "$libs" ]; then
  # find_spec finds the packages without importing torch (a second instead of a few).
  libs="$("${MESHPLAN_PYTHON:-python3}" -c '
import glob, importlib.util, os
torch = importlib.util.find_spec("torch")
dirs = [os.path.join(list(torch.submodule_search_locations)[0], "lib")]
nvidia = importlib.util.find_spec("nvidia")
for base in (nvidia.submodule_search_locations if nvidia else []):
    dirs += sorted(glob.glob(os.path.join(base, "*", "lib")))
print(":".join(dirs))')" || {
    echo "launch: no torch wheel in ${MESHPLAN_PYTHON:-python3} (set MESHPLAN_PYTHON to the python that has it)" >&2
    exit 2
  }
fi
if [ "${1:-}" = "--libs" ]; then echo "$libs"; exit 0; fi
program="${1:?usage: launch PROGRAM ARGS... (PROGRAM in $here/bin) | launch --libs}"
shift
export LD_LIBRARY_PATH="$here/lib:$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MESHPLAN_CONFIGS="${MESHPLAN_CONFIGS:-$here/configs}"
export MESHPLAN_EXEC="$here/bin/meshplan-exec"
exec "$here/bin/$program" "$@"
SH
cat > "$out/meshplan" <<'SH'
#!/usr/bin/env bash
# meshplan of this bundle against this machine's torch wheel (see launch).
exec "$(dirname "${BASH_SOURCE[0]}")/launch" meshplan "$@"
SH
chmod +x "$out/launch" "$out/meshplan"
{
  echo "built from $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown) ($([ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ] && echo 'with local changes' || echo clean)) on $(date -u +%F)"
  echo "torch: $(grep -m1 'Torch_DIR:PATH' "$build/CMakeCache.txt" 2>/dev/null | cut -d= -f2)"
  for runtime in GLIBC GLIBCXX; do
    echo "needs $runtime $(for b in "$out"/bin/* "$out"/lib/*; do objdump -T "$b"; done 2>/dev/null |
      grep -o "${runtime}_[0-9.]*" | sort -uV | tail -1 | cut -d_ -f2) or later"
  done
} > "$out/BUILD_INFO"

bytes="$(du -sb "$out" | cut -f1)"
[ "$bytes" -le "$limit_bytes" ] ||
  refuse "the bundle is $((bytes / 1024 / 1024)) MiB, over the 64 MiB a GPU machine takes ($out)"
echo "gpu_bundle: $out, $((bytes / 1024 / 1024)) MiB: $(ls "$out/bin" | tr '\n' ' ')+ $(ls "$out/lib" | wc -l) libraries ($(ls "$out/lib" | tr '\n' ' '))"
