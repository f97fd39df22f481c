#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, and nothing when all are present.
# Idempotent: one `apt-get update`, only when something is missing. Pass extra package
# names (e.g. the benchmark peers) as arguments.
set -euo pipefail
packages=(cmake ninja-build g++ ccache pkg-config python3 python3-dev python3-jinja2
          python3-yaml python3-numpy python3-pytest pybind11-dev doctest-dev libbenchmark-dev
          zlib1g-dev libxxhash-dev abigail-tools libdnnl-dev python3-onnx
          python3-setuptools python3-wheel python3-build python3-venv python3-pip dpkg-dev
          clang libclang-rt-dev libomp-dev python3-hypothesis python3-clang
          libopenmpi-dev openmpi-bin
          "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
