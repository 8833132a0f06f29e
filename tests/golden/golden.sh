#!/usr/bin/env bash
# golden.sh: byte-for-byte outputs of the tools on fixed traces, so that a change that should not
# change behaviour (issue 15's restructuring, any refactor) is shown not to.
#
# usage: tests/golden/golden.sh capture [--build DIR]   capture tests/golden/runs anew (sim backend)
#        tests/golden/golden.sh record  [--build DIR]   write tests/golden/expected from the runs
#        tests/golden/golden.sh check   [--build DIR]   compare against tests/golden/expected
#
# The runs are sim-backend captures of pptrain (costs.json, four schedules, a straggler) plus the
# committed analysis fixtures (tests/data/fuzz/analysis/*.pft, one run directory each). "check"
# runs every tool on copies of them in a scratch directory, under relative names, and diffs each
# output file (stdout, stderr and exit code included) against expected/. A difference prints the
# diff and exits 1. Recapture only when the trace format itself changes: the point is that the
# inputs stay fixed while the code moves.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=${1:-}
[ $# -gt 0 ] && shift
build="$root/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    *) echo "golden.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)

capture() {
  [ -e "$build/profiler/libpprof.so" ] || { echo "golden.sh: no libpprof.so in $build" >&2; exit 2; }
  rm -rf "$here/runs"
  mkdir -p "$here/runs"
  one() { # $1: name, rest: pptrain arguments
    local name=$1; shift
    "$build/tools/pprof-run" -q -o "$here/runs/$name" -- "$build/tools/pptrain" --backend sim \
      --costs "$here/costs.json" --steps 10 -q "$@"
    rm -f "$here/runs/$name/manifest.json.tmp"
  }
  one gpipe2 --stages 2 --microbatches 4 --schedule gpipe
  one onef1b4 --stages 4 --microbatches 8 --schedule 1f1b
  one onef1b4_again --stages 4 --microbatches 8 --schedule 1f1b
  one onef1b4_slow --stages 4 --microbatches 8 --schedule 1f1b --sim-slow 3=1.1
  one inter2 --stages 2 --virtual-stages 2 --microbatches 4 --schedule interleaved
  one zbh1_4 --stages 4 --microbatches 8 --schedule zb-h1
  one onef1b4_m4 --stages 4 --microbatches 4 --schedule 1f1b
  one onef1b4_plan --microbatches 8 --schedule 1f1b --boundaries 0,3,5,7,8
  du -sh "$here/runs"
}

# Runs every tool into directory $1 (the outputs), from a scratch copy of the inputs.
produce() {
  local out=$1 work
  work=$(mktemp -d /tmp/pp_golden.XXXXXX)
  trap 'rm -rf "$work"' RETURN
  mkdir -p "$out" "$work/runs"
  cp -r "$here/runs/." "$work/runs/"
  for f in "$root"/tests/data/fuzz/analysis/*.pft; do
    local n
    n=$(basename "$f" .pft)
    mkdir -p "$work/runs/fx_$n"
    cp "$f" "$work/runs/fx_$n/"
  done
  cd "$work"
  # t NAME CMD...: runs CMD, keeps its stdout, stderr and exit code as NAME.{out,err,rc}.
  t() {
    local name=$1; shift
    set +e
    "$@" >"$out/$name.out" 2>"$out/$name.err"
    echo $? >"$out/$name.rc"
    set -e
  }
  # keep SRC NAME: moves a file a tool wrote into the outputs (or notes that it is missing).
  keep() {
    if [ -e "$1" ]; then mv "$1" "$out/$2"; else echo "missing" >"$out/$2.missing"; fi
  }
  local B="$build/tools" r
  for r in runs/*/; do
    r=${r%/}
    local n=${r#runs/}
    t "$n.report" "$B/pprof-report" "$r"
    t "$n.report-json" "$B/pprof-report" --json "$r"
    t "$n.report-steps" "$B/pprof-report" --json --steps 2:5 "$r"
    t "$n.report-warm0" "$B/pprof-report" --warmup 0 "$r"
    t "$n.pictures" "$B/pprof-report" -q --chrome "$n.chrome.json" --gantt "$n.gantt.png" \
      --gantt-data "$n.gantt.dat" "$r"
    rm -f "$n.gantt.png"  # gnuplot's picture: its bytes are gnuplot's, the data and script ours
    keep "$n.chrome.json" "$n.chrome.json"
    keep "$n.gantt.dat" "$n.gantt.dat"
    keep "$n.gantt.dat.gp" "$n.gantt.gp"
    t "$n.tune" "$B/pprof-tune" --time-budget 0 -o "$n.plan.json" --export-costs "$n.costs.json" "$r"
    keep "$n.plan.json" "$n.plan.json"
    keep "$n.costs.json" "$n.costs.json"
    t "$n.tune-all" "$B/pprof-tune" --time-budget 0 --schedules all --formula "$r"
    t "$n.save-baseline" "$B/pprof-check" --save-baseline "$r"
  done
  t check-pass "$B/pprof-check" --baseline runs/onef1b4 runs/onef1b4_again
  t check-slow "$B/pprof-check" --baseline runs/onef1b4 runs/onef1b4_slow \
    --junit check-slow.xml --markdown check-slow.md
  keep check-slow.xml check-slow.xml
  keep check-slow.md check-slow.md
  t check-slow-json "$B/pprof-check" --json --baseline runs/onef1b4 runs/onef1b4_slow
  t check-slow-per-step "$B/pprof-check" --per-step --baseline runs/onef1b4 runs/onef1b4_slow
  t check-shape "$B/pprof-check" --baseline runs/onef1b4 runs/gpipe2
  t check-shape-allowed "$B/pprof-check" --allow-shape-change --baseline runs/onef1b4 runs/zbh1_4
  "$B/pprof-report" -q --json -o base.json runs/onef1b4 >/dev/null 2>&1 || true
  t check-summary "$B/pprof-check" --baseline base.json runs/onef1b4_slow
  cp "$out/onef1b4.plan.json" plan.json
  t verify "$B/pprof-tune" --verify plan.json runs/onef1b4_plan --baseline runs/onef1b4
  t verify-mismatch "$B/pprof-tune" --verify plan.json runs/onef1b4_again
  t advise "$B/pprof-tune" --time-budget 0 --advise runs/onef1b4 runs/onef1b4_m4
  # What depends on when, where and how fast the tools ran, not on the code: the baseline's
  # provenance and the rebalancer's search seconds; and the version that wrote an output (a
  # release changes it, not the behaviour).
  sed -i -E 's/"created": "[^"]*"/"created": "-"/; s/"host": "[^"]*"/"host": "-"/;
             s/"pipeprof_version": "[^"]*"/"pipeprof_version": "-"/;
             s/(optimal|gap [^,]*), [0-9]+\.[0-9]+ s/\1, - s/g' "$out"/*
}

case "$mode" in
  capture) capture ;;
  record)
    rm -rf "$here/expected"
    produce "$here/expected"
    echo "golden.sh: recorded $(ls "$here/expected" | wc -l) files in $here/expected"
    ;;
  check)
    got=$(mktemp -d /tmp/pp_golden_got.XXXXXX)
    trap 'rm -rf "$got"' EXIT
    produce "$got"
    if diff -ru "$here/expected" "$got" >"$got.diff" 2>&1; then
      echo "golden.sh: $(ls "$here/expected" | wc -l) outputs identical"
      rm -f "$got.diff"
    else
      head -c 20000 "$got.diff"
      echo "golden.sh: outputs differ from tests/golden/expected (full diff: $got.diff)"
      exit 1
    fi
    ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
