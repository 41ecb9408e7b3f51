#!/usr/bin/env bash
# Creates (once) a cached Python virtual environment with the frameworks `meshplan export`
# writes for, at pinned versions, so that tests/export/check_with_frameworks.py can feed what
# export writes to their own parsers and schemas (docs/export.md, "Checked by"): megatron-core,
# megatron-bridge, torchtitan (0.2.2: the last release that reads a job TOML) and deepspeed.
# It sits beside the torch venv of scripts/install_torch_wheel.sh and sees its torch through
# a .pth file, so torch is not installed twice. The frameworks go in with --no-deps (their
# GPU dependencies, Transformer Engine, apex, flash-attn, cannot be built without a GPU and
# are not needed to read a config); the few pure-Python packages their config modules import
# are pinned here instead. DeepSpeed is a source package, built with DS_BUILD_OPS=0 (no CUDA
# kernels) and --no-build-isolation (its setup.py imports torch). Prints the venv's python.
# Cached in ${MESHPLAN_FRAMEWORK_VENV:-<the torch venv's folder>/venv-frameworks-<pins hash>};
# complete only once its stamp file (written last, after every pin imports) names the pins.
# Exit 2 with the reason (no torch venv, pip cannot install a pin, a package does not import),
# the half-made venv removed. Runs take turns (flock): the protocol of scripts/cached_venv.sh.
# MESHPLAN_SKIP_TORCH_WHEEL=1 skips it (exit 0, prints nothing), as it skips the torch venv it needs.
set -euo pipefail

frameworks=("megatron-core==0.16.1" "megatron-bridge==0.3.1" "torchtitan==0.2.2" "deepspeed==0.19.8")
# What their config modules import (besides torch): DeepSpeed's runtime config (pydantic,
# hjson, py-cpuinfo, psutil, msgpack, ninja, einops), torchtitan's ConfigManager (tyro),
# Megatron-Bridge's override parser (hydra-core, omegaconf), and the build of DeepSpeed's
# sdist (wheel, setuptools).
helpers=("pydantic==2.14.4" "hjson==3.1.0" "py-cpuinfo==9.0.0" "psutil==7.2.2" "msgpack==1.2.4"
         "ninja==1.13.2" "einops==0.8.2" "tyro==1.0.17" "hydra-core==1.3.2" "omegaconf==2.3.1"
         "wheel==0.48.0" "setuptools==80.9.0")

root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/cached_venv.sh"
cached_venv_init install_framework_refs it "$@"

torch_venv="$("$root/scripts/install_torch_wheel.sh")" ||
  { echo "install_framework_refs: no torch venv (scripts/install_torch_wheel.sh failed, above)" >&2; exit 2; }
[ -n "$torch_venv" ] || { echo "install_framework_refs: no torch venv (skipped)" >&2; exit 2; }

pins="${frameworks[*]} ${helpers[*]} on $torch_venv"
hash="$(printf '%s' "$pins" | sha256sum | cut -c1-12)"
venv="${MESHPLAN_FRAMEWORK_VENV:-$(dirname "$torch_venv")/venv-frameworks-$hash}"
cached_venv_reuse "$venv" "$pins" "$venv/bin/python"
cached_venv_lock
echo "install_framework_refs: installing ${frameworks[*]} into $venv (once, about a minute)" >&2
"$torch_venv/bin/python" -m venv --without-pip "$venv" >&2 ||
  refuse "python -m venv $venv failed"
# The torch venv's packages (torch, numpy) are visible through a .pth file; pip comes from
# there too, and installs into this venv.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" ||
  refuse "$venv/bin/python cannot name its site-packages folder"
torch_site="$("$torch_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" ||
  refuse "$torch_venv/bin/python cannot name its site-packages folder"
mkdir -p "$site" && echo "$torch_site" > "$site/meshplan-torch-venv.pth" ||
  refuse "cannot write $site/meshplan-torch-venv.pth"
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input --quiet)
"${pip[@]}" install "${helpers[@]}" >&2 ||
  refuse "pip could not install ${helpers[*]} (see pip's message above: no network?)"
DS_BUILD_OPS=0 "${pip[@]}" install --no-deps --no-build-isolation "${frameworks[@]}" >&2 ||
  refuse "pip could not install ${frameworks[*]} (see pip's message above)"
"$venv/bin/python" - >&2 <<'PY' || refuse "an installed framework does not import its config (see above)"
import dataclasses
import megatron.core.transformer.transformer_config as tc
import deepspeed.runtime.config
from torchtitan.config import ConfigManager
import importlib.util
assert importlib.util.find_spec("megatron.bridge") is not None, "megatron-bridge is not installed"
assert dataclasses.fields(tc.TransformerConfig)
PY
cached_venv_done
