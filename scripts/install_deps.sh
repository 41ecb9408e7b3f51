#!/usr/bin/env bash
# Installs the Debian packages meshplan builds with. Idempotent, non-interactive,
# and fast when everything is there (no apt-get update unless something is missing).
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libyaml-cpp-dev nlohmann-json3-dev libfmt-dev libcli11-dev libeigen3-dev
  catch2 libbenchmark-dev
  libtorch-dev libgloo-dev
  libopenblas0-openmp  # LibTorch's BLAS through Debian's alternatives (netlib's reference BLAS is ~10x slower)
  libimgui-dev libglfw3-dev libgl-dev libstb-dev fonts-dejavu-core
  xvfb xauth libgl1-mesa-dri  # the explorer's screenshot test: Xvfb + Mesa software OpenGL
  hyperfine  # scripts/bench_startup.sh: whole-process timings
  jq  # scripts/cpu_rank_loop.sh: reads measured.json and compare's JSON
  python3  # tests/scripts/doc_links.py: the docs' link check
  clang libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer, AddressSanitizer, UBSan runtimes
  ccache  # scripts/build.sh, build_torch2.sh: rebuilds of an unchanged file (a fresh clone, CI) hit the cache
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
