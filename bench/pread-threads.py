#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What reading in parallel costs out of a warm page cache, without pinmem.

`pread` loops copy the given files (read once first, so they are cached;
the page cache is left as it is, so both settings copy out of the same
folios) into 16 MiB buffers used in turn, --buffers per thread (4, as a
stream's slots), with 1 thread and with N threads (one per CPU, at least 2,
at most one per file; the files dealt out), alternating for --reps rounds.
Prints each setting's median GB/s and CPU seconds per GB (getrusage: every
thread), with the rounds' ranges: the yardstick for `pinstream --compare`'s
warm buffered row, whose reader threads copy in parallel the same way.
`--buffers 1` shows what one reused buffer, which stays in the CPU's cache,
saves.

    python3 bench/pread-threads.py /data/synth/data-*.bin
"""
import argparse
import mmap
import os
import resource
import statistics
import threading
import time

BUF = 16 << 20
READ = 1 << 20


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def copy(fds, bufs, done):
    total = 0
    for fd in fds:
        off = 0
        while True:
            b = bufs[(total // BUF) % len(bufs)]
            at = total % BUF
            with memoryview(b)[at:at + min(READ, BUF - at)] as mv:
                n = os.preadv(fd, [mv], off)
            if n <= 0:
                break
            off += n
            total += n
    done.append(total)


def run(fds, bufs, nthreads, per):
    done = []
    threads = [threading.Thread(target=copy, args=(fds[i::nthreads], bufs[per * i:per * (i + 1)], done))
               for i in range(nthreads)]
    c, t = cpu_s(), time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    t, c = time.perf_counter() - t, cpu_s() - c
    gb = sum(done) / 1e9
    return gb / t, c / gb


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--buffers", type=int, default=4, help="16 MiB buffers per thread")
    a = ap.parse_args()
    par = max(2, min(os.cpu_count() or 1, len(a.files)))
    fds = [os.open(f, os.O_RDONLY) for f in a.files]
    for fd in fds:
        while os.read(fd, BUF):
            pass
    bufs = [mmap.mmap(-1, BUF) for _ in range(a.buffers * par)]
    for b in bufs:
        b.write(b"\0" * BUF)    # faulted in, as a pipeline's buffers are
    res = {1: [], par: []}
    for rep in range(a.reps):
        for n in ((1, par) if rep % 2 == 0 else (par, 1)):
            res[n].append(run(fds, bufs, n, a.buffers))
    for n, rs in res.items():
        g = [r[0] for r in rs]
        c = [r[1] for r in rs]
        print(f"{n} thread{'s' if n > 1 else ''}: {statistics.median(g):.2f} GB/s "
              f"({min(g):.2f}-{max(g):.2f}), {statistics.median(c):.3f} CPU s/GB "
              f"({min(c):.3f}-{max(c):.3f})")


if __name__ == "__main__":
    main()
