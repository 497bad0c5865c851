#!/bin/sh
# SPDX-License-Identifier: MIT
# Build what `bench/gpu-check.sh --prebuilt` runs, here, for a GPU machine
# that has the driver, CUDA and PyTorch but not the build packages
# (liburing-dev, python3-dev): libpinmem, pinstream and gpu-check for
# NVCC_ARCH in $O, liburing.so.2 beside them in $O/rt (gpu-check.sh puts it on
# the library path), and the Python package for the Python whose headers are
# in PY_INCLUDE (e.g. pyenv's 3.12 for a machine whose python3 is 3.12) in
# $O/py, with libpinmem and liburing linked in statically.
#
# usage: O=build/gpu NVCC_ARCH='-gencode arch=compute_90,code=sm_90' \
#        PY_INCLUDE=$HOME/.pyenv/versions/3.12.1/include/python3.12 bench/gpu-prebuild.sh
# then:  SIZE=2G O=build/gpu PY_DIR=build/gpu/py bench/gpu-check.sh --prebuilt  (there)
set -eu
O=${O:-build/gpu}
NVCC_ARCH=${NVCC_ARCH:?name the GPU architecture, e.g. -gencode arch=compute_90,code=sm_90}
PY_INCLUDE=${PY_INCLUDE:?the include directory of the target Python, holding Python.h}
cd "$(dirname "$0")/.."
[ -f "$PY_INCLUDE/Python.h" ] || { echo "gpu-prebuild: no Python.h in $PY_INCLUDE" >&2; exit 1; }
O=$O NVCC_ARCH=$NVCC_ARCH sh bench/gpu-check.sh --build-only
mkdir -p "$O/rt" "$O/py/pinmem"
cp -a "$(pkg-config --variable=libdir liburing 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)"/liburing.so.2* "$O/rt/"
ver=$(basename "$PY_INCLUDE" | sed 's/^python//; s/\.//')
cp python/pinmem/*.py "$O/py/pinmem/"
${CC:-cc} -shared -fPIC -O2 -std=gnu11 -Wall -Wno-unused-parameter -Wno-missing-field-initializers \
	-Wno-cast-function-type -fvisibility=hidden -I"$PY_INCLUDE" -Iinclude python/src/*.c \
	"$O/libpinmem.a" -Wl,-Bstatic -luring -Wl,-Bdynamic -ldl -lpthread \
	-o "$O/py/pinmem/_pinmem.cpython-$ver-x86_64-linux-gnu.so"
echo "gpu-prebuild: $O/gpu-check, $O/pinstream, $O/rt/liburing.so.2, $O/py (Python ${ver%??}.${ver#?})"
