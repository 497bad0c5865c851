#!/bin/sh
# SPDX-License-Identifier: MIT
# One prepared run for a machine with an NVIDIA GPU, under 8 minutes:
#   1. build libpinmem with the cuda backend, pinstream, and bench/gpu-check.cu
#   2. write a SIZE synthetic dataset (16 files, unaligned items with crc32c)
#   3. verify: bytes on the GPU equal the file bytes (checksums computed on the
#      device by a kernel vs pread on the host), O_DIRECT and buffered
#   4. H2D GB/s from a pinmem slot vs pageable vs cudaHostAlloc memory;
#      cudaHostRegister / cudaHostAlloc / pm_buf_alloc seconds per GiB
#   5. end-to-end file -> GPU GB/s (O_DIRECT cold, buffered warm)
#   6. pinstream --compare --backend cuda (every row includes the H2D copy)
# It prints one line per result and "gpu-check: PASS" or "gpu-check: FAIL".
#
# usage: bench/gpu-check.sh [--build-only]
# env: O=build  SIZE=4G  DATA_DIR=$O (the dataset goes in a temporary
#      directory there, removed at the end)  CUDA_HOME=/usr/local/cuda
set -u
O=${O:-build}
SIZE=${SIZE:-4G}
DATA_DIR=${DATA_DIR:-$O}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
t0=$(date +%s)
fails=0

step() { echo "== $* ($(($(date +%s) - t0)) s)"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

build() {
	step "build (CUDA=1)"
	make -j"$(nproc)" O="$O" CUDA=1 lib pinstream >"$O/gpu-check-build.log" 2>&1 ||
		{ tail -20 "$O/gpu-check-build.log"; echo "gpu-check: FAIL (build)"; exit 1; }
	arch=-arch=native
	command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || arch=
	"$NVCC" -O2 -std=c++17 $arch -Iinclude -o "$O/gpu-check" bench/gpu-check.cu \
		"$O/libpinmem.a" -cudart shared -Xlinker -rpath="$CUDA_HOME/lib64" \
		-luring -ldl -lpthread ||
		{ echo "gpu-check: FAIL (nvcc)"; exit 1; }
}

cd "$(dirname "$0")/.." || exit 1
mkdir -p "$O"
build
if [ "${1:-}" = --build-only ]; then
	echo "gpu-check: built $O/gpu-check (not run: --build-only)"
	exit 0
fi
if ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
	echo "gpu-check: FAIL (no GPU: nvidia-smi -L lists none)"
	exit 1
fi
nvidia-smi -L | head -1
[ -e /dev/pinmem ] && echo "pinmem module: loaded" || echo "pinmem module: not loaded (slots use mlock + cudaHostRegister)"

data=$(mktemp -d "$(cd "$DATA_DIR" && pwd)/gpu-check.XXXXXX")
trap 'rm -rf "$data"' EXIT INT TERM
step "dataset $SIZE"
"$O/pinstream" --make-dataset "$data" --size "$SIZE" --files 16 || fail "make-dataset"
m=$data/manifest.txt

step "verify bytes on the GPU (device checksums)"
timeout 150 "$O/gpu-check" verify "$m" direct || fail "verify O_DIRECT"
timeout 150 "$O/gpu-check" verify "$m" || fail "verify buffered"

step "H2D bandwidth and registration cost"
timeout 60 "$O/gpu-check" h2d || fail "h2d"
timeout 60 "$O/gpu-check" reg || fail "reg"

step "end to end, file -> GPU"
timeout 60 "$O/gpu-check" stream "$m" direct || fail "stream O_DIRECT"
cat "$data"/data-*.bin >/dev/null
timeout 60 "$O/gpu-check" stream "$m" || fail "stream buffered"

step "pinstream --compare --backend cuda"
timeout 150 "$O/pinstream" --compare --backend cuda --batch-bytes 64M "$data"/data-*.bin ||
	fail "compare"

step "done"
[ "$fails" = 0 ] && echo "gpu-check: PASS" || echo "gpu-check: FAIL ($fails)"
[ "$fails" = 0 ]
