#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What copying a cold file out of the page cache costs, by how it was filled.

For each way, alternating for --reps rounds, as root: the files are dropped
from the page cache (fadvise DONTNEED, drop_caches) and as much anonymous
memory as they hold (at most three quarters of MemAvailable) is touched
and freed, as `pinstream --compare` does before a cold row; the page cache
is asked for them (timed: "ask"), then a `pread` loop copies them into
16 MiB buffers used in turn (timed: the cold copy) and copies them again
(the warm copy). "cold" is ask and copy together: a populate waits for the
reads, WILLNEED and readahead do not. The ways:

  read       nothing asked first: the pread loop's own readahead
  populate   MADV_POPULATE_READ through a read-only MADV_HUGEPAGE mapping,
             waited for: 2 MiB folios, as pinmem's buffered stream asks
  willneed   POSIX_FADV_WILLNEED, not waited for: 4 KiB folios

Prints the median GB/s and CPU seconds per GB of each step. On a VM that
gives free memory back to its host (free page reporting reports free blocks
of 2 MiB and more), a 2 MiB folio mostly lands on memory the host took back,
and its first touch, the cold copy, pays the host's refault.

    sudo python3 bench/cold-copy.py /data/synth/data-*.bin
"""
import argparse
import mmap
import os
import resource
import statistics
import time

BUF = 16 << 20
MADV_POPULATE_READ = 22


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def cold(files, total):
    os.sync()
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")
    touch = min(total, available() * 3 // 4) // mmap.PAGESIZE * mmap.PAGESIZE
    if touch:
        m = mmap.mmap(-1, touch)
        for off in range(0, touch, mmap.PAGESIZE):
            m[off] = 1
        m.close()


def ask(files, way):
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        size = os.fstat(fd).st_size
        if way == "populate" and size:
            m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            m.madvise(mmap.MADV_HUGEPAGE)
            m.madvise(MADV_POPULATE_READ)
            m.close()
        elif way == "willneed":
            os.posix_fadvise(fd, 0, size, os.POSIX_FADV_WILLNEED)
        os.close(fd)


def copy(files, bufs):
    total = k = 0
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        off = 0
        while True:
            n = os.preadv(fd, [bufs[k % len(bufs)]], off)
            k += 1
            if n <= 0:
                break
            off += n
            total += n
        os.close(fd)
    return total


def timed(fn):
    c, t = cpu_s(), time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t, cpu_s() - c


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    total = sum(os.stat(f).st_size for f in a.files)
    if not total:
        ap.error("the files are empty")
    bufs = [mmap.mmap(-1, BUF) for _ in range(4)]
    for b in bufs:
        b.write(b"\0" * BUF)
    ways = ["read", "populate", "willneed"]
    res = {w: [] for w in ways}
    for rep in range(a.reps):
        for w in (ways if rep % 2 == 0 else ways[::-1]):
            cold(a.files, total)
            _, ask_t, ask_c = timed(lambda: ask(a.files, w))
            n, cold_t, cold_c = timed(lambda: copy(a.files, bufs))
            _, warm_t, warm_c = timed(lambda: copy(a.files, bufs))
            gb = n / 1e9
            res[w].append((ask_t, ask_c / gb, gb / (ask_t + cold_t), (ask_c + cold_c) / gb,
                           gb / warm_t, warm_c / gb))
    print("way       ask s  ask CPU s/GB  cold GB/s  cold CPU s/GB  warm GB/s  warm CPU s/GB")
    for w in ways:
        med = [statistics.median(r[i] for r in res[w]) for i in range(6)]
        print(f"{w:9} {med[0]:5.2f}  {med[1]:12.3f}  {med[2]:9.2f}  {med[3]:13.3f}  "
              f"{med[4]:9.2f}  {med[5]:13.3f}")


if __name__ == "__main__":
    main()
