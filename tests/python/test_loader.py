# SPDX-License-Identifier: MIT
"""pinmem.torch.DataLoader: the same batches as torch's, written by workers into the pinned ring."""
import collections
import gc
import os
import re
import signal
import subprocess
import sys
import time
import warnings

import numpy
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import Dataset  # noqa: E402

import pinmem  # noqa: E402
import pinmem.torch as pt  # noqa: E402
from pinmem import _loader_iter  # noqa: E402
from conftest import (CUDA_STUB as STUB, MODULE_MODE, cuda_stub,  # noqa: E402
                      needs_cuda_stub, pinned_bytes)


class Images(Dataset):
    """Fixed-shape uint8 'images' with a label; pixels depend on the index only."""

    def __init__(self, n=37, shape=(3, 8, 8)):
        self.n, self.shape = n, shape

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randint(0, 256, self.shape, dtype=torch.uint8, generator=g), i % 5


class Mixed(Dataset):
    """Dicts of tensors, numpy arrays, floats, strings and a random draw (worker seeding)."""

    def __len__(self):
        return 23

    def __getitem__(self, i):
        return {"x": torch.full((2, 3), float(i)), "np": numpy.arange(4, dtype=numpy.int16) + i,
                "w": i / 7.0, "name": "item%d" % i, "flag": torch.tensor(i % 2 == 0), "f32": numpy.float32(i / 3),
                "rand": torch.rand(2), "pair": (i, torch.tensor([i, -i]))}


class Samples(torch.utils.data.IterableDataset):
    """Images() as a stream, sharded by worker: worker w yields i = w, w + N, ...;
    with extra=k worker 0 then yields k more (workers end at different batches)."""

    def __init__(self, n=37, extra=0, fail_at=None):
        self.n, self.extra, self.fail_at = n, extra, fail_at

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        w, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        idx = list(range(w, self.n, nw)) + (list(range(self.n, self.n + self.extra)) if w == 0 else [])
        for i in idx:
            if i == self.fail_at:
                raise ValueError("sample %d is corrupt" % i)
            yield Images(self.n + self.extra)[i]


class SizedSamples(Samples):
    def __len__(self):
        return self.n + self.extra


def equal(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) == type(b) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if isinstance(a, numpy.ndarray):
        return numpy.array_equal(a, b) and a.dtype == b.dtype
    return a == b


def clone(obj):
    """obj with its tensors copied out of the ring (a batch kept past its step holds a slot)."""
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, numpy.ndarray):
        return obj.copy()
    if isinstance(obj, dict):
        return {k: clone(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(clone(v) for v in obj)
    return obj


def both(dataset, seed=1234, **kw):
    """Batches of torch's DataLoader and of pinmem's for the same arguments and seeds."""
    out = []
    for cls, extra in ((torch.utils.data.DataLoader, {}), (pt.DataLoader, {"module": MODULE_MODE})):
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed)
        loader = cls(dataset, generator=g, **kw, **extra)
        out.append([clone(b) for b in loader])
        if hasattr(loader, "close"):
            assert loader.pin_mode in ("module", "mlock")
            loader.close()
    return out


def ring_range(it):
    """[lo, hi) of the iterator's ring (its slots are consecutive in one mapping)."""
    ring = it._ring
    return ring.base, ring.base + ring.total


def in_ring(t, rng):
    lo, hi = rng
    return lo <= t.data_ptr() and t.data_ptr() + t.numel() * t.element_size() <= hi


@pytest.mark.parametrize("workers", [0, 1, 2])
@pytest.mark.parametrize("shuffle,drop_last", [(False, False), (True, False), (True, True)])
def test_same_batches_as_torch_dataloader(workers, shuffle, drop_last):
    want, got = both(Images(), batch_size=4, shuffle=shuffle, drop_last=drop_last,
                     num_workers=workers)
    assert len(want) == len(got) == (37 // 4 if drop_last else 10)
    for w, g in zip(want, got):
        assert equal(w, g)


def test_same_batches_with_nested_samples_and_worker_seeds():
    want, got = both(Mixed(), batch_size=5, shuffle=True, num_workers=2)
    assert len(want) == len(got) == 5
    for w, g in zip(want, got):
        assert equal(w, g), (w, g)


# Datasets and functions that workers use are module-level: a worker started by spawn or
# forkserver (Python 3.14's default) gets them pickled, and a local class cannot be.
def scaled_collate(samples):
    xs = torch.stack([s[0] for s in samples]).float() / 255
    return {"x": xs, "y": numpy.array([s[1] for s in samples]), "n": len(samples)}


def test_same_batches_with_sampler_and_custom_collate():
    collate = scaled_collate
    sampler = list(range(36, -1, -3))
    want, got = both(Images(), batch_size=3, sampler=sampler, collate_fn=collate, num_workers=2)
    assert len(want) == len(got) == 5
    for w, g in zip(want, got):
        assert equal(w, g)
        assert isinstance(g["y"], numpy.ndarray)


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_are_views_of_the_pinned_ring(workers):
    """The first epoch's first batches (one per worker) come in ordinary memory and size
    the slots; every later batch, and every batch of the next epoch, views the ring."""
    loader = pt.DataLoader(Images(), batch_size=8, num_workers=workers, module=MODULE_MODE)
    for epoch in range(2):
        it = iter(loader)
        placed = []
        for x, y in it:
            placed.append(it._ring is not None and in_ring(x, ring_range(it))
                          and in_ring(y, ring_range(it)))
            mode = it._ring.pin_mode if it._ring is not None else None
        sizing = max(1, workers) if epoch == 0 else 0
        assert placed == [False] * sizing + [True] * (5 - sizing), (epoch, placed)
        assert mode in ("module", "mlock") and loader.pin_mode == mode
    assert loader._shared.slot_bytes == 4096
    loader.close()


class Pids(Images):
    def __getitem__(self, i):
        return torch.tensor([os.getpid(), i])


def test_persistent_workers_keep_their_processes_and_batches():
    want, got = [], []
    for cls, res, extra in ((torch.utils.data.DataLoader, want, {}),
                            (pt.DataLoader, got, {"module": MODULE_MODE})):
        g = torch.Generator().manual_seed(5)
        loader = cls(Pids(), batch_size=4, shuffle=True, num_workers=2, persistent_workers=True,
                     generator=g, **extra)
        for _ in range(2):
            res.append(torch.cat([b.clone() for b in loader]))
        if hasattr(loader, "close"):
            loader.close()
    assert torch.equal(want[0][:, 1], got[0][:, 1]) and torch.equal(want[1][:, 1], got[1][:, 1])
    assert set(got[0][:, 0].tolist()) == set(got[1][:, 0].tolist())   # same worker pids
    assert len(set(got[0][:, 0].tolist())) == 2


class Faults(Dataset):
    """1 MiB float samples made as image decoders make them (a fresh numpy array), each
    with the minor page faults its worker had taken when it was made."""

    def __len__(self):
        return 96

    def __getitem__(self, i):
        import resource
        a = numpy.empty(1 << 18, numpy.float32)
        a.fill(i)
        return torch.from_numpy(a), resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Temporaries(Faults):
    """Small samples, each made through a 1.5 MiB temporary (a decoded image, say): larger
    than a slot, under the 2 MiB for which numpy would ask for a huge page."""

    def __getitem__(self, i):
        import resource
        t = numpy.empty(3 << 17, numpy.float32)
        t.fill(i)
        return torch.from_numpy(t[:16].copy()), resource.getrusage(resource.RUSAGE_SELF).ru_minflt


KEEP_HEAP_PROBE = "import pinmem._pinmem as p; print(p.keep_heap(1 << 20))"


def keep_heap_applies(env=None):
    """What keep_heap returns in a fresh process with env (a worker's malloc settings)."""
    r = subprocess.run([sys.executable, "-c", KEEP_HEAP_PROBE], env=env, capture_output=True,
                       text=True, check=True)
    return r.stdout.strip() == "True"


def glibc_malloc_here():
    """Whether this process's workers get glibc's malloc (2.33 or later) untouched: decided
    apart from keep_heap, so that a keep_heap refusing wrongly fails instead of skipping."""
    import platform
    lib, version = platform.libc_ver()
    return (lib == "glibc" and tuple(int(x) for x in version.split(".")[:2]) >= (2, 33)
            and not os.environ.get("LD_PRELOAD") and "GLIBC_TUNABLES" not in os.environ
            and not any(k.startswith("MALLOC_") for k in os.environ))


needs_glibc_malloc = pytest.mark.skipif(not glibc_malloc_here(),
                                        reason="malloc here is not glibc's own (another C library, "
                                               "LD_PRELOAD or MALLOC_* settings): keep_heap does nothing")


def faults_per_batch(dataset, **extra):
    """Median page faults of one pinmem worker over one batch cycle, once every ring slot
    has been written once (batches 6 to 11 of 8; a slot's first write faults its pages in)."""
    loader = pt.DataLoader(dataset, batch_size=8, num_workers=1, module=MODULE_MODE, **extra)
    first = [int(b[1][0]) for b in loader]
    loader.close()
    return sorted(b - a for a, b in zip(first[6:], first[7:]))[2]


@needs_glibc_malloc
def test_workers_keep_a_batchs_memory_for_the_next_batch(monkeypatch):
    # glibc gives a batch's freed samples back to the kernel after each batch, so a worker
    # faults a batch's pages in again for every batch (2,017 a batch here without
    # keep_heap); pinmem's keeps them.
    assert keep_heap_applies()
    page = os.sysconf("SC_PAGE_SIZE")
    assert faults_per_batch(Faults()) < (8 << 20) // page // 8
    # A temporary larger than the ring's slots is not mmapped and unmapped every time.
    assert faults_per_batch(Temporaries()) < (3 << 19) // page
    # The user's own malloc setting wins: with this one glibc no longer adapts, every
    # 1 MiB sample is mmapped and a worker faults every batch in (spawn: a forkserver
    # started earlier would not see the variable).
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", str(128 << 10))
    assert faults_per_batch(Faults(), multiprocessing_context="spawn") > (8 << 20) // page // 2


def test_keep_heap_leaves_the_users_malloc_settings_alone():
    with pytest.raises(ValueError, match="positive"):
        pinmem._pinmem.keep_heap(0)
    if not glibc_malloc_here():
        pytest.skip("malloc here is not glibc's own: keep_heap does nothing")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    for k, v in (("MALLOC_TRIM_THRESHOLD_", "131072"), ("MALLOC_MMAP_THRESHOLD_", "131072"),
                 ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072"),
                 ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072")):
        assert not keep_heap_applies(dict(env, **{k: v})), k
    assert keep_heap_applies(dict(env, GLIBC_TUNABLES="glibc.malloc.arena_max=2"))


class Growing(Images):
    def __getitem__(self, i):
        return torch.zeros(10 if i < 8 else 100000, dtype=torch.uint8) + i


@pytest.mark.parametrize("workers", [0, 1])
def test_batch_bigger_than_a_slot_is_delivered_unpinned_with_one_warning(workers):
    want = [b for b in torch.utils.data.DataLoader(Growing(), batch_size=4)]
    loader = pt.DataLoader(Growing(), batch_size=4, num_workers=workers, module=MODULE_MODE)
    with pytest.warns(RuntimeWarning, match=r"a batch needs \d+ bytes but a slot holds \d+: .*"
                      r"pass slot_bytes=\d+") as rec:
        got = [clone(b) for b in loader]
    assert len([w for w in rec if "slot_bytes" in str(w.message)]) == 1
    assert len(got) == len(want) and all(torch.equal(w, g) for w, g in zip(want, got))
    loader.close()


@pytest.mark.parametrize("workers", [0, 1])
def test_batch_bigger_than_a_slot_raises_when_asked(workers):
    loader = pt.DataLoader(Growing(), batch_size=4, num_workers=workers, oversize="raise",
                           module=MODULE_MODE)
    got = []
    with pytest.raises(pt.SlotTooSmallError, match=r"batch 2 needs \d+ bytes but a slot holds \d+; pass slot_bytes="):
        for b in loader:
            got.append(b)
    assert len(got) == 2                             # batches 0 and 1 fit
    loader.close()
    ok = pt.DataLoader(Growing(), batch_size=4, num_workers=1, slot_bytes=400 * 1024,
                       module=MODULE_MODE)
    assert [b.shape[1] for b in ok][-1] == 100000
    ok.close()


class AllBad(Images):
    def __getitem__(self, i):
        raise KeyError("no sample %d" % i)


def test_every_batch_failing_raises_the_first_and_frees_the_ring():
    base = pinned_bytes()
    loader = pt.DataLoader(AllBad(), batch_size=4, num_workers=2, module=MODULE_MODE)
    with pytest.raises(KeyError) as e:
        next(iter(loader))
    assert "no sample 0" in str(e.value)             # batch 0's error, not a later batch's
    loader.close()                                   # other batches' stored errors do not break it
    del loader, e
    gc.collect()
    assert pinned_bytes() == base


class Bad(Images):
    def __getitem__(self, i):
        if i == 13:
            raise ValueError("sample %d is corrupt" % i)
        return super().__getitem__(i)


@pytest.mark.parametrize("workers", [0, 2])
def test_worker_exception_is_raised_for_its_batch_and_iteration_goes_on(workers):
    """As torch's DataLoader: the batch's exception (the worker's traceback in it), then
    the next batches; the same batches and the same exception type as torch's."""
    base = pinned_bytes()
    runs = []
    for cls in (torch.utils.data.DataLoader, pt.DataLoader):
        loader = cls(Bad(), batch_size=4, num_workers=workers)
        it = iter(loader)
        seen, errors = [], []
        while True:
            try:
                seen.append(clone(next(it)))
            except StopIteration:
                break
            except ValueError as e:
                errors.append((len(seen), str(e)))
        runs.append((seen, errors))
        del it
    (want, want_err), (got, got_err) = runs
    assert len(got) == len(want) == 9 and all(equal(w, g) for w, g in zip(want, got))
    assert [n for n, _ in got_err] == [n for n, _ in want_err] == [3]
    msg = got_err[0][1]
    assert "sample 13 is corrupt" in msg
    if workers:
        assert "Traceback" in msg and "in __getitem__" in msg and "DataLoader worker process" in msg
    gc.collect()
    assert pinned_bytes() <= base


def run_guarded(fn, seconds=60):
    """fn() with SIGALRM after seconds, so a hang fails the test instead of the suite."""
    def alarm(*_):
        raise TimeoutError("hung for %d s" % seconds)
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


class Dies(Images):
    """Sample 9 ends its worker: how="exit" with status 7, "kill" by SIGKILL."""

    def __init__(self, how):
        super().__init__()
        self.how = how

    def __getitem__(self, i):
        if i == 9:
            if self.how == "exit":
                os._exit(7)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(i)


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_worker_death_is_a_clear_error_without_hang_or_pins(how):
    base = pinned_bytes()
    loader = pt.DataLoader(Dies(how), batch_size=2, num_workers=2, module=MODULE_MODE)

    def consume():
        with pytest.raises(pt.WorkerError) as e:
            for _ in loader:
                pass
        return str(e.value)
    msg = run_guarded(consume)
    # torch's words for it
    assert re.match(r"DataLoader worker \(pid \d+\) " + (
        r"exited unexpectedly with exit code 7\. " if how == "exit" else
        r"is killed by signal: Killed\. "), msg), msg
    loader.close()
    del loader
    gc.collect()
    assert pinned_bytes() == base


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_kept_batches_never_raise_and_keep_their_values(workers):
    """Every batch kept (all_labels.append(y)): once every slot is held, batches come in
    ordinary memory with one warning; the values are torch's."""
    want = [b for b in torch.utils.data.DataLoader(Images(), batch_size=2, num_workers=workers)]
    loader = pt.DataLoader(Images(), batch_size=2, num_workers=workers, slots=3,
                           module=MODULE_MODE)
    kept = []
    with pytest.warns(pt.PinningWarning, match="all 3 slots of the batch ring are held") as rec:
        run_guarded(lambda: [kept.append(b) for b in loader])
    assert len([w for w in rec if "slots of the batch ring are held" in str(w.message)]) == 1
    assert len(kept) == len(want) == 19 and all(equal(w, g) for w, g in zip(want, kept))
    kept.clear()
    assert sum(1 for _ in loader) == 19              # and the next epoch is on the ring again
    loader.close()


def test_slots_held_by_reference_cycles_come_back_without_full_collections():
    """A batch left in a reference cycle gives its slot back from a collection of the
    young generations; no full collection runs (~0.2 s each with torch loaded), and
    while a user keeps every batch full ones take at most about a tenth of the time."""
    loader = pt.DataLoader(Images(), batch_size=2, slots=3, module=MODULE_MODE)
    gens, full = [], []
    _loader_iter._full_gc.next_at = 0.0     # no budget spent by an earlier test

    def seen(phase, info):
        if phase == "start":
            gens.append(info["generation"])
        if info["generation"] == 2:
            full.append(time.monotonic())
    gc.collect()
    gc.disable()                    # only the loader's own collections are seen
    gc.callbacks.append(seen)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pt.PinningWarning)     # every batch in a slot
            for x, y in loader:
                cycle = [x]
                cycle.append(cycle)
                del cycle
        assert gens, "no slot was held by a cycle"
        assert max(gens) < 2
        t0 = time.monotonic()
        with pytest.warns(pt.PinningWarning, match="slots of the batch ring are held"):
            kept = list(loader)
        elapsed = time.monotonic() - t0
    finally:
        gc.callbacks.remove(seen)
        gc.enable()
    took = [stop - start for start, stop in zip(full[::2], full[1::2])]
    assert sum(took) <= 0.15 * elapsed + max(took, default=0)
    assert all(equal(w, g) for w, g in zip(torch.utils.data.DataLoader(Images(), batch_size=2),
                                            kept))
    loader.close()


def test_slots_held_by_cycles_alive_at_a_collection_come_back():
    """A cycle still referenced when the loader collects the young generations is
    moved to the oldest one; the loader's rate-limited full collection frees it, also
    with the collector disabled (no batch stays out of the ring for good)."""
    loader = pt.DataLoader(Images(), batch_size=2, slots=3, module=MODULE_MODE)
    gens = []
    _loader_iter._full_gc.next_at = 0.0     # no budget spent by an earlier test

    def seen(phase, info):
        if phase == "start":
            gens.append(info["generation"])
    gc.collect()
    gc.disable()
    gc.callbacks.append(seen)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pt.PinningWarning)
            got, prev = [], None
            for _ in range(3):
                for x, y in loader:
                    got.append(x.clone())
                    cycle = [x]
                    cycle.append(cycle)
                    prev = cycle        # alive at the next collection, dropped after it
            del prev
        assert 2 in gens, "no full collection freed the cycles moved to the oldest generation"
    finally:
        gc.callbacks.remove(seen)
        gc.enable()
    want = [w for _ in range(3) for w, _ in torch.utils.data.DataLoader(Images(), batch_size=2)]
    assert all(equal(w, g) for w, g in zip(want, got)) and len(want) == len(got)
    loader.close()


def test_no_pinned_bytes_after_close_or_gc():
    base = pinned_bytes()
    loader = pt.DataLoader(Images(n=64, shape=(3, 64, 64)), batch_size=16, num_workers=2,
                           module=MODULE_MODE)
    during = 0
    for b in loader:
        during = max(during, pinned_bytes() - base)
    slot = loader._shared.slot_bytes
    assert during >= slot * 6
    held = clone(b)
    assert pinned_bytes() == base                     # the epoch ended: the ring is unpinned,
    assert equal(held, b)                             # b lives on in ordinary memory
    loader.close()
    del b
    assert pinned_bytes() == base
    # Garbage collection alone, in the middle of an epoch.
    loader = pt.DataLoader(Images(n=64, shape=(3, 64, 64)), batch_size=16, num_workers=2,
                           module=MODULE_MODE)
    it = iter(loader)
    x, y = next(it)
    pids = [w.pid for w in it._workers]
    del x, y, it, loader
    gc.collect()
    assert pinned_bytes() == base
    time.sleep(0.2)
    for pid in pids:
        assert not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z"


@pytest.mark.parametrize("persistent", [False, True])
def test_loader_made_in_the_for_statement_delivers_every_batch(persistent):
    """`for x in DataLoader(...)`: nothing else references the loader; the epoch does."""
    n = sum(len(y) for x, y in pt.DataLoader(Images(), batch_size=4, num_workers=2,
                                              persistent_workers=persistent, module=MODULE_MODE))
    assert n == 37


def test_leaving_a_loop_or_dropping_the_loader_frees_without_the_cyclic_gc():
    """No reference cycle between a loader and its iterator: workers stop and the ring
    is unpinned as soon as the last reference goes, without gc.collect()."""
    base = pinned_bytes()
    gc.disable()
    try:
        for x, y in pt.DataLoader(Images(n=64, shape=(3, 64, 64)), batch_size=16, num_workers=2,
                                  module=MODULE_MODE):
            pids = [p.pid for p in __import__("multiprocessing").active_children()]
            break
        del x, y
        assert pinned_bytes(collect=False) == base
        loader = pt.DataLoader(Images(n=64, shape=(3, 64, 64)), batch_size=16, num_workers=2,
                               persistent_workers=True, module=MODULE_MODE)
        for x, y in loader:
            pass
        del x, y
        assert pinned_bytes(collect=False) > base
        del loader
        assert pinned_bytes(collect=False) == base
    finally:
        gc.enable()
    time.sleep(0.2)
    for pid in pids:
        assert not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z"


class FakeEvent:
    """torch.cuda.Event on a CPU-only torch: completes only when synchronized; remembers
    the device of the stream it was recorded on."""
    made = []

    def __init__(self):
        self.done = False
        self.device = None
        FakeEvent.made.append(self)

    def record(self, stream=None):
        self.device = stream.device

    def query(self):
        return self.done

    def synchronize(self):
        self.done = True


class FakeStream:
    """torch.cuda.current_stream(device): this thread's device (0 here) unless one is named."""

    def __init__(self, device=None):
        self.device = torch.device(device).index if device is not None else 0


def fake_cuda(monkeypatch, current=0):
    """A CPU-only torch made to look as if this rank had initialised CUDA on `current`."""
    FakeEvent.made = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)


@needs_cuda_stub
def test_slot_dropped_while_cuda_is_initialised_waits_for_the_gpu(monkeypatch):
    """x.cuda(non_blocking=True) then dropping x: the slot is not rewritten before the
    copy queued on the ring's GPU's current stream ran (an event recorded there when the
    tensors went), also when this thread's current device is another GPU."""
    cuda_stub(4)
    fake_cuda(monkeypatch, current=0)
    ctx = pinmem.Context(module=MODULE_MODE, backend="cuda", cuda_library=STUB, cuda_device=3)
    loader = pt.DataLoader(Images(n=24), batch_size=4, slots=2, ctx=ctx, slot_bytes=4096)
    it = iter(loader)
    ring = it._ring
    seen = []
    for x, y in it:
        seen.append(x.data_ptr())
        del x, y                         # "the copy is queued": the slot gets fenced, not freed
    assert len(seen) == 6 and len(set(seen)) == 2           # slots were reused ...
    fenced = [f[0] for f in ring.fenced]
    assert len(FakeEvent.made) >= 4
    assert all(e.done for e in FakeEvent.made if e not in fenced)   # ... only after their event
    assert not any(e.done for e in fenced)
    assert {e.device for e in FakeEvent.made} == {3}        # on the ring's GPU, not this thread's
    loader.close()
    ctx.close()


@needs_cuda_stub
def test_slot_of_a_batch_kept_from_the_last_ring_waits_for_the_gpu(monkeypatch):
    """A batch kept past its epoch (copied to the GPU with non_blocking=True, say) holds its
    slot in the next ring; dropped, the slot is fenced like any dropped batch's, not freed."""
    cuda_stub(4)
    fake_cuda(monkeypatch, current=0)
    ctx = pinmem.Context(module=MODULE_MODE, backend="cuda", cuda_library=STUB, cuda_device=0)
    loader = pt.DataLoader(Images(n=24), batch_size=4, slots=3, ctx=ctx, slot_bytes=4096)
    kept = [b for k, b in enumerate(loader) if k == 2]
    it = iter(loader)
    ring = it._ring
    assert len(ring._old) == 1
    slot = next(iter(ring._old.values()))[1]
    del kept
    ring._collect_dead()
    assert slot not in ring.free and slot in [f[1] for f in ring.fenced]
    del it
    loader.close()
    ctx.close()


def ring_device(loader):
    """The GPU the loader's next ring is registered with."""
    it = iter(loader)
    next(it)                              # the first batch sizes the ring
    dev = it._ring.device
    del it
    return dev


@needs_cuda_stub
def test_ring_is_registered_on_this_ranks_gpu(monkeypatch):
    """Rank 3 of a node: the ring goes to the GPU its thread made current (as
    torch.cuda.set_device does), or to torch's current device once CUDA is
    initialised; never a context on GPU 0."""
    import threading
    lib = cuda_stub(8)
    monkeypatch.setenv("PINMEM_CUDART", STUB)
    got = {}

    def rank3():
        lib.cudaSetDevice(3)             # what torch.cuda.set_device(3) leaves behind
        loader = pt.DataLoader(Images(n=8), batch_size=4, module=MODULE_MODE)
        got["batches"] = len([b for b in loader])
        got["ring"] = ring_device(loader)
        got["ctx"] = loader._shared.ctx.info()["cuda_device"]
        loader.close()
    t = threading.Thread(target=rank3)
    t.start()
    t.join()
    assert got == {"batches": 2, "ring": torch.device("cuda", 3), "ctx": 3}
    assert lib.cudastub_count(b"retained0") == 0
    # a torchrun rank that has not made its GPU current: LOCAL_RANK names it ...
    monkeypatch.setenv("LOCAL_RANK", "6")
    loader = pt.DataLoader(Images(n=8), batch_size=4, module=MODULE_MODE)
    assert len([b for b in loader]) == 2
    assert ring_device(loader) == torch.device("cuda", 6)
    loader.close()
    # ... unless the process sees one GPU (Slurm, Kubernetes): that one, device 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5f3a")
    loader = pt.DataLoader(Images(n=8), batch_size=4, module=MODULE_MODE)
    assert len([b for b in loader]) == 2
    assert ring_device(loader) == torch.device("cuda", 0)
    loader.close()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    fake_cuda(monkeypatch, current=5)
    loader = pt.DataLoader(Images(n=8), batch_size=4, module=MODULE_MODE)
    assert len([b for b in loader]) == 2
    assert ring_device(loader) == torch.device("cuda", 5)
    loader.close()


CTRL_C_CHILD = r"""
import os, signal, sys, time, torch
import pinmem.torch as pt
# Python leaves SIGINT ignored when its parent did (a CI job started in the background)
signal.signal(signal.SIGINT, signal.default_int_handler)
from child_datasets import SlowZeros
loader = pt.DataLoader(SlowZeros(), batch_size=4, num_workers=2, module=sys.argv[1])
it = iter(loader)
next(it)
try:
    # inside the try: on a loaded machine the signal can come before the loop starts
    print("PIDS", *[w.pid for w in it._workers], flush=True)
    for b in it:
        pass
except KeyboardInterrupt:
    print("INTERRUPTED", it._shutdown and not any(w.is_alive() for w in it._workers), flush=True)
    raise
"""


def test_ctrl_c_stops_workers_and_exits():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([sys.executable, "-c", CTRL_C_CHILD, MODULE_MODE], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line.startswith("PIDS"), line + p.stderr.read()
    pids = [int(x) for x in line.split()[1:]]
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert "INTERRUPTED True" in out, "exit %d, %r: %s" % (p.returncode, out, err[-2000:])
    assert "KeyboardInterrupt" in err and p.returncode != 0
    for pid in pids:
        assert not os.path.exists("/proc/%d" % pid), "worker %d survived" % pid


def test_dataloader_arguments_are_checked():
    with pytest.raises(ValueError, match="mutually exclusive"):
        pt.DataLoader(Images(), sampler=[1, 2], shuffle=True)
    with pytest.raises(ValueError, match="persistent_workers"):
        pt.DataLoader(Images(), persistent_workers=True)
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified shuffle"):
        pt.DataLoader(Samples(), batch_size=4, shuffle=True)
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified sampler"):
        pt.DataLoader(Samples(), batch_size=4, sampler=[0, 1])
    with pytest.raises(ValueError, match="device must be"):
        pt.DataLoader(Images(), device="meta")
    assert len(pt.DataLoader(Images(), batch_size=4)) == 10


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_batches_equal_host_batches():
    """Device batches kept without a host synchronisation per batch, the loader closed
    (ring unpinned) before anything is read back: every copy must have been ordered
    before its slot was refilled and before the ring went (M9)."""
    want, = both(Images(n=200), batch_size=4, num_workers=2)[:1]
    loader = pt.DataLoader(Images(n=200), batch_size=4, num_workers=2, device="cuda",
                           module=MODULE_MODE)
    got = []
    for x, y in loader:
        torch.cuda._sleep(1000000)           # a slow "training step" on the current stream
        got.append((x, y))
    loader.close()
    del loader
    torch.cuda.synchronize()
    assert len(got) == len(want) == 50
    assert all(equal(list(w), [g.cpu() for g in gg]) for w, gg in zip(want, got))
    assert {x.device.type for x, _ in got} == {"cuda"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_host_batches_copied_by_the_caller_are_not_overwritten():
    """device=None, x.cuda(non_blocking=True) queued behind slow work, then x dropped:
    the slot must not be refilled before that copy ran (H1)."""
    want, = both(Images(n=200), batch_size=4, num_workers=2)[:1]
    torch.cuda.init()
    loader = pt.DataLoader(Images(n=200), batch_size=4, num_workers=2, slots=3,
                           module=MODULE_MODE)
    got = []
    for x, y in loader:
        torch.cuda._sleep(2000000)           # the copy below runs long after this loop moved on
        got.append(x.cuda(non_blocking=True))
        del x, y
    loader.close()
    torch.cuda.synchronize()
    assert all(torch.equal(w[0], g.cpu()) for w, g in zip(want, got))


@pytest.mark.parametrize("workers", [0, 1, 3])
@pytest.mark.parametrize("extra,drop_last", [(0, False), (0, True), (9, False), (9, True)])
def test_iterable_dataset_gives_torch_dataloaders_batches(workers, extra, drop_last):
    """Round robin over the workers, skipping those whose stream ended, short
    batches kept unless drop_last: the same batches, in the same order, as torch's."""
    want, got = both(Samples(extra=extra), batch_size=4, num_workers=workers, drop_last=drop_last)
    assert len(want) == len(got) > 0
    for w, g in zip(want, got):
        assert equal(w, g)
    seen = sorted(int(label) for b in got for label in b[1])
    assert len(seen) == sum(len(b[1]) for b in want)


def test_iterable_dataset_len_and_epochs_with_persistent_workers():
    lo = pt.DataLoader(SizedSamples(extra=9), batch_size=4, num_workers=2, persistent_workers=True,
                       module=MODULE_MODE)
    ref = torch.utils.data.DataLoader(SizedSamples(extra=9), batch_size=4, num_workers=2)
    assert len(lo) == len(ref) == 12
    want = [clone(b) for b in ref]
    pids = None
    for epoch in range(3):
        got = [clone(b) for b in lo]
        assert len(got) == len(want) and all(equal(w, g) for w, g in zip(want, got)), epoch
        now = [w.pid for w in lo._iterator._workers]
        assert pids is None or now == pids     # the same processes, a new iterator each epoch
        pids = now
    lo.close()
    with pytest.raises(TypeError):
        len(pt.DataLoader(Samples(), batch_size=4))


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_dataset_error_is_raised_and_empty_stream_ends(workers):
    base = pinned_bytes()
    lo = pt.DataLoader(Samples(fail_at=13), batch_size=4, num_workers=workers, module=MODULE_MODE)
    with pytest.raises(ValueError, match="sample 13 is corrupt"):
        list(lo)        # the batches before the error are dropped with the list
    lo.close()
    assert pinned_bytes() == base
    empty = pt.DataLoader(Samples(n=0), batch_size=4, num_workers=workers, module=MODULE_MODE)
    assert list(empty) == []
    empty.close()


def test_every_torch_dataloader_argument_is_accepted():
    """A drop-in replacement: torch's parameters, in torch's positional order."""
    import inspect
    theirs = inspect.signature(torch.utils.data.DataLoader.__init__).parameters
    ours = inspect.signature(pt.DataLoader.__init__).parameters
    assert set(theirs) <= set(ours), set(theirs) - set(ours)
    positional = [n for n, p in theirs.items() if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert [n for n, p in ours.items() if p.kind == p.POSITIONAL_OR_KEYWORD][:len(positional)] == positional
    import multiprocessing
    for ok in (None, "fork", multiprocessing.get_context("fork")):
        lo = pt.DataLoader(Images(), batch_size=8, num_workers=1, multiprocessing_context=ok,
                           prefetch_factor=None, pin_memory_device="", in_order=False,
                           module=MODULE_MODE)
        assert sum(len(y) for _, y in lo) == 37
        lo.close()
