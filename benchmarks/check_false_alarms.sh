#!/usr/bin/env bash
# check_false_alarms.sh: how often pprof-check raises a false alarm, and whether it still sees a
# real change, on the sim backend and on real compute (the cpu backend).
#
# sim: reruns the CI gate's configuration (benchmarks/ci_gate.sh: sim backend, 4 stages, 1F1B, 8
# micro-batches, 20 analyzed steps) N times and checks each, alone, against
# benchmarks/ci-baseline.json with the per-step test (--per-step: the sim backend's steps are
# independent); then stage 2 made 5% slower (--sim-slow 2=1.05) and every cost 5% lower.
#
# cpu: the job a new user runs (pptrain --model tiny, 2 stages, 40 steps, --backend cpu). K runs
# (default 5) make a baseline; N reruns of the unchanged job are each checked against it with the
# run-level test (the default: Welch / pooled t on the runs' medians), and, for comparison, with
# the old per-step test against a one-run baseline (the first of the K). Then the number of runs
# the tool says a change of the 2% step-time threshold needs (the median of what the reruns'
# checks said, at least 2, at most MAXRUNS, default 10) is captured with a heavier model
# (--d-model 68 and 96 instead of 64: the same layers and shape, more arithmetic; with one
# micro-batch, moving a layer between the stages changes no step time), interleaved with as many
# fresh unchanged runs that make the baseline (grown with --add-run), and checked; the power
# note says what change those runs can see, and the larger slowdown must be caught.
#
# Prints false alarms of each test, the runs needed, and the slowdown's verdict; exits 1 when a
# rerun failed the new gate or a change was missed. About 3.5 s per sim run and 7 s per cpu run
# on an idle 2-core machine; run it when `uptime` shows little else running.
#
# usage: benchmarks/check_false_alarms.sh [--build DIR] [--only sim|cpu] [N] [K] [MAXRUNS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=build
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) break ;;
  esac
done
n=${1:-20}
k=${2:-5}
maxruns=${3:-10}
build=$(cd "$build" && pwd)
if [ ! -e "$build/profiler/libpprof.so" ]; then
  echo "check_false_alarms.sh: $build/profiler/libpprof.so not built (no NVTX headers)" >&2
  exit 2
fi
work=$(mktemp -d /tmp/pp_false_alarms.XXXXXX)
trap 'rm -rf "$work"' EXIT
check="$build/tools/pprof-check"

verdicts() { # $1 JSON report, $2 regressions|improvements: that list of the report
  grep -o "\"$2\": \[[^]]*\]" "$1" | sed 's/^[^[]*//'
}
gate_rc() { # pprof-check ARGS... > JSON on $out; prints the exit code
  set +e
  "$check" -q "$@" --json > "$out"
  echo $?
  set -e
}

bad=0

# ---- sim backend --------------------------------------------------------------------------
if [ "$only" != cpu ]; then
  capture_sim() { # $1 run dir, $2 costs file, then pptrain extras
    local dir=$1 costs=$2
    shift 2
    "$build/tools/pprof-run" -q -o "$dir" -- "$build/tools/pptrain" --backend sim \
      --costs "$costs" --stages 4 --microbatches 8 --schedule 1f1b --steps 21 -q "$@" > /dev/null
  }
  alarms=0
  for i in $(seq 1 "$n"); do
    capture_sim "$work/rerun$i" "$here/ci-costs.json"
    out="$work/rerun$i.json"
    rc=$(gate_rc --per-step --baseline "$here/ci-baseline.json" "$work/rerun$i")
    if [ "$rc" != 0 ]; then
      alarms=$((alarms + 1))
      echo "sim rerun $i: exit $rc, flagged: $(verdicts "$out" regressions)"
    fi
    rm -rf "$work/rerun$i"
  done
  echo "sim: false alarms (per-step test): $alarms of $n reruns of the same configuration"
  [ "$alarms" = 0 ] || bad=1
  capture_sim "$work/slow" "$here/ci-costs.json" --sim-slow 2=1.05
  out="$work/slow.json"
  rc=$(gate_rc --per-step --baseline "$here/ci-baseline.json" "$work/slow")
  echo "sim: stage 2 made 5% slower: exit $rc, regressions: $(verdicts "$out" regressions)"
  [ "$rc" = 1 ] || bad=1
  sed 's/"fwd_us": 2000, "bwd_us": 4000/"fwd_us": 1900, "bwd_us": 3800/g' \
    "$here/ci-costs.json" > "$work/fast-costs.json"
  capture_sim "$work/fast" "$work/fast-costs.json"
  out="$work/fast.json"
  rc=$(gate_rc --per-step --baseline "$here/ci-baseline.json" "$work/fast")
  echo "sim: every cost 5% lower: exit $rc, improvements: $(verdicts "$out" improvements)"
  { [ "$rc" = 0 ] && grep -q '"verdict": "improvement"' "$out"; } || bad=1
fi

# ---- cpu backend --------------------------------------------------------------------------
if [ "$only" != sim ]; then
  capture_cpu() { # $1 run dir, then the layout (default --stages 2: boundaries 0,3,6)
    local dir=$1
    shift
    [ $# -gt 0 ] || set -- --stages 2
    "$build/tools/pprof-run" -q -o "$dir" -- "$build/tools/pptrain" --model tiny "$@" \
      --steps 40 --backend cpu -q > /dev/null
  }
  step_ms() { # the step time's baseline and current values and change of report $1
    grep -o '"name": "step_ms"[^}]*"change": [^,]*' "$1" | sed 's/.*"baseline": \([^,]*\), "current": \([^,]*\), "change": \(.*\)/\1 -> \2 ms (\3%)/'
  }
  base_runs=()
  for j in $(seq 1 "$k"); do
    capture_cpu "$work/base$j"
    base_runs+=("$work/base$j")
  done
  "$check" -q --save-baseline "${base_runs[@]}" -o "$work/base.json"
  new_alarms=0
  old_alarms=0
  needs=()
  for i in $(seq 1 "$n"); do
    capture_cpu "$work/cpu$i"
    out="$work/cpu$i.new.json"
    rc=$(gate_rc --baseline "$work/base.json" "$work/cpu$i")
    need=$(awk '/"name": "step_ms"/ {getline; getline; print}' "$out" | grep -o '"runs_needed": [0-9]*' |
      grep -o '[0-9]*$' || true)
    [ -n "$need" ] && needs+=("$need")
    if [ "$rc" != 0 ]; then
      new_alarms=$((new_alarms + 1))
      echo "cpu rerun $i: runs test exit $rc, flagged: $(verdicts "$out" regressions)"
    fi
    out="$work/cpu$i.old.json"
    rc=$(gate_rc --per-step --baseline "$work/base1" "$work/cpu$i")
    if [ "$rc" != 0 ]; then
      old_alarms=$((old_alarms + 1))
      echo "cpu rerun $i: per-step test exit $rc, step_ms $(step_ms "$out"), flagged: $(verdicts "$out" regressions)"
    fi
    rm -rf "$work/cpu$i"
  done
  echo "cpu: false alarms, runs test (${k}-run baseline, one current run): $new_alarms of $n reruns"
  echo "cpu: false alarms, old per-step test (one-run baseline): $old_alarms of $n reruns"
  [ "$new_alarms" = 0 ] || bad=1
  # the runs a 2% step-time change needs, as the checks said (median), capped
  need=$(printf '%s\n' "${needs[@]:-0}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  use=$need
  [ "$use" -ge 2 ] 2>/dev/null || use=2
  [ "$use" -le "$maxruns" ] || use=$maxruns
  echo "cpu: the checks said a 2% step-time change needs $need runs per side (median of $n); using $use"
  # two slowdowns, interleaved with as many fresh unchanged runs (one of each, back to back),
  # so that the machine's load drifts alike on all sides
  for j in $(seq 1 "$use"); do
    capture_cpu "$work/fresh$j"
    if [ "$j" = 1 ]; then
      "$check" -q --save-baseline "$work/fresh1" -o "$work/fresh.json"
    else
      "$check" -q --baseline "$work/fresh.json" --add-run "$work/fresh$j"
    fi
    for d in 68 96; do
      capture_cpu "$work/slow$d-$j" --stages 2 --d-model "$d"
    done
  done
  for d in 68 96; do
    slow_runs=()
    for j in $(seq 1 "$use"); do slow_runs+=("$work/slow$d-$j"); done
    out="$work/slow$d.json"
    rc=$(gate_rc --baseline "$work/fresh.json" "${slow_runs[@]}")
    echo "cpu: d_model 64 -> $d, $use runs against $use interleaved: exit $rc, step_ms $(step_ms "$out"), regressions: $(verdicts "$out" regressions)"
    grep -o 'power: [^"]*' "$out" | sed 's/^/cpu:   /'
    out="$work/slow$d-1.json"
    rc1=$(gate_rc --baseline "$work/fresh.json" "$work/slow$d-1")
    echo "cpu: the same with one current run: exit $rc1, step_ms $(step_ms "$out"), regressions: $(verdicts "$out" regressions)"
    # the larger slowdown is beyond what these runs detect: it must be caught
    [ "$d" != 96 ] || [ "$rc" = 1 ] || bad=1
  done
fi
[ "$bad" = 0 ]
