#!/usr/bin/env bash
# setup.sh: installs what pipeprof needs on Debian 12 (as root), only what is missing.
# Called by scripts/demo.sh and scripts/test.sh; safe to run again.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libcriterion-dev libopenblas-dev libcjson-dev gnuplot-nox
      clang libclang-rt-dev
      openmpi-bin libopenmpi-dev) # the MPI transport (pptrain --transport mpi) and its test
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
