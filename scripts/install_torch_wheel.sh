#!/usr/bin/env bash
# Creates (once) a cached Python virtual environment with PyPI's `torch` wheel (LibTorch 2.x
# built with CUDA) plus `transformers` and `safetensors`: the LibTorch the executor builds
# against (scripts/build.sh), its torchrun, and the outside-reference tests. Prints the venv's path on stdout.
# Cached outside the clone in ${MESHPLAN_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/meshplan/venv-torch-<version>};
# a venv counts as complete only once its stamp file (written last, after the pins import and
# the wheel's LibTorch CMake package and NCCL are found) names the same pins.
# Exit 2 with the reason (no python3 with venv and pip, pip cannot install a pin, the wheel
# does not import or lacks its LibTorch), and the half-made venv removed. Runs of this script
# on one machine take turns (flock), so one never deletes a venv another is filling: the
# protocol of scripts/cached_venv.sh. MESHPLAN_SKIP_TORCH_WHEEL=1 skips it (exit 0, prints nothing).
set -euo pipefail

torch_version="2.11.0"
pins=("torch==$torch_version" "transformers==5.23.0" "safetensors==0.8.0" "numpy==2.4.6")

# This folder, with builtins only: the refusal test runs this script with no PATH.
case "$0" in */*) here="${0%/*}" ;; *) here=. ;; esac
source "$here/cached_venv.sh"
cached_venv_init install_torch_wheel "the wheel" "$@"

venv="${MESHPLAN_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/meshplan/venv-torch-$torch_version}"
cached_venv_reuse "$venv" "${pins[*]}" "$venv"

python="$(command -v python3 || true)"
if [ -z "$python" ] || ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "install_torch_wheel: needs python3 with venv and pip (apt-get install python3-venv)" >&2
  exit 2
fi
cached_venv_lock
echo "install_torch_wheel: installing ${pins[*]} into $venv (several GB, once)" >&2
"$python" -m venv "$venv" >&2 || refuse "python3 -m venv $venv failed"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-input "${pins[@]}" >&2 ||
  refuse "pip could not install ${pins[*]} (see pip's message above: no network, no wheel for this platform, disk full?)"
"$venv/bin/python" - >&2 <<'EOF' || refuse "the installed wheel is broken (see above)"
import os, torch, transformers, safetensors, nvidia
import torch.utils
config = os.path.join(torch.utils.cmake_prefix_path, "Torch", "TorchConfig.cmake")
assert os.path.isfile(config), f"the torch wheel has no LibTorch CMake package ({config})"
nccl = os.path.join(list(nvidia.__path__)[0], "nccl", "include", "nccl.h")
assert os.path.isfile(nccl), f"the torch wheel's NCCL is missing ({nccl})"
EOF
cached_venv_done
