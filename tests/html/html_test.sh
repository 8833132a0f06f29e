#!/usr/bin/env bash
# html_test.sh BUILD: pprof-report --html opened in a real browser (issue 20). For a pipeline run
# (the golden sim captures onef1b4 and, interleaved, inter2: its chunk rows), the README's main job (captured here, 12 steps) and a plain
# NVTX job without the convention (the analysis fixture plain_nvtx.pft), writes the page, the summary JSON and the Gantt data, has headless
# Chromium build the DOM (--dump-dom) and take a screenshot, then asserts on them: every section
# present, every number marked data-key equal to the summary's field, one Gantt bar per op of the
# Gantt data, a screenshot that is not blank (check_dom.py, png_not_blank.py). Exit 77 (skipped)
# when no Chromium is installed, except under CI=true (scripts/setup.sh installs it there).
set -euo pipefail
build=$(cd "${1:?usage: html_test.sh BUILD}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
  if [ "${CI:-}" = true ]; then echo "html_test: no Chromium (scripts/setup.sh installs it)" >&2; exit 1; fi
  echo "html_test: skipped: no Chromium installed (apt-get install chromium)"
  exit 77
fi
py=${PPROF_PYTHON:-python3}
work=$(mktemp -d /tmp/pp_html.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
# headless Chromium as root needs --no-sandbox; its own profile dir, no first-run noise
chrome() {
  HOME="$work" timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$work/profile" --no-first-run --window-size=1280,2400 "$@" 2>"$work/chrome.err"
}
cp -r "$root/tests/golden/runs/onef1b4" pipe
"$build/tools/pprof-report" pipe -q --html pipe.html --json -o pipe.json --gantt pipe.png \
  --gantt-data pipe.dat
chrome --dump-dom "file://$work/pipe.html" >pipe.dom
ops=$(grep -vc '^#' pipe.dat)
"$py" "$here/check_dom.py" pipe.dom pipe.json --pipeline --ops "$ops"
chrome --screenshot="$work/pipe-shot.png" "file://$work/pipe.html" >/dev/null
"$py" "$here/png_not_blank.py" pipe-shot.png 8
# an interleaved run (2 chunks per stage): each chunk's row, keyed by the JSON's stages[].chunks
cp -r "$root/tests/golden/runs/inter2" inter
"$build/tools/pprof-report" inter -q --html inter.html --json -o inter.json --gantt inter.png \
  --gantt-data inter.dat
chrome --dump-dom "file://$work/inter.html" >inter.dom
"$py" "$here/check_dom.py" inter.dom inter.json --pipeline --ops "$(grep -vc '^#' inter.dat)"
grep -q 'data-key="stages.1.chunks.1.bwd_ms.median"' inter.dom ||
  { echo "html_test: the interleaved run's page has no chunk rows" >&2; exit 1; }
# the README's main job (scripts/demo.sh's command, fewer steps), captured here
"$build/tools/pprof-run" -q -o main -- "$build/tools/pptrain" --model tiny --vocab 4096 --stages 2 \
  --microbatches 8 --schedule 1f1b --steps 12 >main.log 2>&1 || { cat main.log >&2; exit 1; }
"$build/tools/pprof-report" main -q --html main.html --json -o main.json --gantt main.png \
  --gantt-data main.dat
chrome --dump-dom "file://$work/main.html" >main.dom
"$py" "$here/check_dom.py" main.dom main.json --pipeline --ops "$(grep -vc '^#' main.dat)"
grep -q 'pptrain --model tiny --vocab 4096' main.dom || { echo "html_test: no command" >&2; exit 1; }
# pptrain reports its memory (NVTX counters): the page's memory section and its bars
grep -q 'id="memory"' main.dom && grep -q 'id="memory-bars"' main.dom ||
  { echo "html_test: the main job's page has no memory section" >&2; exit 1; }
# pprof-check's comparison page: a 5% slower stage against its baseline (golden runs)
cp -r "$root/tests/golden/runs/onef1b4_slow" slow
rc=0
"$build/tools/pprof-check" -q --baseline pipe slow --html check.html --json -o check.json || rc=$?
[ "$rc" = 1 ] || { echo "html_test: pprof-check exit $rc, 1 expected (a regression)" >&2; exit 1; }
chrome --dump-dom "file://$work/check.html" >check.dom
"$py" "$here/check_dom.py" check.dom check.json --check
# pprof-check --history's page: 8 entries of the run, then 8 of the slower one
for i in $(seq 1 16); do
  r=pipe; [ "$i" -gt 8 ] && r=slow
  "$build/tools/pprof-check" -q --history hist --record "$r" --label "c$i" \
    --time "2026-11-01T00:$(printf %02d "$i"):00Z"
done
rc=0
"$build/tools/pprof-check" -q --history hist --html hist.html --json -o hist.json || rc=$?
[ "$rc" = 1 ] || { echo "html_test: pprof-check --history exit $rc, 1 expected" >&2; exit 1; }
chrome --dump-dom "file://$work/hist.html" >hist.dom
"$py" "$here/check_dom.py" hist.dom hist.json --history
mkdir plain
cp "$root/tests/data/fuzz/analysis/plain_nvtx.pft" plain/
"$build/tools/pprof-report" plain -q --html plain.html --json -o plain.json
chrome --dump-dom "file://$work/plain.html" >plain.dom
"$py" "$here/check_dom.py" plain.dom plain.json --generic
echo "html_test: ok ($browser)"
