#!/bin/sh
# SPDX-License-Identifier: MIT
# pinstream O_DIRECT vs fio (io_uring, fixed buffers, O_DIRECT) on the same
# file, block size and queue depth: fio is the storage limit, the ratio says
# how close pinstream gets.  Runs alternate (pinstream, fio, pinstream, ...)
# so drift on a noisy machine hits both; the ratio of the medians is printed.
#
# usage: bench/fio-compare.sh [FILE]
#   FILE   a file on the file system to measure; without it a SIZE dataset is
#          written under $O (removed afterwards)
# env: O=build  PINSTREAM=$O/pinstream  BS=1M  QD=32  SIZE=4G  RUNS=3  BATCH=16M
set -eu
O=${O:-build}
PINSTREAM=${PINSTREAM:-$O/pinstream}
BS=${BS:-1M}
QD=${QD:-32}
SIZE=${SIZE:-4G}
RUNS=${RUNS:-3}
BATCH=${BATCH:-16M}

command -v fio >/dev/null || { echo "fio-compare: fio is not installed"; exit 1; }
command -v python3 >/dev/null || { echo "fio-compare: python3 is needed to read JSON"; exit 1; }
[ -x "$PINSTREAM" ] || { echo "fio-compare: $PINSTREAM not built (make pinstream)"; exit 1; }

tmp=
cleanup() { [ -z "$tmp" ] || rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
if [ $# -ge 1 ]; then
	file=$1
else
	mkdir -p "$O"
	tmp=$(mktemp -d "$(cd "$O" && pwd)/fio-compare.XXXXXX")
	"$PINSTREAM" --make-dataset "$tmp" --size "$SIZE" --files 1 >/dev/null
	file=$tmp/data-0000.bin
fi

json_get() {	# python expression on the JSON object j, from stdin
	python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"
}

echo "fio-compare: $file, block size $BS, queue depth $QD, O_DIRECT, $RUNS runs each"
echo "pinstream GB/s counts from its first read, as fio counts from its first I/O;"
echo "'+setup' also counts pinstream's slot allocation, pinning and registration"
printf '%-4s %14s %14s %8s %16s\n' run "pinstream GB/s" "fio GB/s" ratio "pinstream+setup"
ps_all= fio_all=
i=1
while [ "$i" -le "$RUNS" ]; do
	out=$("$PINSTREAM" "$file" --direct on --item-bytes "$BS" --chunk "$BS" --qd "$QD" \
		--batch-bytes "$BATCH" --backend none --json)
	ps=$(echo "$out" | json_get 'j["io_gbps"]')
	ps_setup=$(echo "$out" | json_get 'j["gbps"]')
	fio=$(fio --name=fio-compare --filename="$file" --rw=read --bs="$BS" \
		--iodepth="$QD" --direct=1 --ioengine=io_uring --fixedbufs=1 \
		--output-format=json | json_get 'j["jobs"][0]["read"]["bw_bytes"] / 1e9')
	printf '%-4s %14.3f %14.3f %7.2fx %16.3f\n' "$i" "$ps" "$fio" \
		"$(python3 -c "print($ps / $fio)")" "$ps_setup"
	ps_all="$ps_all $ps"
	fio_all="$fio_all $fio"
	i=$((i + 1))
done
python3 - "$ps_all" "$fio_all" <<'PY'
import statistics, sys
ps = [float(x) for x in sys.argv[1].split()]
fio = [float(x) for x in sys.argv[2].split()]
mp, mf = statistics.median(ps), statistics.median(fio)
print(f"median    {mp:14.3f} {mf:14.3f} {mp / mf:7.2f}x   pinstream/fio")
PY
