#!/usr/bin/env bash
# benchmarks/gpu/run.sh: everything that needs a GPU, in one run (about 5 minutes on one H200,
# under 8): builds with CUDA, runs the GPU tests (every CUDA kernel against its CPU kernel, a
# block layer, the cuda backend against the cpu one for every schedule, NCCL on one GPU), trains
# `small` and `gpt2` (GPT-2 small's shape) with 4 stages on one GPU in fp32, tf32 and bf16, and
# writes a short report: kernel errors, equivalence, step time, tokens/s, MFU
# (docs/metrics.md "Model FLOPs and MFU"); then runs `small` under pprof-run --cuda --nccl and
# reports the GPU records captured, the projected per-stage GPU times, the GPU bubble, and the
# profiler's overhead as the ratio of median step times with and without it.
#
# usage: bash benchmarks/gpu/run.sh            (report in $OUT/report.md, else gpu-report/)
# Without a GPU it says so and exits 0 after the build, so CI can run it too.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUTDIR=${OUT:-$ROOT/gpu-report}
BUILD=${BUILD:-$ROOT/build-gpu}
STEPS_SMALL=${STEPS_SMALL:-40}
STEPS_GPT2=${STEPS_GPT2:-12}
mkdir -p "$OUTDIR"
REPORT=$OUTDIR/report.md
: > "$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }
t_start=$(date +%s)

say "# pipeprof GPU report"
say ""
say "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
if command -v nvidia-smi >/dev/null 2>&1; then
    say "- GPU: $(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader 2>&1 | head -4 | tr '\n' ';')"
else
    say "- GPU: nvidia-smi not found"
fi
say "- nvcc: $(nvcc --version 2>/dev/null | tail -1)"

# ---- build -----------------------------------------------------------------------------------
say ""
say "## Build"
if ! cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$OUTDIR/cmake.log" 2>&1; then
    say "configure FAILED (see cmake.log)"
    exit 1
fi
grep -E "pipeprof: (CUDA|NCCL|MPI)" "$OUTDIR/cmake.log" | sed 's/^-- /- /' | tee -a "$REPORT"
if ! cmake --build "$BUILD" -j"$(nproc)" >"$OUTDIR/build.log" 2>&1; then
    say "build FAILED (see build.log)"
    tail -30 "$OUTDIR/build.log"
    exit 1
fi
say "- built in $(( $(date +%s) - t_start )) s"
PPTRAIN=$BUILD/tools/pptrain

# ---- GPU tests -------------------------------------------------------------------------------
say ""
say "## GPU tests (tests/test_cuda.c)"
timeout 300 "$BUILD/tests/test_cuda" --verbose --jobs 1 >"$OUTDIR/test_cuda.log" 2>&1
rc=$?
if [ $rc -eq 77 ]; then
    say "- skipped: $(head -1 "$OUTDIR/test_cuda.log")"
    say ""
    say "No GPU: nothing more to measure."
    exit 0
fi
say "- exit code $rc ($( [ $rc -eq 0 ] && echo passed || echo FAILED ))"
grep -E "Synthesis" "$OUTDIR/test_cuda.log" | sed 's/^\[====\] /- /' | tee -a "$REPORT"
say ""
say "Kernel errors against the CPU kernels (max |gpu - cpu| / max(1, |cpu|)):"
say ""
say '```'
grep -E "max error" "$OUTDIR/test_cuda.log" | sed 's/^\[----\] *//' | tee -a "$REPORT"
say '```'
say ""
say "Pipelines, cuda backend against cpu (4 stages on one GPU, 3 steps):"
say ""
say '```'
grep -E "step [0-9] (loss|grad_norm): cpu" "$OUTDIR/test_cuda.log" | sed 's/^\[----\] *//' | tee -a "$REPORT"
grep -E "NCCL self" "$OUTDIR/test_cuda.log" | sed 's/^\[----\] *//' | tee -a "$REPORT"
grep -E "^\[FAIL\]" "$OUTDIR/test_cuda.log" | tee -a "$REPORT"
say '```'

# ---- training throughput ---------------------------------------------------------------------
# median step time of the steps after the first two (cuBLAS and the allocator warm up)
median_ms() {
    awk -F'"step_ms": ' 'NR > 2 { split($2, a, ","); print a[1] }' "$1" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

say ""
say "## Training, 4 stages on one GPU (1F1B, one CUDA stream per stage)"
say ""
say "| model | precision | batch x T | M | median step ms | tokens/s | model TFLOP/s | MFU |"
say "|---|---|---|---|---|---|---|---|"
train() { # model batch M steps precision
    local model=$1 batch=$2 M=$3 steps=$4 prec=$5 tag=$1-$5
    local log=$OUTDIR/train-$tag.jsonl out=$OUTDIR/train-$tag.txt
    timeout 240 "$PPTRAIN" --backend cuda --model "$model" --stages 4 --schedule 1f1b \
        --microbatches "$M" --batch "$batch" --steps "$steps" --precision "$prec" \
        --log-json "$log" >"$out" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
        say "| $model | $prec | $batch | $M | FAILED (exit $rc: $(tail -1 "$out")) | | | |"
        return
    fi
    local T gf peak ms tps tflops mfu
    T=$(awk '/^model:/ { for (i = 1; i <= NF; i++) if ($i ~ /^T=/) { sub("T=", "", $i); print $i } }' "$out")
    gf=$(sed -n 's/.*; \([0-9.e+]*\) GFLOP\/token.*/\1/p' "$out")
    peak=$(sed -n 's/.* x \([0-9.]*\) TFLOP\/s peak.*/\1/p' "$out")
    ms=$(median_ms "$log")
    tps=$(awk -v b="$batch" -v t="$T" -v ms="$ms" 'BEGIN { printf "%.0f", b * t / (ms / 1000) }')
    tflops=$(awk -v tps="$tps" -v gf="$gf" 'BEGIN { printf "%.1f", tps * gf / 1000 }')
    mfu=$(awk -v tf="$tflops" -v p="$peak" 'BEGIN { if (p > 0) printf "%.1f%%", 100 * tf / p; else print "?" }')
    say "| $model | $prec | $batch x $T | $M | $ms | $tps | $tflops | $mfu |"
    grep -E "^done:" "$out" >>"$OUTDIR/train-summaries.txt"
}
for prec in fp32 tf32 bf16; do train small 32 8 "$STEPS_SMALL" "$prec"; done
for prec in fp32 tf32 bf16; do train gpt2 16 8 "$STEPS_GPT2" "$prec"; done
say ""
say "Peak rates and the loss at the end of each run:"
say ""
say '```'
for f in "$OUTDIR"/train-*.txt; do
    echo "$(basename "$f" .txt): $(grep -E '^gpu:' "$f" | sed 's/.*; //') | $(grep -E '^done:' "$f" | sed 's/.*final loss/final loss/')"
done | tee -a "$REPORT"
say '```'
# ---- GPU capture (issue 10): small, 4 stages, under pprof-run --cuda --nccl -----------------
say ""
say "## GPU capture: pprof-run --cuda --nccl, small, 4 stages on one GPU (tf32)"
say ""
PPRUN=$BUILD/tools/pprof-run
PPREPORT=$BUILD/tools/pprof-report
cap_args=(--backend cuda --model small --stages 4 --schedule 1f1b --microbatches 8 --batch 32
          --steps "$STEPS_SMALL" --precision tf32)
# the same run with and without the profiler, alternated to share the machine's drift
for rep in 1 2; do
    timeout 240 "$PPTRAIN" "${cap_args[@]}" -q --log-json "$OUTDIR/plain-$rep.jsonl" \
        >"$OUTDIR/plain-$rep.txt" 2>&1
    rm -rf "$OUTDIR/capture-run"
    timeout 300 "$PPRUN" --cuda --nccl -q -o "$OUTDIR/capture-run" -- "$PPTRAIN" "${cap_args[@]}" \
        -q --log-json "$OUTDIR/captured-$rep.jsonl" >"$OUTDIR/captured-$rep.txt" 2>&1
done
plain=$( (median_ms "$OUTDIR/plain-1.jsonl"; median_ms "$OUTDIR/plain-2.jsonl") | sort -g | head -1)
captured=$( (median_ms "$OUTDIR/captured-1.jsonl"; median_ms "$OUTDIR/captured-2.jsonl") | sort -g | head -1)
say "- median step: $plain ms without the profiler, $captured ms under pprof-run --cuda --nccl:" \
    "overhead ratio $(awk -v a="$captured" -v b="$plain" 'BEGIN { printf "%.4f (%+.2f%%)", a / b, 100 * (a / b - 1) }')"
"$PPREPORT" "$OUTDIR/capture-run" >"$OUTDIR/capture-report.txt" 2>&1
"$PPREPORT" "$OUTDIR/capture-run" --json -o "$OUTDIR/capture-report.json" >/dev/null 2>&1
say ""
say '```'
sed -n '/^GPU time/,/^$/p' "$OUTDIR/capture-report.txt" | tee -a "$REPORT"
grep -E "^(pipeline|step time|bubble):" "$OUTDIR/capture-report.txt" | tee -a "$REPORT"
say '```'
if command -v python3 >/dev/null 2>&1 && [ -s "$OUTDIR/capture-report.json" ]; then
    python3 - "$OUTDIR/capture-report.json" <<'PY' | tee -a "$REPORT"
import json, sys
g = json.load(open(sys.argv[1])).get("gpu")
if not g:
    print("- no GPU records in the capture")
else:
    fb = sum(s["fwd_ms"] + s["bwd_ms"] for s in g["stages"])
    print(f"- records {g['records']}, projected {g['projected']}, unattributed {g['unattributed']}")
    ratio = g["projected_ms"] / g["work_ms"] if g["work_ms"] else float("nan")
    print(f"- projected stage time {g['projected_ms']:.3f} ms of {g['work_ms']:.3f} ms GPU work per step: "
          f"{100 * ratio:.1f}% (the issue's bar: within 5%)")
PY
fi

say ""
say "Total time: $(( $(date +%s) - t_start )) s"
