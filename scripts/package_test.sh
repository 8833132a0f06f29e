#!/usr/bin/env bash
# package_test.sh: builds the Debian package and checks it the way a user gets it (issue 20).
# Builds build-pkg/ without the CUDA parts (the package must not need a CUDA toolkit), runs
# `cpack -G DEB`, checks the package's metadata and that apt can resolve its dependencies on this
# machine (`apt-get install --simulate`), then unpacks it into an empty prefix and, from the
# installed paths only (a scratch working directory, no build tree on PATH, no PPROF_LIB), runs
# every tool's --version, `pprof-run -- pptrain ...`, `pprof-report` (table, JSON, Gantt chart, HTML),
# `pprof-tune` on the run, and `man` on every page. With PPROF_PACKAGE_INSTALL=1 (CI sets it when
# it runs as root) it also installs the package with apt-get, runs the tools from /usr/bin and
# purges it again.
# Usage: scripts/package_test.sh [build-dir=build-pkg]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-build-pkg}
jobs=$(nproc)
say() { echo "package_test: $*"; }
fail() { echo "package_test: FAILED: $*" >&2; exit 1; }

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPP_WERROR=ON -DPP_WITH_CUDA=OFF \
  -DPP_BUILD_TESTS=OFF -DPP_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build" -j"$jobs" >/dev/null
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
[ -n "$version" ] || fail "no project version in $build/CMakeCache.txt"
rm -f "$build"/pipeprof_*.deb
(cd "$build" && cpack -G DEB >/dev/null)
deb="$build/pipeprof_${version}_amd64.deb"
[ -f "$deb" ] || fail "cpack wrote no $deb"
say "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

# metadata: the libraries dpkg-shlibdeps found, and gnuplot
depends=$(dpkg-deb -f "$deb" Depends)
say "Depends: $depends"
for want in libopenblas libcjson gnuplot libc6; do
  case "$depends" in *"$want"*) ;; *) fail "Depends lacks $want" ;; esac
done
case "$depends" in *cuda*|*cublas*|*nccl*) fail "Depends names a CUDA library: $depends" ;; esac
files=$(dpkg-deb -c "$deb" | awk '{print $6}')
for want in ./usr/bin/pprof-run ./usr/bin/pprof-report ./usr/bin/pprof-tune ./usr/bin/pprof-check \
            ./usr/bin/pptrain ./usr/lib/pipeprof/libpprof.so ./usr/share/man/man1/pprof-tune.1 \
            ./usr/share/doc/pipeprof/README.md ./usr/share/doc/pipeprof/cli/pprof-run.md; do
  grep -qx -- "$want" <<<"$files" || fail "the package lacks $want"
done
if command -v apt-get >/dev/null; then
  apt-get install --simulate --no-install-recommends "./$deb" >"$build/apt-simulate.log" 2>&1 ||
    { tail -n 20 "$build/apt-simulate.log" >&2; fail "apt cannot install $deb here"; }
  say "apt-get --simulate: the dependencies resolve"
fi

# the installed tools, from an empty prefix, nothing of the build tree in reach
check_installed() { # bin-dir man-dir (empty: the man pages are not checked)
  local bin=$1 man=$2 work
  work=$(mktemp -d /tmp/pp_pkg_work.XXXXXX)
  (
    cd "$work"
    export PATH="$bin:/usr/bin:/bin"
    unset PPROF_LIB PPROF_PLAN
    for t in pprof-run pprof-report pprof-tune pprof-check pptrain; do
      out=$("$bin/$t" --version) || fail "$t --version failed"
      case "$out" in "$t (pipeprof) $version"*) ;; *) fail "$t --version said: $out" ;; esac
    done
    pprof-run -q -o run -- pptrain --model tiny --stages 2 --microbatches 4 --steps 4 \
      --backend cpu >job.log 2>&1 || { cat job.log >&2; fail "pprof-run -- pptrain failed"; }
    ls run/*.pft >/dev/null 2>&1 || fail "the run directory has no trace"
    pprof-report run >report.txt || fail "pprof-report failed"
    grep -q "pipeline: 2 stage(s)" report.txt || fail "the report has no pipeline: $(head -3 report.txt)"
    pprof-report run --json -o summary.json || fail "pprof-report --json failed"
    grep -q "\"pipeprof_version\": \"$version\"" summary.json || fail "the summary has no version"
    pprof-report run -q --gantt gantt.png || fail "pprof-report --gantt failed"
    [ -s gantt.png ] || fail "no Gantt chart"
    pprof-report run -q --html report.html || fail "pprof-report --html failed"
    grep -q '<svg id="gantt-svg"' report.html || fail "the HTML report has no Gantt chart"
    pprof-tune -q run -o plan.json >/dev/null || fail "pprof-tune failed"
    grep -q '"boundaries"' plan.json || fail "no plan"
    for t in pprof-run pprof-report pprof-tune pprof-check pptrain; do
      [ -n "$man" ] || break
      MANPATH="$man" man -P cat "$t" 2>/dev/null | grep -q "^NAME" ||
        fail "man $t shows no page from $man"
    done
  ) || { rm -rf "$work"; return 1; }
  rm -rf "$work"
}
prefix=$(mktemp -d /tmp/pp_pkg_prefix.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
dpkg-deb -x "$deb" "$prefix"
check_installed "$prefix/usr/bin" "$prefix/usr/share/man"
say "unpacked into an empty prefix: --version, pprof-run -- pptrain, pprof-report, --gantt, --html, pprof-tune, man: ok"

if [ "${PPROF_PACKAGE_INSTALL:-0}" = 1 ]; then
  [ "$(id -u)" = 0 ] || fail "PPROF_PACKAGE_INSTALL=1 needs root"
  if dpkg-query -W -f='${Status}' pipeprof 2>/dev/null | grep -q "ok installed"; then
    fail "a pipeprof package is already installed; not touching it"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$root/$deb" \
    >"$build/apt-install.log" 2>&1 || { tail -n 20 "$build/apt-install.log" >&2; fail "apt-get install"; }
  rc=0 man=/usr/share/man
  # minimal images (Docker's Debian) tell dpkg to drop /usr/share/man: pages not checked there
  if grep -qs "path-exclude.*/usr/share/man" /etc/dpkg/dpkg.cfg.d/*; then
    say "dpkg here excludes /usr/share/man: the installed man pages are not checked"
    man=""
  fi
  check_installed /usr/bin "$man" || rc=1
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -q pipeprof >/dev/null 2>&1 || true
  [ "$rc" = 0 ] || fail "the tools installed by apt did not work"
  say "apt-get install, the tools from /usr/bin, apt-get purge: ok"
fi
say "ok"
