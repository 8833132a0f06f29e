#!/usr/bin/env bash
# demo.sh: the README's first command. Sets up, builds, and runs the main job on its built-in
# default: the whole tuning loop on pptrain's tiny GPT with a 4096-token vocabulary (its LM head
# then costs about five transformer blocks, as in shallow real GPTs) as a 2-stage 1F1B pipeline,
# one stage per core of the 2-core CI machine. The even split (0,3,6: embedding and two blocks |
# two blocks and the head) is visibly unbalanced. pprof-tune --auto captures it with pprof-run,
# proposes better boundaries, re-runs the job with the plan, verifies predicted against measured,
# and repeats while it gains; then pprof-report writes a Perfetto trace of each iteration. Extra
# arguments go to pptrain.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
mkdir -p runs
./build/tools/pprof-tune --auto -o runs/demo -- \
  ./build/tools/pptrain --model tiny --vocab 4096 --stages 2 --microbatches 8 --schedule 1f1b \
  --steps 60 "$@"
for d in runs/demo/iter*/; do
  ./build/tools/pprof-report "${d%/}" -q --chrome "${d%/}/trace.json"
done
echo
echo "iterations:    runs/demo/iter0, iter1, ... (pprof-report runs/demo/iter0 for a summary)"
echo "Gantt charts:  runs/demo/iter*/gantt.png (before: iter0, after: the best iteration)"
echo "Perfetto:      runs/demo/iter*/trace.json (open in https://ui.perfetto.dev or chrome://tracing)"
echo "best plan:     runs/demo/best-plan.json (pptrain --plan runs/demo/best-plan.json)"
