#!/usr/bin/env bash
# benchmarks/gpu/deps.sh: the Debian libraries the GPU check links (Criterion, cJSON, OpenBLAS,
# OpenMPI, and pkgconf to find them), carried to a machine that has none of them and no package
# registry (the device machine: CUDA toolkit, CMake, ninja, Python and PyTorch, nothing else).
#
#   deps.sh fetch [DIR]      here, on Debian 12 with apt and pip: download the .debs into DIR/debs
#                            and the PyPI nvtx wheel (CPython 3.12) into DIR/wheels (default
#                            .gpu-deps, ignored by git; about 24 MB)
#   deps.sh unpack DIR DEST  anywhere: unpack DIR/debs into DEST (never into /) and lay out
#                            DEST/prefix: lib/, include/, pkgconfig/ (our own .pc files), bin/pkgconf
#   deps.sh check DEST       every shared library in DEST/prefix/lib resolves inside the prefix
#                            or to the C and C++ runtimes every Linux has; exit 1 naming the rest
#   deps.sh cmake-args DEST  the CMake flags that make a build use DEST/prefix (one per line)
#
# benchmarks/gpu/run.sh unpacks and uses them when DIR/debs exists; docs/gpu.md has the device call.
set -euo pipefail

# Packages by what needs them; the closure of their shared libraries minus glibc, libgcc_s and
# libstdc++ (deps.sh check proves it). Names as in Debian 12 (bookworm).
PKGS=(
    libcriterion-dev libcriterion3 libgit2-1.5 libhttp-parser2.9 libmbedcrypto7 libmbedtls14
    libmbedx509-1 libssh2-1 libnanomsg5 libffi8 libpcre2-8-0 libssl3 libgssapi-krb5-2 libkrb5-3
    libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2 zlib1g # tests (Criterion)
    libcjson-dev libcjson1                                          # every JSON file
    libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0 # CPU kernels
    libopenmpi-dev libopenmpi3 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libudev1 # NCCL transport's bootstrap
    pkgconf-bin libpkgconf3                                         # pkg-config itself
)
NVTX_VERSION=0.2.17 # PyPI nvtx, for the PyTorch job's ranges (domain, category, payload)
# What every glibc system provides; anything else a carried library needs must be carried.
BASE_RE='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libgcc_s\.so|libstdc\+\+\.so)'

die() { echo "deps.sh: $*" >&2; exit 2; }

fetch() {
    local dir=${1:-.gpu-deps}
    command -v apt-get >/dev/null || die "fetch needs apt-get (Debian 12)"
    mkdir -p "$dir/debs"
    (cd "$dir/debs" && rm -f ./*.deb && apt-get download -q "${PKGS[@]}") ||
        die "apt-get download failed (run 'apt-get update' first?)"
    echo "deps.sh: $(ls "$dir/debs" | wc -l) packages, $(du -sh "$dir/debs" | cut -f1) in $dir/debs"
    # the PyPI nvtx package for the PyTorch job (the device's Python is 3.12 and has torch, not nvtx)
    mkdir -p "$dir/wheels"
    rm -f "$dir"/wheels/*.whl
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$dir/wheels" "nvtx==$NVTX_VERSION" || die "pip download of nvtx $NVTX_VERSION failed"
    echo "deps.sh: $(ls "$dir/wheels") in $dir/wheels"
}

# one .deb's files under $2, with dpkg-deb where there is one, else ar + tar (binutils)
extract() {
    if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$1" "$2"
    else
        local tmp
        tmp=$(mktemp -d)
        (cd "$tmp" && ar x "$1" && tar -xf data.tar.* -C "$2")
        rm -rf "$tmp"
    fi
}

# A carried library with a RUNPATH (OpenMPI's: its Debian install folder) has its dependencies
# looked up there and nowhere else that our binaries' RPATH names. Its DT_RUNPATH entry becomes a
# DT_RPATH (the same string, searched first, then the RPATH of the executable that loaded it),
# so the prefix serves it too: one tag of the dynamic section rewritten, nothing else.
runpath_to_rpath() {
    python3 - "$@" <<'PY'
import struct, sys
DT_RPATH, DT_RUNPATH, PT_DYNAMIC = 15, 29, 2
for path in sys.argv[1:]:
    with open(path, "r+b") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            continue  # not a 64-bit little-endian ELF (a linker script, say)
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            ptype, _, off, _, _, filesz = struct.unpack("<IIQQQQ", f.read(40))
            if ptype != PT_DYNAMIC:
                continue
            for j in range(filesz // 16):
                f.seek(off + 16 * j)
                tag, = struct.unpack("<q", f.read(8))
                if tag == 0:
                    break
                if tag == DT_RUNPATH:
                    f.seek(off + 16 * j)
                    f.write(struct.pack("<q", DT_RPATH))
PY
}

# pkg-config file NAME with the given Cflags and Libs, for the prefix P
pc() {
    local P=$1 name=$2 ver=$3 cflags=$4 libs=$5
    printf 'prefix=%s\nName: %s\nDescription: %s carried for the GPU check\nVersion: %s\nCflags: %s\nLibs: %s\n' \
        "$P" "$name" "$name" "$ver" "$cflags" "$libs" >"$P/pkgconfig/$name.pc"
}

unpack() {
    local dir=$1 dest=$2
    [ -d "$dir/debs" ] || die "no $dir/debs (run deps.sh fetch here first)"
    case "$dest" in /|/usr|/usr/*|/lib*|/etc*) die "refusing to unpack into $dest";; esac
    rm -rf "$dest"
    mkdir -p "$dest/root"
    dest=$(cd "$dest" && pwd)
    local f
    for f in "$dir"/debs/*.deb; do extract "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$dest/root"; done
    local R=$dest/root P=$dest/prefix A=x86_64-linux-gnu
    mkdir -p "$P/lib" "$P/include" "$P/pkgconfig" "$P/bin"
    # shared libraries (and their soname links) from every folder the packages use, flat
    local d
    for d in "$R/lib/$A" "$R/usr/lib/$A" "$R/usr/lib/$A/openblas-pthread" "$R/usr/lib/$A/openmpi/lib"; do
        [ -d "$d" ] || continue
        find "$d" -maxdepth 1 \( -type f -o -type l \) -name '*.so*' -exec cp -P {} "$P/lib/" \;
    done
    # not linked here: OpenBLAS's BLAS/LAPACK aliases, OpenMPI's Fortran/C++/Java/SHMEM bindings
    # and the helpers of its network plugins (which are not carried: one process, no mpirun)
    rm -f "$P"/lib/lib{blas,lapack}.so* "$P"/lib/libmpi_* "$P"/lib/libmca_common_* \
        "$P"/lib/liboshmem.so* "$P"/lib/libompitrace.so* "$P"/lib/ompi_*.so
    # links that pointed into other folders of the packages (OpenMPI's libmpi.so -> ../../libmpi.so.40)
    for f in "$P"/lib/*; do
        [ -L "$f" ] && [ ! -e "$f" ] && ln -sf "$(basename "$(readlink "$f")")" "$f"
    done
    runpath_to_rpath "$P"/lib/*.so*
    cp -a "$R/usr/include/." "$P/include/"
    cp -a "$R/usr/include/$A/openblas-pthread/." "$P/include/"
    mkdir -p "$P/include/openmpi" && cp -a "$R/usr/lib/$A/openmpi/include/." "$P/include/openmpi/"
    # pkgconf needs the carried libpkgconf, and only our .pc files are to be found
    cp -a "$R/usr/bin/pkgconf" "$P/bin/pkgconf.bin"
    printf '#!/bin/sh\nPKG_CONFIG_LIBDIR="%s/pkgconfig" PKG_CONFIG_PATH= LD_LIBRARY_PATH="%s/lib" exec "%s/bin/pkgconf.bin" "$@"\n' \
        "$P" "$P" "$P" >"$P/bin/pkgconf"
    chmod +x "$P/bin/pkgconf"
    # our own .pc files: the packages' name their install paths and Debian-only private needs
    pc "$P" openblas 0.3.21 "-I\${prefix}/include" "-L\${prefix}/lib -lopenblas"
    pc "$P" libcjson 1.7.15 "-I\${prefix}/include -I\${prefix}/include/cjson" "-L\${prefix}/lib -lcjson"
    pc "$P" criterion 2.4.1 "-I\${prefix}/include" "-L\${prefix}/lib -lcriterion"
    rm -rf "$R" # everything needed is in the prefix
    echo "deps.sh: unpacked into $P ($(du -sh "$P" | cut -f1))"
}

check() {
    local P=$1/prefix bad=0 f line
    [ -d "$P/lib" ] || die "no $P/lib"
    for f in "$P"/lib/*.so*; do
        [ -L "$f" ] && continue
        while read -r line; do
            case "$line" in
                *"=> not found"*) echo "deps.sh: $(basename "$f"): ${line%% *} not found" >&2; bad=1 ;;
                *"=> $P/lib/"*) ;;
                *) local lib=${line%% *}
                   if ! [[ $lib =~ $BASE_RE ]] && [[ $lib == lib* ]]; then
                       echo "deps.sh: $(basename "$f") needs $lib from the system (${line#*=> })" >&2
                       bad=1
                   fi ;;
            esac
        done < <(LD_LIBRARY_PATH="$P/lib" ldd "$f" 2>/dev/null | sed 's/^[[:space:]]*//')
    done
    for f in "$P"/lib/*.so*; do
        [ -L "$f" ] && continue
        if readelf -d "$f" 2>/dev/null | grep -q RUNPATH; then
            echo "deps.sh: $(basename "$f") has a RUNPATH: our binaries' RPATH would not serve it" >&2
            bad=1
        fi
    done
    [ $bad -eq 0 ] && echo "deps.sh: every library in $P/lib resolves inside the prefix or to glibc/libstdc++"
    return $bad
}

# -Wl,--disable-new-dtags: an RPATH (not RUNPATH) on our binaries, searched for the carried
# libraries' own needs too, so nothing runs with LD_LIBRARY_PATH (which the PyTorch job inherits).
# The caller adds DEST/prefix/lib to CMAKE_BUILD_RPATH (run.sh adds the toolkit's folders too).
cmake_args() {
    local P=$1/prefix
    printf '%s\n' "-DPKG_CONFIG_EXECUTABLE=$P/bin/pkgconf" \
        "-DMPI_C_HEADER_DIR=$P/include/openmpi" "-DMPI_C_LIB_NAMES=mpi" "-DMPI_mpi_LIBRARY=$P/lib/libmpi.so" \
        "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags" "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags"
}

cmd=${1:-}
shift || true
case "$cmd" in
    fetch) fetch "$@" ;;
    unpack) [ $# -eq 2 ] || die "usage: deps.sh unpack DIR DEST"; unpack "$@" ;;
    check) [ $# -eq 1 ] || die "usage: deps.sh check DEST"; check "$@" ;;
    cmake-args) [ $# -eq 1 ] || die "usage: deps.sh cmake-args DEST"; cmake_args "$@" ;;
    *) die "usage: deps.sh fetch [DIR] | unpack DIR DEST | check DEST | cmake-args DEST" ;;
esac
