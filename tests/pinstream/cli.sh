#!/bin/sh
# SPDX-License-Identifier: MIT
# pinstream's command line: every bad argument is one line on stderr and exit
# status 2 with nothing on stdout; stream failures are exit 1 naming the item;
# a small synthetic dataset streams, checks its crc32c values, and compares.
# Usage: tests/pinstream/cli.sh PATH/TO/pinstream  (scratch files go next to it)
set -u
bin=$1
work=$(mktemp -d "$(dirname "$bin")/pinstream-cli.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
fails=0
n=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# usage CASE ARGS...: exit 2, exactly one stderr line starting "pinstream: ", no stdout
usage() {
	n=$((n + 1))
	"$bin" "$@" >"$work/out" 2>"$work/err"
	rc=$?
	lines=$(wc -l <"$work/err")
	if [ "$rc" != 2 ] || [ "$lines" != 1 ] || [ -s "$work/out" ] ||
	   ! grep -q '^pinstream: ' "$work/err"; then
		fail "pinstream $* -> rc=$rc, $lines stderr lines: $(cat "$work/err")"
	fi
}

# expect RC PATTERN ARGS...: exit status RC and PATTERN (grep -E) in stdout+stderr
expect() {
	want=$1 pat=$2
	shift 2
	n=$((n + 1))
	# a run that blocks (a FIFO's open) fails instead of hanging the check
	timeout 120 "$bin" "$@" >"$work/out" 2>&1
	rc=$?
	if [ "$rc" != "$want" ] || ! grep -Eq -- "$pat" "$work/out"; then
		fail "pinstream $* -> rc=$rc (want $want), no /$pat/ in: $(head -c 600 "$work/out")"
	fi
}

f=$work/f.bin
head -c 100000 /dev/urandom >"$f"

usage
usage --slots abc "$f"
usage --slots 0 "$f"
usage --slots 99999 "$f"
usage --slots "$f"
usage --qd -3 "$f"
usage --batch-bytes 12X "$f"
usage --batch-bytes 2G "$f"
usage --batch-items 0 "$f"
usage --chunk 5000 "$f"
usage --item-bytes 1.5.5 "$f"
usage --direct maybe "$f"
usage --backend gpu "$f"
usage --pin hard "$f"
usage --order random "$f"
usage --on-error ignore "$f"
usage --shard-pad some "$f"
usage --epochs 0 "$f"
usage --seed -1 "$f"
usage --rank 2 --world-size 2 "$f"
usage --rank 1 "$f"
usage --world-size 0 "$f"
usage --prefetch 9 --slots 4 "$f"
usage --bogus "$f"
usage --device x "$f"
usage --device 5000 "$f"
# LOCAL_RANK is the device when --device is not given, and must be a number
n=$((n + 1))
LOCAL_RANK=zero "$bin" "$f" >"$work/out" 2>"$work/err"
rc=$?
if [ "$rc" != 2 ] || ! grep -q "LOCAL_RANK='zero' is not a CUDA device number" "$work/err"; then
	fail "LOCAL_RANK=zero pinstream -> rc=$rc: $(cat "$work/err")"
fi
usage -x "$f"
usage --manifest m.txt "$f"
usage --compare --epochs 2 "$f"
usage --compare --rounds 0 "$f"
usage --compare --rounds 26 "$f"
usage --rounds 2 "$f"
usage --make-dataset "$work/d"
usage --make-dataset "$work/d" --size 1X
usage --make-dataset "$work/d" --size 8K --files 3
usage --make-dataset "$work/d" --size 1M "$f"
usage --size 1M "$f"
usage --make-dataset "$work/d" --item-size 4K
usage --make-dataset "$work/d" --item-size 8K-4K
usage --make-dataset "$work/d" --item-size 0-4K
usage --make-dataset "$work/d" --size 1M --item-size 1K-4K
usage --json
usage --tar
usage --tar --manifest m.txt

expect 0 'Examples:' --help
expect 0 '^pinstream [0-9]' --version
expect 1 'nope\.bin: No such file or directory' "$work/nope.bin"
expect 1 'not a regular file' "$work"
: >"$work/empty.bin"
expect 1 'empty\.bin: empty file, no items' "$work/empty.bin"
expect 1 'no items: every file is empty' "$work/empty.bin"
# an empty file among others has no items: said, and the rest streams
expect 0 'empty\.bin: empty file, no items; going on' "$f" "$work/empty.bin" "$f" --no-progress
mkfifo "$work/fifo"
expect 1 'fifo: not a regular file' "$f" "$work/fifo"
printf 'fifo 0 10\n' >"$work/fifo.txt"
expect 1 'fifo: a FIFO, not a regular file or block device' --manifest "$work/fifo.txt" --no-progress
printf 'f.bin 0 10\nf.bin 5\n' >"$work/bad.txt"
expect 1 'bad\.txt:2: expected .path offset length \[crc32c\]., got 2 fields' --manifest "$work/bad.txt"
printf 'f.bin 99990 20\n' >"$work/past.txt"
expect 1 'item 0 \(.*f\.bin offset 99990 length 20\): past the end of the file \(100000 bytes\)' --manifest "$work/past.txt" --no-progress

# a real dataset: written, streamed with its crc32c values checked, compared
expect 0 'wrote 2 files, 8 MiB, [0-9]+ items' --make-dataset "$work/d" --size 8M --files 2 --seed 3
expect 0 ' 0 failed batches' --manifest "$work/d/manifest.txt" --backend host --no-progress
# the setup before the first batch is said: loading the items, pm_stream_create
expect 0 'setup +items loaded in [0-9.]+ s, pm_stream_create [0-9.]+ s' --manifest "$work/d/manifest.txt" --no-progress
expect 0 '"load_s":[0-9.]+,"create_s":[0-9.]+,' --manifest "$work/d/manifest.txt" --json
# the device asked for (by --device over LOCAL_RANK) is the one reported
LOCAL_RANK=3 expect 0 '"device":2,' --manifest "$work/d/manifest.txt" --backend host --device 2 --json
LOCAL_RANK=3 expect 0 '"device":3,' --manifest "$work/d/manifest.txt" --backend host --json
# one GPU visible per process: it is device 0, whatever the rank
LOCAL_RANK=3 CUDA_VISIBLE_DEVICES=GPU-5f3a expect 0 '"device":0,' --manifest "$work/d/manifest.txt" --backend host --json
LOCAL_RANK=3 CUDA_VISIBLE_DEVICES=0,1,2,3 expect 0 '"device":3,' --manifest "$work/d/manifest.txt" --backend host --json
expect 0 '"failed_batches":0' --manifest "$work/d/manifest.txt" --json --epochs 2 --shuffle --seed 5 --batch-items 3
if command -v python3 >/dev/null; then
	n=$((n + 1))
	want=$(awk '!/^#/ { s += $3 } END { print s * 2 }' "$work/d/manifest.txt")
	got=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes"])' <"$work/out") ||
		fail "--json output is not JSON: $(cat "$work/out")"
	[ "$got" = "$want" ] || fail "--json bytes $got, manifest says $want for 2 epochs"
fi
# --json stays valid UTF-8 when a path is not: the byte is escaped as \udcXX
if command -v python3 >/dev/null; then
	n=$((n + 1))
	bad=$(printf 'bad\377\303name.bin')
	head -c 1000 /dev/urandom >"$work/$bad"
	printf '%s 990 20\n' "$bad" >"$work/utf.txt"
	"$bin" --manifest "$work/utf.txt" --json --no-progress >"$work/out" 2>/dev/null
	python3 -c '
import json, os, sys
d = json.loads(sys.stdin.buffer.read().decode("utf-8"))
assert b"bad\xff\xc3name.bin offset 990" in os.fsencode(d["error"]), d["error"]
' <"$work/out" || fail "--json with a non-UTF-8 path: $(cat "$work/out")"
fi
expect 0 '"items":[0-9]+' "$work"/d/data-*.bin --item-bytes 64K --rank 1 --world-size 3 --json
# an item the size of a slot fits it (the size check is exact), O_DIRECT or not
expect 0 '"items":8,.*"failed_batches":0' "$work"/d/data-*.bin --item-bytes 1M --batch-bytes 1M --json
expect 0 '"items":8,.*"failed_batches":0' "$work"/d/data-*.bin --item-bytes 1M --batch-bytes 1M --direct off --json
expect 1 'item 0 \(.*offset 0 length 1048576\) needs 1048576 bytes, more than a slot \(1048575 bytes; raise batch_bytes: pinstream --batch-bytes' "$work"/d/data-*.bin --item-bytes 1M --batch-bytes 1048575
expect 0 '\(d\) pinmem O_DIRECT io_uring +cold' --compare --cold-only "$work"/d/data-*.bin
expect 0 '\(c\) pinmem buffered io_uring +warm' --compare --manifest "$work/d/manifest.txt"
expect 0 'warm: the strongest baseline is \((a|b|e)\) .*; \(c\) [0-9.]+x' --compare --manifest "$work/d/manifest.txt"
expect 0 '\(e\) DataLoader N workers \+ pin +cold .* [0-9]+ workers' --compare --cold-only "$work"/d/data-*.bin
expect 0 '\(c\) pinmem buffered io_uring +cold .* 3 readers' --compare --cold-only --readers 3 "$work"/d/data-*.bin
expect 0 '"strongest_cold":"[abe]","strongest_warm":"[abe]","rows":\[.*"mode":"e"' --compare --json "$work"/d/data-*.bin
# every row runs --rounds times: the median, the range, each round's ratio
expect 0 '"rounds":2,.*"mode":"c","name":"pinmem buffered io_uring","cache":"cold","ok":true,"gbps":[0-9.]+,"gbps_min":[0-9.]+,"gbps_max":[0-9.]+,"ratio_min":[0-9.]+,"ratio_max"' --compare --rounds 2 --json "$work"/d/data-*.bin
expect 0 'warm: the strongest baseline is .*\(c\) [0-9.]+x \(rounds [0-9.]+-[0-9.]+x\)' --compare --rounds 1 "$work"/d/data-*.bin
# five rounds by default; every cold row from the same memory state (anonymous memory as large as the dataset touched and freed)
expect 0 '"rounds":5,"cold_method":"[^"]*","cold_memory":"then 8 MiB of anonymous memory touched and freed"' --compare --cold-only --json "$work"/d/data-*.bin
# files this user neither owns nor may write: mincore cannot tell what is cached, and says so ('?', -1), not 100%
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	n=$((n + 1))
	mkdir "$work/ro" && cp "$work"/d/data-*.bin "$work/ro/" && chmod 755 "$work" "$work/ro" && chmod 644 "$work"/ro/*
	setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" --compare --cold-only --rounds 1 --json \
		--pin none "$work"/ro/data-*.bin >"$work/out" 2>&1
	grep -q '"mode":"a".*"cached_at_start":-1\.000' "$work/out" ||
		fail "--compare on another user's files: cached not unknown: $(head -c 600 "$work/out")"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" --compare --cold-only --rounds 1 \
		--pin none "$work"/ro/data-*.bin >"$work/out" 2>&1
	grep -Eq '^\(a\) pread \+ memcpy to pinned +cold .* \?  ' "$work/out" ||
		fail "--compare on another user's files: no '?' in the cached column: $(head -c 900 "$work/out")"
	# the baselines' pinned buffers are given back before a stream row: what the ring pins is enough
	n=$((n + 1))
	(ulimit -l 2048; setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" --compare --cold-only \
		--rounds 1 --json --pin mlock --batch-bytes 1M --slots 2 "$work"/ro/data-*.bin) >"$work/out" 2>&1
	grep -q '"mode":"c","name":"pinmem buffered io_uring","cache":"cold","ok":true' "$work/out" ||
		fail "--compare under RLIMIT_MEMLOCK of the stream's 2 MiB ring: (c) did not run: $(head -c 900 "$work/out")"
fi
# small files, one item each: more files than the open-files limit stream (opened as read)
expect 0 'wrote 300 files, .*, 300 items' --make-dataset "$work/s" --files 300 --item-size 1K-8K
n=$((n + 1))
(ulimit -n 64; timeout 120 "$bin" --manifest "$work/s/manifest.txt" --json --no-progress) >"$work/out" 2>&1 ||
	fail "300 small files under ulimit -n 64: $(cat "$work/out")"
grep -q '"items":300,' "$work/out" || fail "300 small files: not 300 items: $(cat "$work/out")"
# ... with O_DIRECT where the file system has it: --direct on is every file, crc32c checked
if dd if="$f" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null; then
	n=$((n + 1))
	(ulimit -n 64; timeout 120 "$bin" --manifest "$work/s/manifest.txt" --direct on --json --no-progress) >"$work/out" 2>&1 ||
		fail "300 small files, --direct on, under ulimit -n 64: $(cat "$work/out")"
	grep -q '"items":300,.*"files_direct":300,"files_buffered":0' "$work/out" ||
		fail "300 small files, --direct on: not 300 items read with O_DIRECT: $(cat "$work/out")"
fi
# tar shards: every member an item, read in place; a corrupt shard is named with its offset
(cd "$work/s" && tar -cf ../shard-0.tar 0000/0000000.bin 0000/0000001.bin && tar -cf ../shard-1.tar 0000/0000002.bin)
expect 0 '"items":3,' --tar "$work"/shard-*.tar --json --no-progress
cp "$work/shard-0.tar" "$work/bad.tar"
printf 'X' | dd of="$work/bad.tar" bs=1 seek=5 conv=notrunc 2>/dev/null
expect 1 'bad\.tar: header at offset 0: checksum mismatch' --tar "$work/shard-1.tar" "$work/bad.tar"
head -c 700 "$work/shard-0.tar" >"$work/cut.tar"
expect 1 'cut\.tar: header at offset 0: member of [0-9]+ bytes ends past the archive.s end \(700 bytes\): truncated' --tar "$work/cut.tar"
# one flipped byte: the crc32c check names the item
printf 'X' | dd of="$work/d/data-0001.bin" bs=1 seek=1000 conv=notrunc 2>/dev/null
expect 1 'item [0-9]+ \(.*data-0001\.bin offset 0 length [0-9]+\): crc32c [0-9a-f]{8}, the manifest says' \
	--manifest "$work/d/manifest.txt" --no-progress
expect 0 ' 0 failed batches' --manifest "$work/d/manifest.txt" --no-crc --no-progress
expect 0 ' 1 failed batches' --manifest "$work/d/manifest.txt" --on-error skip --no-progress

echo "pinstream-check: $n cases, $fails failed"
[ "$fails" = 0 ]
