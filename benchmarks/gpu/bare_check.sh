#!/usr/bin/env bash
# benchmarks/gpu/bare_check.sh: proves that the GPU check (benchmarks/gpu/run.sh) builds and loads
# with only what it carries, as on the bare device machine. It runs run.sh inside a chroot of a
# minimal Debian 12 (debootstrap --variant=minbase, plus gcc, g++, make, CMake, ninja, Python,
# binutils: what the device has) in which none of pipeprof's Debian dependencies (Criterion,
# cJSON, OpenBLAS, OpenMPI, pkg-config, gnuplot) is installed, with this machine's CUDA toolkit
# bind-mounted read-only and the working tree copied as the device tool sends it (tracked and
# untracked-not-ignored files plus the carried .gpu-deps/). Without a GPU, run.sh must end with
# "no GPU" and exit 0.
#
# usage (root, Debian 12): bash benchmarks/gpu/bare_check.sh   [PP_BARE_ROOT=/var/tmp/pipeprof-bare]
# The chroot is made once (a few minutes, from Debian's mirror) and reused. The report is copied
# to build-gpu-bare/report.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BARE=${PP_BARE_ROOT:-/var/tmp/pipeprof-bare}
die() { echo "bare_check: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (chroot, mounts)"
command -v nvcc >/dev/null || die "needs the CUDA toolkit (nvcc on PATH)"
CUDA=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")

if [ ! -x "$BARE/usr/bin/cmake" ]; then
    command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=$(awk '/^deb / { print $2; exit }' /etc/apt/sources.list)
    echo "bare_check: debootstrap into $BARE from $mirror"
    debootstrap --variant=minbase bookworm "$BARE" "$mirror" >/dev/null
    cp /etc/apt/sources.list.d/debian.sources "$BARE/etc/apt/sources.list.d/" 2>/dev/null || true
    chroot "$BARE" /bin/sh -c 'export DEBIAN_FRONTEND=noninteractive; apt-get update -q >/dev/null &&
        apt-get install -y -q --no-install-recommends gcc g++ make cmake ninja-build python3 binutils >/dev/null'
fi
[ -d "$ROOT/.gpu-deps/debs" ] || bash "$ROOT/benchmarks/gpu/deps.sh" fetch "$ROOT/.gpu-deps"

# hidden means absent: none of the dependencies' files may be in the chroot
for f in usr/include/criterion usr/include/cjson usr/include/x86_64-linux-gnu/openblas-pthread \
    usr/lib/x86_64-linux-gnu/libcriterion.so.3 usr/lib/x86_64-linux-gnu/libcjson.so.1 \
    usr/lib/x86_64-linux-gnu/libmpi.so.40 usr/lib/x86_64-linux-gnu/openblas-pthread usr/bin/pkg-config \
    usr/bin/pkgconf usr/bin/gnuplot; do
    [ ! -e "$BARE/$f" ] || die "$BARE/$f exists: the chroot is not bare"
done

work=$BARE/work/pipeprof
rm -rf "$BARE/work"
mkdir -p "$work" "$BARE/work/out"
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 cp -P --parents -t "$work")
cp -a "$ROOT/.gpu-deps" "$work/"

mnts=()
cleanup() { local m; for ((i = ${#mnts[@]} - 1; i >= 0; i--)); do umount -l "${mnts[i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
mount_bind() { mkdir -p "$2"; mount --bind "$1" "$2"; mnts+=("$2"); }
mount_bind /proc "$BARE/proc"
mount_bind /dev "$BARE/dev"
mount_bind "$CUDA" "$BARE$CUDA"
mount -o remount,bind,ro "$BARE$CUDA"
[ "$CUDA" = /usr/local/cuda ] || ln -sfn "$CUDA" "$BARE/usr/local/cuda"

echo "bare_check: run.sh in $BARE (toolkit $CUDA read-only; carried: $(du -sh "$work/.gpu-deps" | cut -f1))"
rc=0
chroot "$BARE" /usr/bin/env -i PATH="$CUDA/bin:/usr/bin:/bin" HOME=/root OUT=/work/out \
    PP_GPU_DEADLINE_S="${PP_GPU_DEADLINE_S:-470}" BUILD=/work/build \
    bash /work/pipeprof/benchmarks/gpu/run.sh || rc=$?
mkdir -p "$ROOT/build-gpu-bare"
cp "$BARE/work/out/"* "$ROOT/build-gpu-bare/" 2>/dev/null || true
echo "bare_check: run.sh exited $rc; report in build-gpu-bare/report.md"
[ $rc -eq 0 ] || exit $rc
grep -q "no GPU" "$BARE/work/out/table.md" || die "run.sh did not end on its no-GPU path"
echo "bare_check: built and loaded with the Debian dependencies absent; no GPU reported cleanly"
