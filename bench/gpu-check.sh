#!/bin/sh
# SPDX-License-Identifier: MIT
# One prepared run for a machine with NVIDIA GPUs, under 8 minutes on one GPU:
#   1. build libpinmem with the cuda backend, pinstream, and bench/gpu-check.cu
#   2. write a SIZE synthetic dataset (16 files, unaligned items with crc32c)
#   3. verify: bytes on the GPU equal the file bytes (checksums computed on the
#      device by a kernel vs pread on the host), O_DIRECT and buffered
#   4. the training loop on each visible GPU, one process per GPU in parallel
#      (LOCAL_RANK=k): queued hand-off, a slow consumer kernel reading every
#      item on its own stream, release against that stream -> zero overwritten
#      items; no context on other devices; current device unchanged; slots on
#      the GPU's NUMA node
#   5. H2D GB/s from a pinmem slot vs pageable vs cudaHostAlloc memory (slot
#      within 80% of the pinned peak); registration seconds per GiB
#   6. end-to-end file -> GPU GB/s (O_DIRECT cold, buffered warm)
#   7. pinstream --compare --backend cuda (every row includes the H2D copy)
#   8. the Python package with the machine's PyTorch on the GPU
#      (bench/gpu-python-check.py: Stream on the device, queued hand-off with
#      release(stream=), pinmem.torch.DataLoader with and without a device,
#      samples/s against torch's DataLoader(pin_memory=True)), when python3
#      imports torch with CUDA and the package is built in $PY_DIR
# It prints one line per check and "gpu-check: N passed, M failed".
#
# usage: bench/gpu-check.sh [--build-only | --prebuilt]
#   --prebuilt: use $O/gpu-check, $O/pinstream and $PY_DIR as they are (built
#   on another machine by bench/gpu-prebuild.sh, for a GPU machine without
#   the build packages)
# env: O=build  SIZE=4G  DATA_DIR=$O (the dataset goes in a temporary
#      directory there, removed at the end)  CUDA_HOME=/usr/local/cuda
#      PY_DIR=$O/python  PYTHON=python3  NVCC_ARCH=-arch=native
set -u
O=${O:-build}
SIZE=${SIZE:-4G}
DATA_DIR=${DATA_DIR:-$O}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
PY_DIR=${PY_DIR:-$O/python}
PYTHON=${PYTHON:-python3}
t0=$(date +%s)
fails=0
passes=0

step() { echo "== $* ($(($(date +%s) - t0)) s)"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# check NAME CMD...: one line per check, counted
check() {
	name=$1
	shift
	if "$@"; then
		echo "PASS: $name"
		passes=$((passes + 1))
	else
		fail "$name"
	fi
}

build() {
	step "build (CUDA=1)"
	make -j"$(nproc)" O="$O" CUDA=1 lib pinstream >"$O/gpu-check-build.log" 2>&1 ||
		{ tail -20 "$O/gpu-check-build.log"; echo "gpu-check: FAIL (build)"; exit 1; }
	# -arch=native needs the GPU; NVCC_ARCH names one to build elsewhere
	arch=${NVCC_ARCH:--arch=native}
	[ -n "${NVCC_ARCH:-}" ] || { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; } || arch=
	"$NVCC" -O2 -std=c++17 $arch -Iinclude -o "$O/gpu-check" bench/gpu-check.cu \
		"$O/libpinmem.a" -cudart shared -Xlinker -rpath="$CUDA_HOME/lib64" \
		-luring -ldl -lpthread ||
		{ echo "gpu-check: FAIL (nvcc)"; exit 1; }
	# the Python package is optional here: step 8 says when it is missing
	make O="$O" CUDA=1 python >>"$O/gpu-check-build.log" 2>&1 ||
		echo "gpu-check: the Python package did not build (see $O/gpu-check-build.log)"
}

cd "$(dirname "$0")/.." || exit 1
mkdir -p "$O"
if [ "${1:-}" = --prebuilt ]; then
	# bench/gpu-prebuild.sh puts liburing beside the programs
	[ -d "$O/rt" ] && export LD_LIBRARY_PATH="$(cd "$O/rt" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
	build
fi
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
check "verify O_DIRECT" timeout 150 "$O/gpu-check" verify "$m" direct
check "verify buffered" timeout 150 "$O/gpu-check" verify "$m"

ngpu=$(nvidia-smi -L | grep -c GPU)
step "training loop on $ngpu GPU(s), one process per GPU"
pids=
for d in $(seq 0 $((ngpu - 1))); do
	LOCAL_RANK=$d timeout 200 "$O/gpu-check" consumer "$m" >"$data/consumer.$d" 2>&1 &
	pids="$pids $!"
done
d=0
for p in $pids; do
	wait "$p"
	rc=$?
	cat "$data/consumer.$d"
	[ "$rc" = 0 ] && { echo "PASS: consumer device $d"; passes=$((passes + 1)); } ||
		fail "consumer device $d (rc $rc)"
	d=$((d + 1))
done

step "H2D bandwidth and registration cost"
check "h2d slot vs pinned peak" timeout 60 "$O/gpu-check" h2d
check "registration cost" timeout 60 "$O/gpu-check" reg

step "end to end, file -> GPU"
check "stream O_DIRECT" timeout 60 "$O/gpu-check" stream "$m" direct
cat "$data"/data-*.bin >/dev/null
check "stream buffered" timeout 60 "$O/gpu-check" stream "$m"

step "pinstream --compare --backend cuda"
check "pinstream --compare" timeout 150 "$O/pinstream" --compare --backend cuda \
	--batch-bytes 64M "$data"/data-*.bin

step "Python package with PyTorch on the GPU"
if ! "$PYTHON" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
	fail "python: $PYTHON has no torch with CUDA"
elif ! PYTHONPATH="$PY_DIR" "$PYTHON" -c 'import pinmem' 2>/dev/null; then
	fail "python: no pinmem package in $PY_DIR for $PYTHON"
else
	PYTHONPATH="$PY_DIR" PYTHONUNBUFFERED=1 timeout 200 "$PYTHON" bench/gpu-python-check.py \
		--dir "$data"
	rc=$?
	[ "$rc" = 0 ] && { echo "PASS: python"; passes=$((passes + 1)); } || fail "python (rc $rc)"
fi

step "done"
echo "gpu-check: $passes passed, $fails failed"
[ "$fails" = 0 ]
