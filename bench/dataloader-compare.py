#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""(a) torch.utils.data.DataLoader + the pin thread's copy vs (b) pinmem.torch.DataLoader.

The same dataset, fixed-shape uint8 samples (3x224x224 by default) read from
one file with pread, goes through

  (a) torch.utils.data.DataLoader(num_workers=N): workers collate into shared
      memory; then, as DataLoader(pin_memory=True)'s pin thread does, a
      thread in the main process copies every batch into page-locked memory
      from a cache of blocks (the caching host allocator keeps one block per
      batch in flight).  pin_memory=True does nothing on a CPU-only torch, so
      the pin thread is emulated: the same thread, queue and copy, into
      blocks that are mlock'd (what cudaHostAlloc would give, without the GPU);
  (b) pinmem.torch.DataLoader(num_workers=N): workers collate straight into
      the pinned ring; the main process only makes tensors over the slot.

For each N, transform (none, or "decode": zlib-decompressing each sample, a
stand-in for JPEG decoding's per-sample CPU work) and loader, it reports
samples/s, CPU seconds (main process and workers) per GB delivered and peak
pinned bytes (VmLck + VmPin of the main process), runs (a) and (b)
alternately `--reps` times and keeps the median with the range over the
reps, and prints one Markdown table with the ratios (b)/(a) (the median's,
and the range of each rep's own ratio).  No device copy is timed (no GPU here).

usage: dataloader-compare.py [--samples 1024] [--batch 64] [--workers 1,2]
       [--passes 3] [--reps 5] [--dir /tmp] [--shape 3,224,224]
"""
import argparse
import gc
import os
import queue
import re
import resource
import statistics
import sys
import tempfile
import threading
import time
import zlib

import numpy
import torch
from torch.utils.data import Dataset

import pinmem
import pinmem.torch as pt


def pinned_now():
    with open("/proc/self/status") as f:
        s = f.read()
    return sum(int(m) * 1024 for m in re.findall(r"^Vm(?:Lck|Pin):\s+(\d+) kB", s, re.M))


class FileSamples(Dataset):
    """Sample i: bytes [i*size, (i+1)*size) of one file, as a uint8 tensor of shape."""

    def __init__(self, path, n, shape, decode=False, index=None):
        self.path, self.n, self.shape, self.decode = path, n, tuple(shape), decode
        self.size = int(numpy.prod(shape))
        self.index = index        # (offset, length) of each compressed sample
        self.fd = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY)
        if self.decode:
            off, ln = self.index[i]
            raw = zlib.decompress(os.pread(self.fd, ln, off))
            return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(self.shape)
        a = numpy.empty(self.size, numpy.uint8)
        got = os.preadv(self.fd, [a], i * self.size)
        assert got == self.size
        return torch.from_numpy(a).view(self.shape)


def make_data(d, n, shape):
    size = int(numpy.prod(shape))
    rnd = numpy.random.default_rng(1)
    raw_path = os.path.join(d, "samples.u8")
    z_path = os.path.join(d, "samples.zlib")
    index = []
    with open(raw_path, "wb") as raw, open(z_path, "wb") as zf:
        for _ in range(n):
            # Image-like: smooth, so zlib has work to do both ways.
            a = (numpy.cumsum(rnd.integers(-3, 4, size), dtype=numpy.int64) % 256).astype(numpy.uint8)
            raw.write(a.tobytes())
            c = zlib.compress(a.tobytes(), 1)
            index.append((zf.tell(), len(c)))
            zf.write(c)
    return raw_path, z_path, index


class BlockCache:
    """Page-locked blocks kept for the whole run, as torch's caching host allocator keeps
    its cudaHostAlloc blocks for the process: allocated and locked once, reused by every pass."""

    def __init__(self, ctx, nblocks):
        self.ctx, self.nblocks, self.made = ctx, nblocks, []
        self.free = queue.Queue()

    def get(self, nbytes):
        try:
            blk = self.free.get_nowait()
        except queue.Empty:
            if len(self.made) >= self.nblocks:
                blk = self.free.get()
            else:
                blk = torch.from_dlpack(self.ctx.empty(nbytes, pin="mlock"))  # like cudaHostAlloc
                self.made.append(blk)
        if blk.numel() < nbytes:
            raise ValueError("a batch of %d bytes does not fit a cached block of %d" % (nbytes, blk.numel()))
        return blk

    def put(self, blk):
        self.free.put(blk)


class PinThread:
    """DataLoader(pin_memory=True)'s pin thread: copy each batch into a cached page-locked block."""

    def __init__(self, it, cache):
        self.it, self.q, self.cache = it, queue.Queue(maxsize=max(1, cache.nblocks - 2)), cache
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        for x in self.it:
            blk = self.cache.get(x.numel())
            px = blk[:x.numel()].view(x.shape)
            px.copy_(x)                                         # the pin thread's copy
            self.q.put((px, blk))
        self.q.put(None)

    def __iter__(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            px, blk = item
            yield px
            self.cache.put(blk)


def cpu_s():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def run_one(kind, ds, workers, batch, passes, ctx):
    nbytes = 0
    samples = 0
    peak = pinned_now()
    t0, c0 = time.perf_counter(), cpu_s()
    if kind == "a":
        cache = BlockCache(ctx, 2 * workers + 2)                 # one per run, kept across passes
        for _ in range(passes):
            loader = torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers,
                                                 prefetch_factor=2)
            for x in PinThread(iter(loader), cache):
                nbytes += x.numel()
                samples += x.shape[0]
                peak = max(peak, pinned_now())
            del loader
        del cache
    else:
        loader = pt.DataLoader(ds, batch_size=batch, num_workers=workers, prefetch_factor=2,
                               ctx=ctx)
        for _ in range(passes):
            for x in loader:
                nbytes += x.numel()
                samples += x.shape[0]
                peak = max(peak, pinned_now())
        loader.close()
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    gc.collect()
    return samples / wall, cpu / (nbytes / 1e9), peak


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--shape", default="3,224,224")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--transforms", default="none,decode")
    a = ap.parse_args()
    shape = tuple(int(x) for x in a.shape.split(","))
    torch.set_num_threads(1)
    ctx = pinmem.open()
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        raw, zpath, index = make_data(d, a.samples, shape)
        sample_mb = int(numpy.prod(shape)) / 1e6
        print("dataset: %d samples of %s uint8 (%.2f MB each, %.0f MB), batch %d, %d passes, "
              "median of %d alternating runs; ring pinned by %s; %d CPUs"
              % (a.samples, "x".join(map(str, shape)), sample_mb, sample_mb * a.samples,
                 a.batch, a.passes, a.reps, ctx.info()["module"] and "module" or "mlock",
                 os.cpu_count()), flush=True)
        rows = []
        for tf in a.transforms.split(","):
            ds = FileSamples(zpath if tf == "decode" else raw, a.samples, shape,
                             decode=(tf == "decode"), index=index)
            for n in (int(x) for x in a.workers.split(",")):
                res = {"a": [], "b": []}
                run_one("b", ds, n, a.batch, 1, ctx)              # warm the page cache
                for _ in range(a.reps):
                    for kind in ("a", "b"):
                        res[kind].append(run_one(kind, ds, n, a.batch, a.passes, ctx))
                med = {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in res.items()}
                # Each rep's (b)/(a), from runs made back to back: the range of the ratio.
                ratios = [b[0] / a[0] for a, b in zip(res["a"], res["b"])]
                spread = {k: (min(r[0] for r in v), max(r[0] for r in v)) for k, v in res.items()}
                rows.append((tf, n, med["a"], med["b"], spread, (min(ratios), max(ratios))))
                print("  %s N=%d: a %.0f/s %.2f s/GB, b %.0f/s %.2f s/GB" %
                      (tf, n, med["a"][0], med["a"][1], med["b"][0], med["b"][1]), flush=True)
    print()
    print("| transform | N | loader | samples/s (range) | CPU s/GB | peak pinned MiB | (b)/(a) samples/s (reps' range) | (b)/(a) CPU s/GB |")
    print("|---|---|---|---|---|---|---|---|")
    for tf, n, ra, rb, spread, rr in rows:
        print("| %s | %d | (a) DataLoader + pin-thread copy | %.0f (%.0f-%.0f) | %.2f | %.0f | | |"
              % (tf, n, ra[0], *spread["a"], ra[1], ra[2] / 2**20))
        print("| %s | %d | (b) pinmem.torch.DataLoader | %.0f (%.0f-%.0f) | %.2f | %.0f | %.2fx (%.2f-%.2fx) | %.2fx |"
              % (tf, n, rb[0], *spread["b"], rb[1], rb[2] / 2**20, rb[0] / ra[0], *rr, rb[1] / ra[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
