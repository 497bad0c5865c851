#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gpu-python-check: the pinmem Python package on a real GPU (run by bench/gpu-check.sh).

  stream    pinmem.Stream(device="cuda"): every item's bytes on the GPU equal
            the file's (compared on the GPU against the file read with numpy)
  queued    handoff="queued", a slow consumer kernel (torch.cuda._sleep) on
            the current stream, batch.release(stream=current): no item is
            overwritten before the consumer read it
  loader    pinmem.torch.DataLoader(num_workers=4, device="cuda"): every
            sample arrives intact on the GPU, two epochs
  fenced    pinmem.torch.DataLoader without a device, the usual
            x.cuda(non_blocking=True) behind a slow kernel, x dropped at
            once: the loader fences the slot, no sample is overwritten
  bench     samples/s on the GPU (dataloader-compare.py's pread samples): torch.utils.data.DataLoader(pin_memory=True)
            + .cuda(non_blocking=True) vs pinmem.torch.DataLoader(device="cuda")

It prints one PASS/FAIL line per check and "gpu-python-check: N passed, M failed".
usage: gpu-python-check.py [--dir DIR] [--workers 4,8] [--samples 2048]
"""
import argparse
import os
import sys
import tempfile
import time

import numpy
import torch
from torch.utils.data import DataLoader as TorchLoader
from torch.utils.data import Dataset

import pinmem
import pinmem.torch as pt

results = {"pass": 0, "fail": 0}


def check(name, ok, detail=""):
    results["pass" if ok else "fail"] += 1
    print("%s: %s%s" % ("PASS" if ok else "FAIL", name, " -- " + detail if detail else ""),
          flush=True)


def make_files(d, nfiles, size):
    rng = numpy.random.default_rng(1)
    paths = []
    for i in range(nfiles):
        p = os.path.join(d, "py-data-%d.bin" % i)
        rng.integers(0, 256, size, dtype=numpy.uint8).tofile(p)
        paths.append(p)
    return paths


def file_tensors(paths):
    return [torch.from_numpy(numpy.fromfile(p, dtype=numpy.uint8)).cuda() for p in paths]


def check_stream(paths, files_gpu, dev, handoff, slow):
    """Items of a device stream against the file bytes; slow: a consumer kernel first."""
    item = (1 << 20) + 4097     # unaligned items, cut across slot boundaries
    cur = torch.cuda.current_stream()
    items = bad = 0
    pending = []
    with pinmem.Stream(paths, item_bytes=item, batch_bytes=8 << 20, slots=3,
                       device="cuda:%d" % dev, handoff=handoff) as s:
        for b in s:
            if slow:
                torch.cuda._sleep(2_000_000)        # the consumer is still busy
            for v, (_, pid, off, ln, _) in zip(b.views, b.items):
                t = torch.from_dlpack(v)            # waits for the copy on cur
                # a copy on cur: compared after the slot may have been reused
                pending.append((t.clone(), pid, off, ln))
                items += 1
            if slow:
                b.release(stream=cur)
            else:
                b.release()
        torch.cuda.synchronize()
    for t, pid, off, ln in pending:
        bad += not torch.equal(t, files_gpu[pid][off:off + ln])
    want = sum(f.numel() for f in files_gpu)
    got = sum(p[3] for p in pending)
    return items, bad, got == want


class Pattern(Dataset):
    """Sample i: a 3x64x64 uint8 image that encodes i, and label i."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = (torch.arange(3 * 64 * 64, dtype=torch.int64).reshape(3, 64, 64) * 7 + i) % 251
        return x.to(torch.uint8), i


def expect(idx):
    base = torch.arange(3 * 64 * 64, device=idx.device, dtype=torch.int64).reshape(1, 3, 64, 64) * 7
    return ((base + idx.view(-1, 1, 1, 1)) % 251).to(torch.uint8)


def check_loader(dev, workers):
    n, bad, seen = 1000, 0, 0
    loader = pt.DataLoader(Pattern(n), batch_size=32, shuffle=True, num_workers=workers,
                           device="cuda:%d" % dev)
    for epoch in range(2):
        for x, y in loader:
            if x.device.type != "cuda" or y.device.type != "cuda":
                return False, "batch on %s, not cuda" % x.device
            bad += int((x != expect(y)).flatten(1).any(1).sum())
            seen += len(y)
    torch.cuda.synchronize()
    return bad == 0 and seen == 2 * n, "%d samples, %d wrong" % (seen, bad)


def check_fenced(dev):
    """x.cuda(non_blocking=True) behind a slow kernel, the host batch dropped at once."""
    n, bad, outs = 512, 0, []
    loader = pt.DataLoader(Pattern(n), batch_size=32, num_workers=2, slots=2)
    for x, y in loader:
        torch.cuda._sleep(5_000_000)                # the copy below runs later
        outs.append((x.cuda(non_blocking=True), y.cuda(non_blocking=True)))
        del x, y                                    # the slot may be rewritten: fenced?
    torch.cuda.synchronize()
    for x, y in outs:
        bad += int((x != expect(y)).flatten(1).any(1).sum())
    return bad == 0, "%d samples, %d overwritten" % (len(outs) * 32, bad)


def _compare_module():
    """bench/dataloader-compare.py, for its FileSamples dataset (its name has a dash)."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("dataloader_compare",
                                                  os.path.join(here, "dataloader-compare.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rate(loader, dev, passes):
    t0 = time.perf_counter()
    n = 0
    for _ in range(passes):
        for x in loader:
            if x.device.type != "cuda":
                x = x.cuda(dev, non_blocking=True)
            x.float().mean()                        # a consumer of the batch
            n += len(x)
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


def bench(d, dev, workers, samples):
    path = os.path.join(d, "py-samples.bin")
    numpy.random.default_rng(2).integers(0, 256, samples * 3 * 224 * 224,
                                         dtype=numpy.uint8).tofile(path)
    ds = _compare_module().FileSamples(path, samples, (3, 224, 224))
    print("| N workers | torch DataLoader(pin_memory=True) samples/s | pinmem.torch.DataLoader samples/s | ratio |")
    print("|---|---|---|---|")
    for n in workers:
        a = TorchLoader(ds, batch_size=64, shuffle=True, num_workers=n, pin_memory=True,
                        persistent_workers=True, prefetch_factor=4)
        b = pt.DataLoader(ds, batch_size=64, shuffle=True, num_workers=n,
                          persistent_workers=True, prefetch_factor=4, device="cuda:%d" % dev)
        rate(a, dev, 1)
        rate(b, dev, 1)                             # warm: workers up, page cache
        ra = [rate(a, dev, 2) for _ in range(2)]
        rb = [rate(b, dev, 2) for _ in range(2)]
        print("| %d | %.0f | %.0f | %.2fx |" % (n, max(ra), max(rb), max(rb) / max(ra)), flush=True)
        del a, b
    os.unlink(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--workers", default="4,8")
    ap.add_argument("--samples", type=int, default=2048)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu-python-check: FAIL (torch sees no CUDA device)")
        return 1
    dev = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(dev)
    print("torch %s, CUDA %s, %s" % (torch.__version__, torch.version.cuda,
                                      torch.cuda.get_device_name(dev)))
    info = pinmem.open(backend="cuda", cuda_device=dev).info()
    check("context on the cuda backend", info["backend"] == "cuda",
          "backend %s (%s), module %s" % (info["backend"], info["backend_note"], info["module"]))
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        paths = make_files(d, 4, 24 << 20)
        files_gpu = file_tensors(paths)
        for handoff, slow in (("copied", False), ("queued", True), ("copied", True)):
            items, bad, whole = check_stream(paths, files_gpu, dev, handoff, slow)
            check("Stream(device=cuda) handoff=%s%s" % (handoff, ", slow consumer, release(stream=)" if slow else ""),
                  items > 0 and bad == 0 and whole, "%d items, %d wrong, all bytes %s" % (items, bad, whole))
        check("current device unchanged", torch.cuda.current_device() == dev)
        ok, why = check_loader(dev, 4)
        check("pinmem.torch.DataLoader(device=cuda) 2 epochs", ok, why)
        ok, why = check_fenced(dev)
        check("pinmem.torch.DataLoader host batches + x.cuda(non_blocking=True), slot fenced", ok, why)
        bench(d, dev, [int(w) for w in args.workers.split(",")], args.samples)
    print("gpu-python-check: %d passed, %d failed" % (results["pass"], results["fail"]))
    return 1 if results["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
