#!/bin/sh
# SPDX-License-Identifier: MIT
# Shard-sequential tar reads: make WebDataset shards (4 shards; each
# sample a TAR_MEMBER-byte .input.bin and a few-byte .cls, ustar, written by
# Python's tarfile), then `pinstream --compare --coalesce on` over them:
# (c) buffered and (d) O_DIRECT item by item against (f) and (g), the same
# coalesced, beside the pread and DataLoader baselines, cold and warm,
# TAR_ROUNDS rounds.  TAR_MEMBER=3200 TAR_SAMPLES=40000 and TAR_MEMBER=307200
# TAR_SAMPLES=400 are the two sets of docs/benchmarks.md.
# TAR_DATASET=DIR keeps the shards there (made once).
set -eu
O=${O:-build}
member=${TAR_MEMBER:-3200}
samples=${TAR_SAMPLES:-40000}
if [ -n "${TAR_DATASET:-}" ]; then
	d=$TAR_DATASET
else
	d=$(mktemp -d "$(cd "$O" && pwd)/tar-shards.XXXXXX")
	trap 'rm -rf "$d"' EXIT INT TERM
fi
if [ ! -e "$d/shard-003.tar" ]; then
	python3 - "$d" "$member" "$samples" <<'PY'
import io, os, sys, tarfile
out, size, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per = samples // 4
rnd = os.urandom(size + 4096)
for s in range(4):
    with tarfile.open(f"{out}/shard-{s:03d}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
        for i in range(per):
            k = s * per + i
            for ext, data in ((".input.bin", rnd[k % 4096:k % 4096 + size]),
                              (".cls", str(k % 1000).encode())):
                ti = tarfile.TarInfo(f"{k:07d}{ext}")
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
PY
fi
"$O/pinstream" --compare --tar "$d"/shard-*.tar --coalesce on --rounds "${TAR_ROUNDS:-5}"
