#!/usr/bin/env bash
# check_false_alarms.sh: how often pprof-check raises a false alarm, and whether it still sees a
# real change. Reruns the CI gate's configuration (benchmarks/ci_gate.sh: sim backend, 4 stages,
# 1F1B, 8 micro-batches, 20 analyzed steps) N times (default 20) and checks each run, alone (no
# confirmation run), against benchmarks/ci-baseline.json; then one run with stage 2 made 5%
# slower (pptrain --sim-slow 2=1.05) and one with every cost 5% lower. Prints the counts; exits
# 1 when a rerun was flagged or a change was missed. Takes about 3.5 s per run.
#
# usage: benchmarks/check_false_alarms.sh [--build DIR] [N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=build
if [ "${1:-}" = "--build" ]; then build=$2; shift 2; fi
n=${1:-20}
build=$(cd "$build" && pwd)
if [ ! -e "$build/profiler/libpprof.so" ]; then
  echo "check_false_alarms.sh: $build/profiler/libpprof.so not built (no NVTX headers)" >&2
  exit 2
fi
work=$(mktemp -d /tmp/pp_false_alarms.XXXXXX)
trap 'rm -rf "$work"' EXIT

capture() { # $1 run dir, $2 costs file, then pptrain extras
  local dir=$1 costs=$2
  shift 2
  "$build/tools/pprof-run" -q -o "$dir" -- "$build/tools/pptrain" --backend sim --costs "$costs" \
    --stages 4 --microbatches 8 --schedule 1f1b --steps 21 -q "$@"
}
gate() { # $1 run dir; prints pprof-check's exit code
  set +e
  "$build/tools/pprof-check" -q --baseline "$here/ci-baseline.json" "$1" --json > "$1.json"
  echo $?
  set -e
}
verdicts() { # $1 JSON report, $2 regressions|improvements: that list of the report
  grep -o "\"$2\": \[[^]]*\]" "$1" | sed 's/^[^[]*//'
}

alarms=0
for i in $(seq 1 "$n"); do
  capture "$work/rerun$i" "$here/ci-costs.json"
  rc=$(gate "$work/rerun$i")
  if [ "$rc" != 0 ]; then
    alarms=$((alarms + 1))
    echo "rerun $i: exit $rc, flagged: $(verdicts "$work/rerun$i.json" regressions)"
  fi
  rm -rf "$work/rerun$i"
done
echo "false alarms: $alarms of $n reruns of the same configuration"

missed=0
capture "$work/slow" "$here/ci-costs.json" --sim-slow 2=1.05
rc=$(gate "$work/slow")
echo "stage 2 made 5% slower: exit $rc, regressions: $(verdicts "$work/slow.json" regressions)"
[ "$rc" = 1 ] || missed=$((missed + 1))
sed 's/"fwd_us": 2000, "bwd_us": 4000/"fwd_us": 1900, "bwd_us": 3800/g' "$here/ci-costs.json" \
  > "$work/fast-costs.json"
capture "$work/fast" "$work/fast-costs.json"
rc=$(gate "$work/fast")
echo "every cost 5% lower: exit $rc, improvements: $(verdicts "$work/fast.json" improvements)"
[ "$rc" = 0 ] && grep -q '"verdict": "improvement"' "$work/fast.json" || missed=$((missed + 1))
[ "$alarms" = 0 ] && [ "$missed" = 0 ]
