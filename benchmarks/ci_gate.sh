#!/usr/bin/env bash
# ci_gate.sh: the project's own performance-regression gate, run by scripts/test.sh (CI). Captures
# a small sim-backend pipeline (4 stages, 8 layers of 2 ms forward / 4 ms backward from
# benchmarks/ci-costs.json, 1F1B, 8 micro-batches, 20 analyzed steps of ~135 ms) with pprof-run
# and checks it with pprof-check against benchmarks/ci-baseline.json. The sim backend sleeps to
# absolute deadlines, so its timing stays meaningful on a busy 2-core machine, and its steps are
# independent samples: the gate uses the per-step test (--per-step) on one run a side, which on
# real compute would need several runs (docs/cli/pprof-check.md "Runs as the unit").
#
# usage: benchmarks/ci_gate.sh [--build DIR] [--out DIR] [--once] [--save] [-- PPTRAIN_ARGS...]
#   --build DIR  build tree with tools/ and profiler/libpprof.so (default: build)
#   --out DIR    keep the run, the JUnit XML and the Markdown report there (default: a temp dir)
#   --once       no confirmation run (see below)
#   --save       capture and write benchmarks/ci-baseline.json instead of checking
#   -- ARGS      extra pptrain arguments, e.g. -- --sim-slow 2=1.05 to see the gate fail
# A regression is confirmed by a second capture before the gate fails: one capture disturbed
# from start to end (a machine stalled for seconds) does not fail CI, a real regression fails
# both. Exit codes are pprof-check's: 0 pass, 1 regression, 2 bad input, 3 runtime error.
# Without libpprof.so (no NVTX headers at build time) the gate reports itself skipped (exit 0).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=build
out=""
once=0
save=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --once) once=1; shift ;;
    --save) save=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "ci_gate.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)
if [ ! -e "$build/profiler/libpprof.so" ]; then
  echo "ci_gate.sh: skipped: $build/profiler/libpprof.so not built (no NVTX headers)"
  exit 0
fi
if [ -z "$out" ]; then
  out=$(mktemp -d /tmp/pp_ci_gate.XXXXXX)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
baseline="$here/ci-baseline.json"

capture() { # $1: run directory
  rm -rf "$1"
  "$build/tools/pprof-run" -q -o "$1" -- "$build/tools/pptrain" --backend sim \
    --costs "$here/ci-costs.json" --stages 4 --microbatches 8 --schedule 1f1b --steps 21 -q \
    ${extra[@]+"${extra[@]}"}
}

if [ "$save" = 1 ]; then
  capture "$out/run"
  "$build/tools/pprof-check" --save-baseline "$out/run" -o "$baseline"
  exit 0
fi

start=$(date +%s)
check() { # $1: attempt number
  capture "$out/run$1"
  set +e
  "$build/tools/pprof-check" --per-step --baseline "$baseline" "$out/run$1" \
    --junit "$out/pprof-check.xml" --markdown "$out/pprof-check.md"
  rc=$?
  set -e
}
check 1
if [ "$rc" = 1 ] && [ "$once" = 0 ]; then
  echo "ci_gate.sh: regression reported; confirming with a second capture"
  check 2
fi
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$out/pprof-check.md" ]; then
  cat "$out/pprof-check.md" >> "$GITHUB_STEP_SUMMARY"
fi
echo "ci_gate.sh: exit $rc after $(( $(date +%s) - start )) s (reports in $out)"
exit "$rc"
