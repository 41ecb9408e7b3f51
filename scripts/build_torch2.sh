#!/usr/bin/env bash
# The second executor build: against the `torch` wheel's LibTorch 2.x (with CUDA) from
# scripts/install_torch_wheel.sh, CUDA and NCCL on, so every CUDA-only file compiles and
# links (nothing runs on a GPU). Builds what links the executor: meshplan-exec, the executor
# tests and tests/reference/reference_step (plus meshplan, which the executor tests run),
# into build-torch2/ (or $MESHPLAN_TORCH2_BUILD_DIR). Uses ccache when installed.
# MESHPLAN_SKIP_TORCH_WHEEL=1 skips it (exit 0). Extra arguments go to CMake's configure step.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MESHPLAN_TORCH2_BUILD_DIR:-$root/build-torch2}"

venv="$("$root/scripts/install_torch_wheel.sh")"
if [ -z "$venv" ]; then exit 0; fi  # skipped
python="$venv/bin/python"
torch_prefix="$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
# The wheel's own CUDA pieces (nvidia-* packages): NCCL of the CUDA version it was built with.
nvidia="$("$python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0]))')"

launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
generator=()
if [ ! -f "$build/CMakeCache.txt" ]; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" "${launcher[@]}" \
  -DCMAKE_PREFIX_PATH="$torch_prefix" \
  -DMESHPLAN_WITH_CUDA=ON -DNCCL_ROOT="$nvidia/nccl" \
  -DTORCH_CUDA_ARCH_LIST=9.0 \
  -DMESHPLAN_WITH_GUI=OFF -DMESHPLAN_BUILD_BENCHMARKS=OFF \
  -DMESHPLAN_REFERENCE_PYTHON="$python" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)" --target meshplan meshplan-exec executor_tests reference_step
