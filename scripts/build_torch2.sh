#!/usr/bin/env bash
# The second executor build: against the `torch` wheel's LibTorch 2.x (with CUDA) from
# scripts/install_torch_wheel.sh, CUDA and NCCL on, so every CUDA-only file compiles and
# links (nothing runs on a GPU). Builds what links the executor: meshplan-exec, the executor
# tests and tests/reference/reference_step (plus meshplan, which the executor tests run),
# into build-torch2/ (or $MESHPLAN_TORCH2_BUILD_DIR), with <ATen/ATen.h> precompiled once
# (MESHPLAN_TORCH_PCH: about half the CPU time of a cold build; docs/executor.md). Uses ccache
# when installed.
# Exit 2 with the reason when the wheel cannot be installed (scripts/install_torch_wheel.sh) or
# the CUDA toolkit the wheel needs (nvcc of the wheel's CUDA major.minor) is missing.
# MESHPLAN_SKIP_TORCH_WHEEL=1 skips it (exit 0). Extra arguments go to CMake's configure step.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MESHPLAN_TORCH2_BUILD_DIR:-$root/build-torch2}"

venv="$("$root/scripts/install_torch_wheel.sh")"
if [ -z "$venv" ]; then exit 0; fi  # skipped
python="$venv/bin/python"
# The wheel's Caffe2 CMake config needs a CUDA toolkit of the version the wheel was built with.
wheel_cuda="$("$python" -c 'import torch; print(torch.version.cuda or "")')"
cuda_home="${CUDA_HOME:-/usr/local/cuda}"
nvcc="$(command -v nvcc || echo "$cuda_home/bin/nvcc")"
if [ ! -x "$nvcc" ]; then
  echo "build_torch2: the torch wheel's LibTorch needs the CUDA toolkit $wheel_cuda (nvcc: none on PATH or in $cuda_home/bin); MESHPLAN_TORCH2=0 scripts/test.sh skips this build, MESHPLAN_SKIP_TORCH_WHEEL=1 the wheel too" >&2
  exit 2
fi
toolkit_cuda="$("$nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
if [ "$toolkit_cuda" != "$wheel_cuda" ]; then
  echo "build_torch2: $nvcc is CUDA $toolkit_cuda, the torch wheel was built with CUDA $wheel_cuda (install that toolkit or put its nvcc first on PATH); MESHPLAN_TORCH2=0 scripts/test.sh skips this build, MESHPLAN_SKIP_TORCH_WHEEL=1 the wheel too" >&2
  exit 2
fi
export CUDACXX="$nvcc"
torch_prefix="$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
# The wheel's own CUDA pieces (nvidia-* packages): NCCL of the CUDA version it was built with.
nvidia="$("$python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0]))')"

launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
  # ccache caches files compiled with a precompiled header only with these (ccache manual,
  # "Precompiled headers").
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
generator=()
if [ ! -f "$build/CMakeCache.txt" ]; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" "${launcher[@]}" \
  -DCMAKE_PREFIX_PATH="$torch_prefix" \
  -DMESHPLAN_WITH_CUDA=ON -DNCCL_ROOT="$nvidia/nccl" \
  -DTORCH_CUDA_ARCH_LIST=9.0 \
  -DMESHPLAN_WITH_GUI=OFF -DMESHPLAN_BUILD_BENCHMARKS=OFF -DMESHPLAN_TORCH_PCH=ON \
  -DMESHPLAN_REFERENCE_PYTHON="$python" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)" --target meshplan meshplan-exec executor_tests reference_step
