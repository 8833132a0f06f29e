#!/usr/bin/env bash
# demo.sh: the README's first command. Sets up, builds, and runs the main job on its built-in
# default: pptrain trains the tiny GPT for 300 steps as a 4-stage 1F1B pipeline, captured by
# pprof-run; pprof-report then draws the stage timelines (Gantt chart) and writes a Perfetto trace.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
mkdir -p runs
./build/tools/pprof-run -o runs/demo -- \
  ./build/tools/pptrain --model tiny --steps 300 --stages 4 --microbatches 8 --schedule 1f1b "$@"
./build/tools/pprof-report runs/demo -q --gantt runs/demo/gantt.png --chrome runs/demo/trace.json
echo
echo "run directory: runs/demo (pprof-report runs/demo for the summary again)"
echo "Gantt chart:   runs/demo/gantt.png"
echo "Perfetto:      runs/demo/trace.json (open in https://ui.perfetto.dev or chrome://tracing)"
