#!/usr/bin/env bash
# test.sh: the README's second command, and what CI runs. Sets up, then builds and runs every
# test twice: an optimised build with warnings as errors, and an ASan+UBSan build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)
export CTEST_OUTPUT_ON_FAILURE=1
# the torch jobs of tests/test_torch.c run once: the optimised pass stores each job's output here,
# the sanitized pass analyses those under the sanitizers instead of running the jobs again
export PPROF_TORCH_JOB_CACHE="$PWD/build-ci/torch-jobs"
rm -rf "$PPROF_TORCH_JOB_CACHE"
echo "== release build (-Werror) =="
cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=Release -DPP_WERROR=ON >/dev/null
cmake --build build-ci -j"$jobs"
ctest --test-dir build-ci -j"$jobs" --timeout 900
echo "== performance gate: pprof-check against benchmarks/ci-baseline.json =="
bash benchmarks/ci_gate.sh --build build-ci
echo "== package: the .deb built, unpacked (and installed by apt in CI) and its tools run from there =="
install=0
if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then install=1; fi
PPROF_PACKAGE_INSTALL=$install bash scripts/package_test.sh build-pkg
echo "== ASan + UBSan build =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPP_WERROR=ON -DPP_SANITIZE=ON -DPP_WITH_CUDA=OFF >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --timeout 1800
echo "== fuzz: every target (traces, the analysis, dialects, Kineto, cost and plan files; bounded, 60 s in all) =="
bash scripts/fuzz.sh 60
