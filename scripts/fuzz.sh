#!/usr/bin/env bash
# fuzz.sh: fuzzes the .pft trace reader (common/trace.c) with libFuzzer for a bounded time.
# Builds tests/fuzz_trace.c with clang (ASan + UBSan) into build-fuzz/, writes valid seed traces,
# then runs. Usage: scripts/fuzz.sh [seconds=30]. Called by scripts/test.sh; exits non-zero on a
# crash, leaving the input that caused it in build-fuzz/artifacts/ (replay it with
# build-fuzz/fuzz_trace_driver FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
out=build-fuzz
cc=${CLANG:-clang}
if ! command -v "$cc" >/dev/null; then
  echo "fuzz: $cc not found (scripts/setup.sh installs it)" >&2
  exit 3
fi
mkdir -p "$out/corpus" "$out/seeds" "$out/artifacts"
srcs=(common/common.c common/rng.c common/crc32c.c common/trace.c tests/fuzz_trace.c)
flags=(-std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -Icommon -Wall -Wextra -Werror
       -fno-omit-frame-pointer -fno-sanitize-recover=all)
echo "== fuzz: building with $cc =="
"$cc" "${flags[@]}" -fsanitize=fuzzer,address,undefined "${srcs[@]}" -o "$out/fuzz_trace" -lm -lpthread
"$cc" "${flags[@]}" -fsanitize=address,undefined -DPP_FUZZ_STANDALONE "${srcs[@]}" \
  -o "$out/fuzz_trace_driver" -lm -lpthread
"$out/fuzz_trace_driver" --seeds "$out/seeds"
echo "== fuzz: ${secs}s on the trace reader =="
# New inputs go to corpus/ (kept between runs); seeds/ is regenerated each time.
# libFuzzer's progress lines go to a log; the summary (or the crash report) is printed.
log="$out/fuzz.log"
rc=0
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$out/fuzz_trace" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$out/artifacts/" "$out/corpus" "$out/seeds" \
  >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
  tail -n 60 "$log" >&2
  echo "fuzz: the trace reader failed (exit $rc); input in $out/artifacts/" >&2
  exit "$rc"
fi
grep -E "^Done |stat::number_of_executed_units|stat::peak_rss_mb" "$log" || tail -n 3 "$log"
echo "fuzz: no crash in ${secs}s"
