#!/usr/bin/env bash
# progress_test.sh BUILD: the progress line of long work (tools/tool.c, pp_tool_progress_*):
# never on a stderr that is not a terminal, unless PPROF_PROGRESS=always; then it names the work
# and ends its line; stdout never changes; PPROF_PROGRESS=never keeps it off. (On a terminal the
# line is erased instead of ended: not tested, a pty's last output is lost too often when the
# child exits at once.)
set -euo pipefail
build=$(cd "${1:?usage: progress_test.sh BUILD}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/pp_progress.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
cp -r "$root/tests/golden/runs/onef1b4" run
rep="$build/tools/pprof-report"
fail() { echo "progress_test: FAILED: $*" >&2; exit 1; }
"$rep" run >plain.out 2>plain.err
grep -q $'\r' plain.err && fail "a progress line on a stderr that is no terminal"
PPROF_PROGRESS=always "$rep" run >always.out 2>always.err
cmp -s plain.out always.out || fail "the progress line changed stdout"
grep -q $'^\rpprof-report: analysing run: ' always.err || fail "no progress line with =always: $(cat -A always.err | head -3)"
[ "$(tail -c 1 always.err | od -An -c | tr -d ' ')" = '\n' ] || fail "=always does not end its line"
PPROF_PROGRESS=never "$rep" run >/dev/null 2>never.err
grep -q $'\r' never.err && fail "a progress line with =never"
PPROF_PROGRESS=always "$rep" -q run >/dev/null 2>quiet.err
grep -q $'\r' quiet.err || fail "=always must show it even with -q (it is for tests)"
echo "progress_test: ok"
