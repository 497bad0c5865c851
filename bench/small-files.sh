#!/bin/sh
# SPDX-License-Identifier: MIT
# Many small files: make SMALL_FILES files of SMALL_ITEM bytes (one item
# each), then, cold and warm, stream them with pinstream under
# `ulimit -n 1024` and read them with a tight open+pread+close loop into
# pinned memory (bench/pread-items.c).  Prints items/s of each (pinstream's
# from pm_stream_create to the end, manifest loading left out, and from its
# first read), the ratios, and pinstream's setup: seconds loading the
# manifest and in pm_stream_create.  Cold runs drop the page cache (root
# only; else they are skipped).  SMALL_DATASET=DIR reuses a dataset made
# with --make-dataset DIR --files N --item-size A-B (kept afterwards).
set -eu
O=${O:-build}
n=${SMALL_FILES:-200000}
item=${SMALL_ITEM:-1K-32K}
if [ -n "${SMALL_DATASET:-}" ]; then
	d=$SMALL_DATASET
else
	d=$(mktemp -d "$(cd "$O" && pwd)/small-files.XXXXXX")
	trap 'rm -rf "$d"' EXIT INT TERM
	"$O/pinstream" --make-dataset "$d" --files "$n" --item-size "$item" --seed 1
fi
drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; }
# items/s from pm_stream_create to the end, items/s from the first read, seconds loading the manifest, seconds in pm_stream_create
ips() { python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f %.0f %.2f %.2f" % (d["items"] / d["elapsed_s"], d["items"] / d["io_s"], d["load_s"], d["create_s"]))'; }
for mode in cold warm; do
	if [ $mode = cold ] && ! drop; then echo "cold: skipped (cannot drop caches)"; continue; fi
	# the loop's work only: bytes into pinned memory, no copy to a device, no crc32c check
	p=$( (ulimit -n 1024; "$O/pinstream" --manifest "$d/manifest.txt" --json --no-progress \
		--backend none --no-crc) | ips)
	[ $mode = cold ] && drop
	b=$("$O/bench/pread-items" "$d/manifest.txt" | awk '{ print $8 }')
	set -- $p
	echo "$mode: pinstream (ulimit -n 1024) $1 items/s ($2 from the first read; setup: manifest $3 s, pm_stream_create $4 s), open+pread+close loop $b items/s, ratio $(python3 -c "print('%.2f (from the first read %.2f)' % ($1 / $b, $2 / $b))")"
done
