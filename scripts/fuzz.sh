#!/usr/bin/env bash
# fuzz.sh: fuzzes, with libFuzzer for a bounded time, the .pft trace reader (tests/fuzz_trace.c,
# common/trace_*.c) and the whole analysis of a run directory (tests/fuzz_analysis.c: decode,
# steps, metrics, the simulator's replay, the reports, the tuner's extraction). Builds both with
# clang (ASan + UBSan, the sources compiled in so the coverage instrumentation sees them) into
# build-fuzz/, writes the reader's seed traces, takes the analysis's seeds from
# tests/data/fuzz/analysis/ (real captures, one process and multi-rank, plus regression inputs),
# then runs each target for its share of the time under an RSS and a malloc limit.
# Usage: scripts/fuzz.sh [seconds=60] [all|trace|analysis|dialect|kineto|costs|plan]   (all: the
# seconds split in six). The dialect target (tests/fuzz_dialect.c) fuzzes dialect files with a trace
# analyzed by them; its seeds are tests/data/fuzz/dialect/. The kineto target (tests/fuzz_kineto.c)
# fuzzes the PyTorch trace importer (the JSON tokenizer, the converter, the analysis of what it
# wrote), seeded with the heads of tests/data/kineto's torch traces (and of other tools' Chrome
# traces there: chrome/, chromium/, jax/, viztracer/, pyspy/, uftrace/, onnxruntime/, node/).
# The costs target (tests/fuzz_costs.c) fuzzes cost files and what runs behind them (the simulator, the Monte Carlo
# predictor, the rebalancer, the write + reload round trip); the plan target (tests/fuzz_plan.c)
# plan files and pprof-check's summaries and baselines, with their round trips; their seeds are
# tests/data/fuzz/costs/ and plan/.
# Called by scripts/test.sh; exits non-zero on a finding, leaving the input that caused it in
# build-fuzz/artifacts/ (replay it with build-fuzz/fuzz_trace_driver FILE or
# build-fuzz/fuzz_analysis_driver FILE). FUZZ_RUNS=N runs N inputs per target instead of a time.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
which=${2:-all}
out=build-fuzz
cc=${CLANG:-clang}
if ! command -v "$cc" >/dev/null; then
  echo "fuzz: $cc not found (scripts/setup.sh installs it)" >&2
  exit 3
fi
case "$which" in
  all) share=$(( (secs + 5) / 6 )) ;;
  trace|analysis|dialect|kineto|costs|plan) share=$secs ;;
  *) echo "fuzz: unknown target '$which' (all, trace, analysis, dialect, kineto, costs, plan)" >&2
     exit 2 ;;
esac
mkdir -p "$out/corpus" "$out/seeds" "$out/artifacts" "$out/corpus-analysis" "$out/corpus-dialect" \
  "$out/corpus-kineto" "$out/seeds-kineto" "$out/corpus-costs" "$out/corpus-plan"
flags=(-std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -Icommon -Wall -Wextra -Werror
       -fno-omit-frame-pointer -fno-sanitize-recover=all)
# The sources by folder, so that a file added or split there is fuzzed without editing this list:
# the reader needs common/ only; the analysis is common/, the planning library and the analyzer.
common_srcs=(common/*.c)
# the harness the targets share (tests/fuzz_common.h); the analysis targets add fuzz_analyze.c
analysis_harness=(tests/fuzz_common.c tests/fuzz_analyze.c)
cjson_flags=($(pkg-config --cflags libcjson 2>/dev/null || echo -I/usr/include/cjson))
analysis_flags=(-Iplan -Ianalyzer "${cjson_flags[@]}")
analysis_libs=($(pkg-config --libs libcjson 2>/dev/null || echo -lcjson) -lz -lm -lpthread)
# Each run's summary (or the crash report) is printed; libFuzzer's progress goes to a log.
run_target() { # name binary corpus seeds max_len rss_mb malloc_mb
  local name=$1 bin=$2 corpus=$3 seeds=$4 max_len=$5 rss=$6 mal=$7 log="$out/fuzz-$1.log" rc=0
  local limit=(-max_total_time="$share")
  if [ -n "${FUZZ_RUNS:-}" ]; then limit=(-runs="$FUZZ_RUNS"); fi
  echo "== fuzz: ${limit[*]} on the $name =="
  # a smaller quarantine than ASan's 256 MB default, so that the RSS limit measures the code
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:quarantine_size_mb=64 \
  UBSAN_OPTIONS=print_stacktrace=1 \
    "$bin" "${limit[@]}" -max_len="$max_len" -timeout=10 -rss_limit_mb="$rss" \
    -malloc_limit_mb="$mal" -print_final_stats=1 -artifact_prefix="$out/artifacts/" \
    "$corpus" "$seeds" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$log" >&2
    echo "fuzz: the $name failed (exit $rc); input in $out/artifacts/" >&2
    exit "$rc"
  fi
  grep -E "^Done |stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb" \
    "$log" || tail -n 3 "$log"
  echo "fuzz: no finding in the $name"
}
echo "== fuzz: building with $cc =="
# The sources every target shares (common/, the planning library, the analyzer, the harness) are
# compiled once, in parallel, into one archive with the sanitizers and libFuzzer's coverage
# instrumentation (fuzzer-no-link); each target's own file is then compiled and linked against it,
# with libFuzzer for the fuzzer and without it for the standalone driver (the ASan runtime takes the
# coverage callbacks). The linker pulls from the archive only what a target uses.
lib_srcs=("${common_srcs[@]}" plan/*.c analyzer/*.c "${analysis_harness[@]}")
objdir="$out/obj"
rm -rf "$objdir"
mkdir -p "$objdir"
jobs=$(nproc 2>/dev/null || echo 2)
cflags_lib=("${flags[@]}" "${analysis_flags[@]}" -fsanitize=fuzzer-no-link,address,undefined)
running=0
for src in "${lib_srcs[@]}"; do
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
  "$cc" "${cflags_lib[@]}" -c "$src" -o "$objdir/$(echo "$src" | tr / _).o" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do wait -n; running=$((running - 1)); done
ar rcs "$out/libfuzzshared.a" "$objdir"/*.o
build_target() { # name: tests/fuzz_<name>.c into fuzz_<name> and fuzz_<name>_driver
  "$cc" "${flags[@]}" "${analysis_flags[@]}" -fsanitize=fuzzer,address,undefined \
    "tests/fuzz_$1.c" "$out/libfuzzshared.a" -o "$out/fuzz_$1" "${analysis_libs[@]}"
  "$cc" "${flags[@]}" "${analysis_flags[@]}" -fsanitize=address,undefined -DPP_FUZZ_STANDALONE \
    "tests/fuzz_$1.c" "$out/libfuzzshared.a" -o "$out/fuzz_$1_driver" "${analysis_libs[@]}"
}
for t in trace dialect kineto costs plan analysis; do
  if [ "$which" = all ] || [ "$which" = "$t" ]; then build_target "$t"; fi
done
if [ "$which" = all ] || [ "$which" = trace ]; then
  "$out/fuzz_trace_driver" --seeds "$out/seeds"
fi
if [ "$which" = all ] || [ "$which" = kineto ]; then
  "$out/fuzz_kineto_driver" --seeds "$out/seeds-kineto" tests/data/kineto/il tests/data/kineto/gp \
    tests/data/kineto/dpv tests/data/kineto/dp tests/data/kineto/ds tests/data/kineto/sm \
    tests/data/kineto/mg tests/data/kineto/mgs tests/data/kineto/pd tests/data/kineto/pdtl \
    tests/data/kineto/chrome tests/data/kineto/jax tests/data/kineto/viztracer \
    tests/data/kineto/pyspy tests/data/kineto/uftrace tests/data/kineto/chromium \
    tests/data/kineto/onnxruntime tests/data/kineto/node
fi
# New inputs go to the corpus folders (kept between runs); the seeds are regenerated / read
# from the tree each time.
if [ "$which" = all ] || [ "$which" = trace ]; then
  run_target "trace reader" "$out/fuzz_trace" "$out/corpus" "$out/seeds" 65536 2048 2048
fi
if [ "$which" = all ] || [ "$which" = dialect ]; then
  run_target "dialect files" "$out/fuzz_dialect" "$out/corpus-dialect" tests/data/fuzz/dialect \
    65536 512 256
fi
if [ "$which" = all ] || [ "$which" = analysis ]; then
  run_target "analysis" "$out/fuzz_analysis" "$out/corpus-analysis" tests/data/fuzz/analysis \
    65536 512 256
fi
if [ "$which" = all ] || [ "$which" = kineto ]; then
  run_target "Kineto importer" "$out/fuzz_kineto" "$out/corpus-kineto" "$out/seeds-kineto" \
    65536 512 256
fi
if [ "$which" = all ] || [ "$which" = costs ]; then
  run_target "cost files" "$out/fuzz_costs" "$out/corpus-costs" tests/data/fuzz/costs \
    65536 512 256
fi
if [ "$which" = all ] || [ "$which" = plan ]; then
  run_target "plan and baseline files" "$out/fuzz_plan" "$out/corpus-plan" tests/data/fuzz/plan \
    65536 512 256
fi
