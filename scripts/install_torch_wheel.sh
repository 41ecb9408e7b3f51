#!/usr/bin/env bash
# Creates (once) a cached Python virtual environment with PyPI's `torch` wheel (LibTorch 2.x
# built with CUDA) plus `transformers` and `safetensors`, for the second executor build
# (scripts/build_torch2.sh) and the outside-reference tests. Prints the venv's path on stdout.
# Cached outside the clone in ${MESHPLAN_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/meshplan/venv-torch-<version>};
# a venv counts as complete only once its stamp file (written last) names the same pins.
# MESHPLAN_SKIP_TORCH_WHEEL=1 skips it (exit 0, prints nothing).
set -euo pipefail

torch_version="2.11.0"
pins=("torch==$torch_version" "transformers==5.23.0" "safetensors==0.8.0" "numpy==2.4.6")

if [ "${MESHPLAN_SKIP_TORCH_WHEEL:-0}" = "1" ]; then
  echo "install_torch_wheel: skipped (MESHPLAN_SKIP_TORCH_WHEEL=1)" >&2
  exit 0
fi

venv="${MESHPLAN_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/meshplan/venv-torch-$torch_version}"
stamp="$venv/.meshplan-complete"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${pins[*]}" ]; then
  echo "install_torch_wheel: cached at $venv" >&2
  echo "$venv"
  exit 0
fi

python="$(command -v python3 || true)"
if [ -z "$python" ] || ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "install_torch_wheel: needs python3 with venv and pip (apt-get install python3-venv)" >&2
  exit 2
fi

echo "install_torch_wheel: installing ${pins[*]} into $venv (several GB, once)" >&2
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-input "${pins[@]}" >&2
"$venv/bin/python" -c 'import torch, transformers, safetensors' >&2
echo "${pins[*]}" > "$stamp"
echo "install_torch_wheel: ready at $venv" >&2
echo "$venv"
