#!/usr/bin/env bash
# Configures (once) and builds meshplan into build/ (or $MESHPLAN_BUILD_DIR), the executor
# against the one LibTorch: PyPI's torch wheel (2.11 with CUDA, what GPU machines carry), from
# the cached venv of scripts/install_torch_wheel.sh, with CUDA and NCCL on (NCCL from the
# wheel, the nvcc of the wheel's CUDA version; nothing runs on a GPU here) and <ATen/ATen.h>
# precompiled once (MESHPLAN_TORCH_PCH; docs/executor.md#one-libtorch). The venv's python also
# registers the outside-reference tests (tests/reference/), and the frameworks' venv beside it
# (scripts/install_framework_refs.sh) the export test (tests/export/).
# MESHPLAN_SKIP_TORCH_WHEEL=1: a planner-only build (no venv, no CUDA toolkit; no `run`,
# `calibrate` or executor tests).
# Exit 2 with the reason when the wheel cannot be installed or its CUDA toolkit is missing.
# Extra arguments go to CMake's configure step, e.g. -DMESHPLAN_WITH_GUI=OFF; MESHPLAN_TARGETS
# (space-separated) builds only those targets.
# Uses ccache when installed (CCACHE_BASEDIR = the clone, so another clone of the same tree
# on this machine hits the cache).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MESHPLAN_BUILD_DIR:-$root/build}"

torch=(-DMESHPLAN_WITH_TORCH=OFF)
venv="$("$root/scripts/install_torch_wheel.sh")"  # empty when skipped
if [ -n "$venv" ]; then
  python="$venv/bin/python"
  # The wheel's Caffe2 CMake config needs a CUDA toolkit of the version the wheel was built with.
  wheel_cuda="$("$python" -c 'import torch; print(torch.version.cuda or "")')"
  cuda_home="${CUDA_HOME:-/usr/local/cuda}"
  nvcc="$(command -v nvcc || echo "$cuda_home/bin/nvcc")"
  if [ ! -x "$nvcc" ]; then
    echo "build: the torch wheel's LibTorch needs the CUDA toolkit $wheel_cuda (nvcc: none on PATH or in $cuda_home/bin); MESHPLAN_SKIP_TORCH_WHEEL=1 builds the planner only" >&2
    exit 2
  fi
  toolkit_cuda="$("$nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
  if [ "$toolkit_cuda" != "$wheel_cuda" ]; then
    echo "build: $nvcc is CUDA $toolkit_cuda, the torch wheel was built with CUDA $wheel_cuda (install that toolkit or put its nvcc first on PATH); MESHPLAN_SKIP_TORCH_WHEEL=1 builds the planner only" >&2
    exit 2
  fi
  export CUDACXX="$nvcc"
  torch_prefix="$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
  # The wheel's own CUDA pieces (nvidia-* packages): NCCL of the CUDA version it was built with.
  nvidia="$("$python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0]))')"
  torch=(-DMESHPLAN_WITH_TORCH=ON -DCMAKE_PREFIX_PATH="$torch_prefix"
         -DMESHPLAN_WITH_CUDA=ON -DNCCL_ROOT="$nvidia/nccl" -DTORCH_CUDA_ARCH_LIST=9.0
         -DMESHPLAN_TORCH_PCH=ON -DMESHPLAN_REFERENCE_PYTHON="$python")
  # The frameworks `meshplan export` writes for, beside the torch venv: the export test
  # feeds them what export writes (tests/export/check_with_frameworks.py).
  frameworks_python="$("$root/scripts/install_framework_refs.sh")"
  torch+=(-DMESHPLAN_FRAMEWORK_PYTHON="$frameworks_python")
fi

launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
  # ccache caches files compiled with a precompiled header only with these (ccache manual,
  # "Precompiled headers").
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/CMakeCache.txt" ]; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" "${launcher[@]}" "${torch[@]}" "$@" >/dev/null
targets=()
for t in ${MESHPLAN_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "${MESHPLAN_BUILD_JOBS:-$(nproc)}" "${targets[@]}"
