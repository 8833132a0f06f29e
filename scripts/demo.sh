#!/usr/bin/env bash
# demo.sh: the README's first command. Sets up, builds, and runs the main job on its built-in
# default: pptrain trains the tiny GPT on the synthetic Markov corpus for 300 steps.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
./build/tools/pptrain --model tiny --steps 300 "$@"
