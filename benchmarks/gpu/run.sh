#!/usr/bin/env bash
# benchmarks/gpu/run.sh: everything that needs a GPU, in one run that ends within 8 minutes
# whatever a step does (docs/gpu.md says how to run it on the device machine).
#
# On a bare machine (CUDA toolkit, CMake, Python with PyTorch; none of our Debian libraries, no
# package registry) it first unpacks the libraries carried in .gpu-deps/ (benchmarks/gpu/deps.sh
# fetch, run beforehand on Debian) into the build folder. Then, each step under a timeout capped
# by the time left: builds with CUDA; runs the GPU tests (every CUDA kernel against its CPU kernel,
# a block layer, the cuda backend against the cpu one for every schedule, NCCL on one GPU); runs a
# real PyTorch job (benchmarks/gpu/torch_job.py) under pprof-run --cuda and reports the CUPTI
# records captured and the share of GPU time projected onto its ranges; captures pptrain under
# pprof-run --cuda --nccl (records, projection, GPU bubble, the profiler's overhead ratio); runs
# the GPU tests under compute-sanitizer (memcheck, racecheck); trains `small` and `gpt2` with 4
# stages on one GPU in fp32, tf32 and bf16 (step time, tokens/s, MFU).
#
# Output in $OUT (else gpu-report/): report.md (written as it goes), table.md (one row per check,
# rewritten after each), logs.tar.gz (every log, refreshed after each check): at most the 8 files
# the device tool brings back, so whatever ran comes back even if the call is cut short.
# Without a GPU it says "no GPU" after the build and exits 0 (scripts and CI can run it too).
#
# Environment: PP_GPU_DEADLINE_S (default 470: the whole script), BUILD (default build-gpu),
# STEPS_SMALL, STEPS_GPT2, PP_GPU_DEPS (default .gpu-deps), PP_GPU_REPS (runs of each capture
# variant, default 3), PP_GPU_VARIANTS (other capture variants, "name|environment|flags;...");
# PP_GPU_ONLY (some of: tests torch capture sanitizer train; default all); PP_GPU_DRY_RUN=1 goes
# on past "no GPU" (every GPU step then fails fast): how the script itself is tested on a machine
# without one.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUTDIR=${OUT:-$ROOT/gpu-report}
BUILD=${BUILD:-$ROOT/build-gpu}
DEPS=${PP_GPU_DEPS:-$ROOT/.gpu-deps}
DEADLINE_S=${PP_GPU_DEADLINE_S:-470}
STEPS_SMALL=${STEPS_SMALL:-30}
STEPS_GPT2=${STEPS_GPT2:-10}
REPS=${PP_GPU_REPS:-3} # runs of each capture variant
t_start=$(date +%s)
mkdir -p "$OUTDIR" "$BUILD"
LOGS=$BUILD/logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
REPORT=$OUTDIR/report.md
TABLE=$OUTDIR/table.md
: >"$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }
elapsed() { echo $(($(date +%s) - t_start)); }

# ---- the deadline ----------------------------------------------------------------------------
RESERVE_S=8 # kept for the final table
# bounded CAP CMD...: CMD under a timeout of CAP seconds, or of whatever is left before the
# deadline if that is less; 124 when it ran out (or there was no time to start it)
bounded() {
    local cap=$1
    shift
    local left=$((DEADLINE_S - $(elapsed) - RESERVE_S))
    ((cap > left)) && cap=$left
    if ((cap < 2)); then
        echo "run.sh: no time left for: $*" >&2
        return 124
    fi
    timeout -k 3 "$cap" "$@"
}
status_of() { # exit code -> words
    case $1 in
        0) echo "ok" ;;
        124 | 137) echo "TIMED OUT" ;;
        *) echo "FAILED (exit $1)" ;;
    esac
}
# want SECTION: whether to run it (PP_GPU_ONLY: the sections to run, of tests torch capture
# sanitizer train; unset, all of them)
want() { [ -z "${PP_GPU_ONLY:-}" ] || [[ " $PP_GPU_ONLY " == *" $1 "* ]]; }
checks=()
write_table() {
    {
        echo "| check | result | figure |"
        echo "|---|---|---|"
        local c
        for c in "${checks[@]}"; do echo "| $c |"; done
    } >"$TABLE"
}
save_logs() { tar -czf "$OUTDIR/logs.tar.gz.tmp" -C "$LOGS" . 2>/dev/null && mv "$OUTDIR/logs.tar.gz.tmp" "$OUTDIR/logs.tar.gz"; }
# record CHECK RESULT FIGURE: one row of the final table, written out at once
record() {
    checks+=("$1 | $2 | $3")
    write_table
    save_logs
}
finish() {
    trap - EXIT
    say ""
    say "## Checks"
    say ""
    write_table
    tee -a "$REPORT" <"$TABLE"
    say ""
    say "Total time: $(elapsed) s (deadline ${DEADLINE_S} s)"
    save_logs
}
trap finish EXIT
trap 'say "run.sh: stopped by a signal"; exit 143' TERM INT

say "# pipeprof GPU report"
say ""
# the device tool sends the working tree with the history it last saw, so a tree ahead of it shows
# as changed files on top of that commit
changed=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | wc -l)
say "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$([ "$changed" -gt 0 ] && echo " with $changed tracked files changed on top")"
if command -v nvidia-smi >/dev/null 2>&1; then
    say "- GPU: $(timeout 20 nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | head -4 | tr '\n' ';')"
else
    say "- GPU: nvidia-smi not found"
fi
say "- nvcc: $(nvcc --version 2>/dev/null | tail -1), cmake: $(cmake --version 2>/dev/null | head -1), cc: $(cc --version 2>/dev/null | head -1)"
PY=$(command -v python3 || true)
if [ -n "$PY" ]; then
    say "- python: $(timeout 60 "$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"
fi

# ---- carried libraries -----------------------------------------------------------------------
say ""
say "## Build"
cmake_args=()
if [ -d "$DEPS/debs" ]; then
    if bounded 60 bash "$ROOT/benchmarks/gpu/deps.sh" unpack "$DEPS" "$BUILD/deps" >"$LOGS/deps.log" 2>&1 &&
        bounded 30 bash "$ROOT/benchmarks/gpu/deps.sh" check "$BUILD/deps" >>"$LOGS/deps.log" 2>&1; then
        mapfile -t cmake_args < <(bash "$ROOT/benchmarks/gpu/deps.sh" cmake-args "$BUILD/deps")
        n=$(ls "$DEPS/debs" | wc -l)
        say "- carried libraries: $n Debian packages from $DEPS unpacked into $BUILD/deps/prefix"
        record "carried libraries" ok "$n packages, every library resolves in the prefix"
    else
        say "- carried libraries FAILED:"
        tail -5 "$LOGS/deps.log" | tee -a "$REPORT"
        record "carried libraries" FAILED "see deps.log"
        exit 1
    fi
else
    say "- no $DEPS/debs: using the system's libraries"
fi
# Where the loader may not look by itself (the toolkit, NCCL), binaries get an RPATH; NCCL is the
# toolkit's or the system's, else the one PyTorch brought (nvidia/nccl in its site-packages).
cuda_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
pysite=$([ -n "$PY" ] && "$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
rpath=()
[ -d "$BUILD/deps/prefix/lib" ] && rpath+=("$BUILD/deps/prefix/lib")
for d in "$cuda_root/lib64" "$cuda_root/lib" "$cuda_root/targets/x86_64-linux/lib"; do
    [ -d "$d" ] && rpath+=("$(readlink -f "$d")")
done
if ! ls "$cuda_root/include/nccl.h" /usr/include/nccl.h /usr/local/include/nccl.h >/dev/null 2>&1 &&
    [ -d "$pysite/nvidia" ]; then
    h=$(find "$pysite/nvidia" -maxdepth 4 -name nccl.h | head -1)
    l=$(find "$pysite/nvidia" -maxdepth 4 -name 'libnccl.so*' | sort | head -1)
    if [ -n "$h" ] && [ -n "$l" ]; then
        cmake_args+=("-DPP_NCCL_INCLUDE_DIR=$(dirname "$h")" "-DPP_NCCL_LIBRARY=$l")
        rpath+=("$(dirname "$l")")
        say "- NCCL: PyTorch's, $l"
    fi
fi
cmake_args+=("-DCMAKE_BUILD_RPATH=$(printf '%s\n' "${rpath[@]}" | awk '!seen[$0]++' | paste -sd';')")
# CUPTI for pprof-run --cuda: the toolkit's (or PyTorch's) when the loader would not find it
if [ -z "${PPROF_CUPTI_LIB:-}" ] && ! ldconfig -p 2>/dev/null | grep -q "libcupti.so.13"; then
    for c in "$cuda_root/extras/CUPTI/lib64/libcupti.so.13" "$cuda_root/targets/x86_64-linux/lib/libcupti.so.13" \
        "$cuda_root/lib64/libcupti.so.13" "$pysite/nvidia/cu13/lib/libcupti.so.13"; do
        [ -e "$c" ] && export PPROF_CUPTI_LIB=$c && break
    done
fi
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
# a build folder configured by another generator (or none) starts afresh
if [ -f "$BUILD/CMakeCache.txt" ] && ! grep -q "CMAKE_GENERATOR:INTERNAL=${gen[1]:-Unix Makefiles}" "$BUILD/CMakeCache.txt"; then
    rm -f "$BUILD/CMakeCache.txt"
fi
t0=$(date +%s)
bounded 120 cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DPP_BUILD_BENCHMARKS=OFF \
    "${cmake_args[@]}" >"$LOGS/cmake.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    say "configure $(status_of $rc):"
    tail -15 "$LOGS/cmake.log" | tee -a "$REPORT"
    record "configure" "$(status_of $rc)" "see cmake.log"
    exit 1
fi
grep -E "pipeprof: (CUDA|NCCL|MPI|CUPTI|NVTX)" "$LOGS/cmake.log" | sed 's/^-- /- /' | tee -a "$REPORT"
targets=(test_cuda pptrain pprof-run pprof-report pprof)
bounded 300 cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" >"$LOGS/build.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    say "build $(status_of $rc):"
    grep -E "error|Error" "$LOGS/build.log" | head -15 | tee -a "$REPORT"
    record "build" "$(status_of $rc)" "see build.log"
    exit 1
fi
missing=$(for b in tests/test_cuda tools/pptrain tools/pprof-run profiler/libpprof.so; do ldd "$BUILD/$b"; done 2>&1 | grep -c "not found")
say "- configured and built in $(($(date +%s) - t0)) s; libraries not found at load: $missing"
record "configure + build" "$([ "$missing" = 0 ] && echo ok || echo "FAILED ($missing libraries not found)")" "$(($(date +%s) - t0)) s"
PPTRAIN=$BUILD/tools/pptrain
PPRUN=$BUILD/tools/pprof-run
PPREPORT=$BUILD/tools/pprof-report

# ---- GPU tests -------------------------------------------------------------------------------
if want tests; then
say ""
say "## GPU tests (tests/test_cuda.c)"
bounded 150 "$BUILD/tests/test_cuda" --verbose --jobs 1 >"$LOGS/test_cuda.log" 2>&1
rc=$?
if [ $rc -eq 77 ]; then
    say "- skipped: $(head -1 "$LOGS/test_cuda.log")"
    say ""
    record "GPU tests" "no GPU" "$(head -1 "$LOGS/test_cuda.log" | cut -c1-80)"
    if [ "${PP_GPU_DRY_RUN:-0}" != 1 ]; then
        say "No GPU: nothing more to measure."
        exit 0
    fi
    # the script's own test: every later step runs and fails fast, the report and table still form
    say "No GPU; PP_GPU_DRY_RUN=1: running the remaining steps anyway."
fi
[ $rc -ne 77 ] && say "- $(status_of $rc)"
synth=$(grep -E "Synthesis" "$LOGS/test_cuda.log" | sed 's/^\[====\] //')
say "- $synth"
say ""
say "Kernel errors against the CPU kernels (max |gpu - cpu| / max(1, |cpu|)):"
say ""
say '```'
grep -E "max error" "$LOGS/test_cuda.log" | sed 's/^\[----\] *//' | tee -a "$REPORT"
say '```'
say ""
say "Pipelines, cuda backend against cpu (4 stages on one GPU, 3 steps):"
say ""
say '```'
grep -E "step [0-9] (loss|grad_norm): cpu" "$LOGS/test_cuda.log" | sed 's/^\[----\] *//' | tee -a "$REPORT"
grep -E "NCCL self" "$LOGS/test_cuda.log" | sed 's/^\[----\] *//' | tee -a "$REPORT"
grep -E "^\[FAIL\]" "$LOGS/test_cuda.log" | tee -a "$REPORT"
say '```'
[ $rc -ne 77 ] && record "GPU tests (test_cuda)" "$([ $rc -eq 0 ] && echo passed || status_of $rc)" "${synth:-no synthesis line}"
worst=$(grep -E "max error" "$LOGS/test_cuda.log" | grep -oE "max error [0-9.eE+-]+" | awk '{ if ($3 + 0 > m) m = $3 + 0 } END { if (NR) printf "%.3g", m; else print "?" }')
record "kernel error vs CPU, worst" "$([ "$worst" != "?" ] && echo measured || echo missing)" "$worst"
nccl=$(grep -oE "NCCL self send/receive of 64 MiB: [0-9.]+ GB/s" "$LOGS/test_cuda.log" | grep -oE "[0-9.]+ GB/s")
record "NCCL self send/receive" "$([ -n "$nccl" ] && echo ok || echo "not run")" "${nccl:--}"
# bf16 the other way (docs/kernels.md): our kernels convert the operands first (PP_CUDA_BF16=convert)
PP_CUDA_BF16=convert bounded 60 "$BUILD/tests/test_cuda" --verbose --jobs 1 --filter 'cuda/gemm_kernels_bf16' \
    >"$LOGS/test_cuda_bf16_convert.log" 2>&1
rc=$?
conv_worst=$(grep -oE "max error [0-9.eE+-]+" "$LOGS/test_cuda_bf16_convert.log" | awk '{ if ($3 + 0 > m) m = $3 + 0 } END { if (NR) printf "%.3g", m; else print "?" }')
say "- bf16 GEMMs with PP_CUDA_BF16=convert: $(status_of $rc), worst error $conv_worst (tolerance 3e-2)"
record "bf16 GEMMs, PP_CUDA_BF16=convert" "$([ $rc -eq 0 ] && echo passed || status_of $rc)" "worst error $conv_worst"

say ""
say "- CUPTI for --cuda: ${PPROF_CUPTI_LIB:-libcupti.so.13, found by the loader}"

fi # want tests

# ---- a real PyTorch job under pprof-run --cuda -----------------------------------------------
# gpu_summary JSON: records, projection share, per-stage GPU fwd/bwd, from pprof-report --json
gpu_summary() {
    "$PY" - "$1" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no summary ({e})"); sys.exit(0)
g = d.get("gpu")
if not g:
    print("no GPU records in the capture"); sys.exit(0)
ratio = 100 * g["projected_ms"] / g["work_ms"] if g.get("work_ms") else float("nan")
st = "; ".join(f"stage {i}: fwd {s.get('fwd_ms', 0):.3f} bwd {s.get('bwd_ms', 0):.3f} ms" for i, s in enumerate(g.get("stages", [])))
print(f"{g['records']} records, {g['projected']} projected ({g.get('adopted', 0)} adopted from threads outside the ranges), {g['unattributed']} unattributed; "
      f"{ratio:.1f}% of GPU work projected ({g['projected_ms']:.3f} of {g['work_ms']:.3f} ms per step); {st}")
PY
}
# gpu_verdict JSON: "ok" when every stage has GPU forward and backward time, else what lacks it
gpu_verdict() {
    "$PY" - "$1" <<'PY'
import json, sys
try:
    g = json.load(open(sys.argv[1])).get("gpu") or {}
except Exception:
    g = {}
st = g.get("stages") or []
bad = [f"stage {i} {k}" for i, s in enumerate(st) for k in ("fwd_ms", "bwd_ms") if not s.get(k)]
print("no GPU stages" if not st else ("ok" if not bad else "NO GPU TIME: " + ", ".join(bad)))
PY
}
if want torch; then
say ""
say "## PyTorch job under pprof-run --cuda (benchmarks/gpu/torch_job.py, 2 stages, GPipe)"
site=$BUILD/pysite
if [ -n "$PY" ] && ! "$PY" -c "import nvtx" 2>/dev/null && ls "$DEPS"/wheels/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$DEPS"/wheels/*.whl >"$LOGS/pip.log" 2>&1
fi
if [ -z "$PY" ]; then
    record "PyTorch job" "not run" "no python3"
else
    rm -rf "$BUILD/torch-run"
    torch_small=()
    [ "${PP_GPU_DRY_RUN:-0}" = 1 ] && torch_small=(--hidden 256 --batch 64) # on a CPU
    PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 bounded 120 "$PPRUN" --cuda -q -o "$BUILD/torch-run" -- \
        "$PY" "$ROOT/benchmarks/gpu/torch_job.py" --steps 8 "${torch_small[@]}" >"$LOGS/torch-job.txt" 2>&1
    rc=$?
    tail -3 "$LOGS/torch-job.txt" | tee -a "$REPORT"
    "$PPREPORT" "$BUILD/torch-run" >"$LOGS/torch-report.txt" 2>&1
    "$PPREPORT" "$BUILD/torch-run" --json -o "$LOGS/torch-report.json" >/dev/null 2>&1
    sed -n '/^GPU time/,/^$/p' "$LOGS/torch-report.txt" | tee -a "$REPORT"
    fig=$(gpu_summary "$LOGS/torch-report.json")
    say "- $fig"
    verdict=$(gpu_verdict "$LOGS/torch-report.json")
    record "PyTorch job under pprof-run --cuda" "$([ $rc -eq 0 ] && echo "$verdict" || status_of $rc)" "$fig"
fi

fi # want torch

# ---- pptrain under pprof-run --cuda --nccl ---------------------------------------------------
median_ms() { # median step time of the steps after the first two (cuBLAS and the allocator warm up)
    awk -F'"step_ms": ' 'NR > 2 { split($2, a, ","); print a[1] }' "$1" 2>/dev/null | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
if want capture; then
say ""
say "## GPU capture: pptrain under pprof-run --cuda --nccl, small, 4 stages on one GPU (tf32)"
say ""
cap_args=(--backend cuda --model small --stages 4 --schedule 1f1b --microbatches 8 --batch 32
    --steps "$STEPS_SMALL" --precision tf32)
# The same run without the profiler, under NVTX capture alone and under GPU capture with the
# settings that decide its cost (docs/profiler.md "GPU"), alternated to share the machine's drift;
# the least disturbed (lowest) median of each. Each variant: name|environment|pprof-run flags
# (the flags "-" for no pprof-run at all).
variants=(
    "plain||-"
    "nvtx||"
    "captured|PPROF_CUPTI_STATS=1|--cuda --nccl"
    "captured-all|PPROF_CUPTI_STATS=1 PPROF_CUPTI_API=all|--cuda --nccl"
    "captured-sync|PPROF_CUPTI_STATS=1 PPROF_CUPTI_KINDS=kernel,memcpy,memset,runtime,driver,sync,memory|--cuda --nccl"
    "captured-kernels|PPROF_CUPTI_STATS=1 PPROF_CUPTI_KINDS=kernel|--cuda --nccl"
    "captured-ring|PPROF_CUPTI_STATS=1 PPROF_CUPTI_DEFER_MB=0|--cuda --nccl"
)
# PP_GPU_VARIANTS: another list, the variants separated by ";" (plain and nvtx kept first)
if [ -n "${PP_GPU_VARIANTS:-}" ]; then
    IFS=';' read -ra extra <<<"$PP_GPU_VARIANTS"
    variants=("plain||-" "nvtx||" "${extra[@]}")
fi
for rep in $(seq "$REPS"); do
    for v in "${variants[@]}"; do
        IFS='|' read -r name envs flags <<<"$v"
        read -ra env_list <<<"$envs"
        read -ra flag_list <<<"$flags"
        rm -rf "$BUILD/$name-run"
        if [ "$flags" = "-" ]; then
            bounded 45 "$PPTRAIN" "${cap_args[@]}" -q --log-json "$LOGS/$name-$rep.jsonl" >"$LOGS/$name-$rep.txt" 2>&1
        else
            bounded 60 env "${env_list[@]}" "$PPRUN" "${flag_list[@]}" -q -o "$BUILD/$name-run" -- \
                "$PPTRAIN" "${cap_args[@]}" -q --log-json "$LOGS/$name-$rep.jsonl" >"$LOGS/$name-$rep.txt" 2>&1
        fi
    done
done
least() { for f in "$@"; do median_ms "$f"; done | grep -E '^[0-9.]+$' | sort -g | head -1; }
ratio_of() { # ratio_of CAPTURED PLAIN
    if [[ $1 =~ ^[0-9.]+$ && $2 =~ ^[0-9.]+$ ]]; then
        awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.4f (%+.2f%%)", a / b, 100 * (a / b - 1); else print "?" }'
    else
        echo "?"
    fi
}
plain=$(least "$LOGS"/plain-*.jsonl)
nvtx=$(least "$LOGS"/nvtx-*.jsonl)
captured=$(least "$LOGS"/captured-[0-9].jsonl)
captured_all=$(least "$LOGS"/captured-all-[0-9].jsonl)
ratio=$(ratio_of "$captured" "$plain")
all_ratio=$(ratio_of "$captured_all" "$plain")
nvtx_ratio=$(ratio_of "$nvtx" "$plain")
say "- median step (least of $REPS runs each): $plain ms without the profiler, $nvtx ms under pprof-run (NVTX only): ratio $nvtx_ratio; $captured ms under pprof-run --cuda --nccl: ratio $ratio; $captured_all ms with every API call recorded (PPROF_CUPTI_API=all): ratio $all_ratio"
say ""
say "What the GPU capture's settings cost (least median of $REPS runs; every median; the capture's own account, PPROF_CUPTI_STATS=1, of its last run):"
say ""
say "| variant | environment | flags | least median ms | ratio | medians ms | events dropped | CUPTI stats |"
say "|---|---|---|---|---|---|---|---|"
for v in "${variants[@]}"; do
    IFS='|' read -r name envs flags <<<"$v"
    meds=$(for rep in $(seq "$REPS"); do median_ms "$LOGS/$name-$rep.jsonl"; done | paste -sd' ')
    best=$(least "$LOGS/$name"-[0-9].jsonl)
    st=$(grep -h "CUPTI stats" "$LOGS/$name"-[0-9].txt 2>/dev/null | tail -1 | sed 's/^pprof: CUPTI stats: //')
    lost=$(cat "$LOGS/$name"-[0-9].txt 2>/dev/null | grep -oE "[0-9]+ events dropped" | awk '{ s += $1 } END { print s + 0 }')
    say "| $name | ${envs:--} | ${flags} | ${best:-?} | $(ratio_of "$best" "$plain") | $meds | $lost | ${st:--} |"
done
say ""
"$PPREPORT" "$BUILD/captured-all-run" --json -o "$LOGS/capture-all-report.json" >/dev/null 2>&1
say "- with every API call recorded: $([ -n "$PY" ] && gpu_summary "$LOGS/capture-all-report.json")"
dropped=$(grep -oE "[0-9]+ events dropped" "$LOGS"/captured-[0-9].txt | awk '{ s += $1 } END { print s + 0 }')
say "- events dropped by the capture over the $REPS GPU captures: $dropped"
"$PPREPORT" "$BUILD/captured-run" >"$LOGS/capture-report.txt" 2>&1
"$PPREPORT" "$BUILD/captured-run" --json -o "$LOGS/capture-report.json" >/dev/null 2>&1
say ""
say '```'
sed -n '/^GPU time/,/^$/p' "$LOGS/capture-report.txt" | tee -a "$REPORT"
grep -E "^(pipeline|step time|bubble):" "$LOGS/capture-report.txt" | tee -a "$REPORT"
say '```'
fig=$([ -n "$PY" ] && gpu_summary "$LOGS/capture-report.json")
say "- $fig"
record "pptrain capture (--cuda --nccl)" "$([ -s "$LOGS/capture-report.json" ] && gpu_verdict "$LOGS/capture-report.json" || echo FAILED)" "$fig"
record "profiler overhead, NVTX only (median step ratio)" "$([ "$nvtx_ratio" != "?" ] && echo measured || echo missing)" "$nvtx_ratio"
record "profiler overhead, --cuda --nccl (median step ratio)" "$([ "$ratio" != "?" ] && echo measured || echo missing)" "$ratio"
record "profiler overhead, --cuda --nccl, every API call" "$([ "$all_ratio" != "?" ] && echo measured || echo missing)" "$all_ratio"
record "GPU capture: events dropped" "$([ -z "$captured" ] && echo missing || { [ "$dropped" = 0 ] && echo ok || echo LOST; })" "$dropped in $REPS captures"

fi # want capture

# ---- compute-sanitizer -----------------------------------------------------------------------
if want sanitizer; then
say ""
say "## compute-sanitizer on the GPU tests"
CS=$(command -v compute-sanitizer || ls "$cuda_root"/bin/compute-sanitizer 2>/dev/null || true)
if [ -z "$CS" ]; then
    say "- compute-sanitizer not found"
    record "compute-sanitizer" "not run" "not found"
else
    cs_flags=(--error-exitcode 9)
    "$CS" --help 2>/dev/null | grep -q -- "--target-processes" && cs_flags+=(--target-processes all)
    # kernels (elementwise, GEMMs, a block layer) and one pipeline: the whole suite is too slow here
    for tool in memcheck racecheck; do
        filter='cuda/[eag]*'
        [ $tool = racecheck ] && filter='cuda/[ea]*'
        cap=110
        [ $tool = racecheck ] && cap=70
        bounded $cap "$CS" --tool $tool "${cs_flags[@]}" "$BUILD/tests/test_cuda" --jobs 1 --filter "$filter" \
            >"$LOGS/sanitizer-$tool.log" 2>&1
        rc=$?
        sumline=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$LOGS/sanitizer-$tool.log" | sort | uniq -c | head -3 | tr -s ' ' | tr '\n' ';')
        synth=$(grep -E "Synthesis" "$LOGS/sanitizer-$tool.log" | sed 's/^\[====\] //' | tail -1)
        say "- $tool ($filter): $(status_of $rc); ${sumline:-no summary line}; ${synth:-}"
        record "compute-sanitizer $tool" "$([ $rc -eq 0 ] && echo clean || status_of $rc)" "${sumline:-$synth}"
    done
fi

fi # want sanitizer

# ---- training throughput ---------------------------------------------------------------------
if want train; then
say ""
say "## Training, 4 stages on one GPU (1F1B, one CUDA stream per stage)"
say ""
say "| model | precision | batch x T | M | median step ms | tokens/s | model TFLOP/s | MFU |"
say "|---|---|---|---|---|---|---|---|"
best_mfu=""
train() { # model batch M steps precision (train_tag: a suffix for the variant)
    local model=$1 batch=$2 M=$3 steps=$4 prec=$5 label=$5${train_tag:-} tag=$1-$5${train_tag:-}
    local log=$LOGS/train-$tag.jsonl out=$LOGS/train-$tag.txt
    bounded 40 "$PPTRAIN" --backend cuda --model "$model" --stages 4 --schedule 1f1b \
        --microbatches "$M" --batch "$batch" --steps "$steps" --precision "$prec" \
        --log-json "$log" >"$out" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
        say "| $model | $label | $batch | $M | $(status_of $rc): $(tail -1 "$out" | cut -c1-60) | | | |"
        return
    fi
    local T gf peak ms tps tflops mfu
    T=$(awk '/^model:/ { for (i = 1; i <= NF; i++) if ($i ~ /^T=/) { sub("T=", "", $i); print $i } }' "$out")
    gf=$(sed -n 's/.*; \([0-9.e+]*\) GFLOP\/token.*/\1/p' "$out")
    peak=$(sed -n 's/.* x \([0-9.]*\) TFLOP\/s peak.*/\1/p' "$out")
    ms=$(median_ms "$log")
    tps=$(awk -v b="$batch" -v t="$T" -v ms="$ms" 'BEGIN { if (ms > 0) printf "%.0f", b * t / (ms / 1000); else print "?" }')
    tflops=$(awk -v tps="$tps" -v gf="$gf" 'BEGIN { printf "%.1f", tps * gf / 1000 }')
    mfu=$(awk -v tf="$tflops" -v p="$peak" 'BEGIN { if (p > 0) printf "%.1f%%", 100 * tf / p; else print "?" }')
    say "| $model | $label | $batch x $T | $M | $ms | $tps | $tflops | $mfu |"
    record "train $model $label" ok "$ms ms/step, $tps tokens/s, MFU $mfu"
}
for prec in bf16 tf32 fp32; do train small 32 8 "$STEPS_SMALL" "$prec"; done
for prec in bf16 tf32 fp32; do train gpt2 16 8 "$STEPS_GPT2" "$prec"; done
# bf16 the other way (docs/kernels.md): our kernels convert the operands first
export PP_CUDA_BF16=convert
train_tag=-convert
train small 32 8 "$STEPS_SMALL" bf16
train gpt2 16 8 "$STEPS_GPT2" bf16
unset PP_CUDA_BF16 train_tag
say ""
say "Peak rates and the loss at the end of each run:"
say ""
say '```'
for f in "$LOGS"/train-*.txt; do
    [ -e "$f" ] || continue
    echo "$(basename "$f" .txt): $(grep -E '^gpu:' "$f" | sed 's/.*; //') | $(grep -E '^done:' "$f" | sed 's/.*final loss/final loss/')"
done | tee -a "$REPORT"
say '```'
fi # want train
