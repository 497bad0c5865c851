# SPDX-License-Identifier: MIT
"""pinmem.torch.DataLoader as a drop-in: torch's class, attributes, errors and corner cases,
each checked against torch's DataLoader with the same arguments."""
import collections
import dataclasses
import inspect
import multiprocessing
import os
import random
import time

import numpy
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import (BatchSampler, Dataset, IterableDataset,  # noqa: E402
                              SequentialSampler, default_collate)
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

import pinmem.torch as pt  # noqa: E402
from conftest import MODULE_MODE  # noqa: E402
from test_loader import Images, clone, equal  # noqa: E402

TorchDL = torch.utils.data.DataLoader


def outcome(cls, dataset, **kw):
    """The batches cls yields for these arguments, or the type of what it raised."""
    try:
        loader = cls(dataset, **kw)
    except Exception as e:                  # noqa: BLE001  (the oracle's outcome, whatever it is)
        return type(e)
    it, got = iter(loader), []
    try:
        for b in it:
            got.append(clone(b))
    except Exception as e:                  # noqa: BLE001
        got = type(e)
    finally:
        if hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()          # not left to the collector (torch's takes 5 s a worker)
        del it
    if hasattr(loader, "close"):
        loader.close()
    return got


def same_outcome(dataset, **kw):
    want = outcome(TorchDL, dataset, **kw)
    got = outcome(pt.DataLoader, dataset, **kw)
    if isinstance(want, type):
        assert got is want
    else:
        assert not isinstance(got, type), got
        assert len(got) == len(want) and all(equal(w, g) for w, g in zip(want, got))
    return want


# -- a real subclass, torch's attributes --

def test_is_a_torch_dataloader_and_generic():
    L = pt.DataLoader(Images(), batch_size=4)
    assert isinstance(L, TorchDL)
    assert pt.DataLoader[int] is not None and TorchDL[int] is not None


ATTRS = ("dataset", "batch_size", "drop_last", "num_workers", "pin_memory", "timeout",
         "worker_init_fn", "generator", "prefetch_factor", "persistent_workers",
         "pin_memory_device", "_dataset_kind", "_auto_collation")


def samplers_equal(a, b):
    """Same type, and the same indices yielded, each drawn from a generator seeded alike (a
    RandomSampler without a generator draws from torch's global state: seeded alike too)."""
    if a is None or b is None:
        return a is b
    if type(a) is not type(b):
        return False

    def drawn(s):
        g = getattr(s, "generator", None)
        state = g.get_state() if g is not None else None
        global_state = torch.get_rng_state()
        try:
            out = []
            for seed in (7, 8):
                torch.manual_seed(seed)
                if g is not None:
                    g.manual_seed(seed)
                out.append([list(x) if isinstance(x, list) else x for x in s])
            return out
        finally:
            torch.set_rng_state(global_state)
            if g is not None:
                g.set_state(state)
    return drawn(a) == drawn(b)


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(10))


DS = Images()
CASES = {
    "defaults": dict(),
    "batch": dict(batch_size=4, shuffle=True, drop_last=True),
    "batch_sampler": dict(batch_sampler=BatchSampler(SequentialSampler(DS), 3, False)),
    "no_batching": dict(batch_size=None, sampler=[3, 1, 2]),
    "workers": dict(batch_size=4, num_workers=2, multiprocessing_context="spawn",
                    pin_memory=True, timeout=5, persistent_workers=True, prefetch_factor=3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_attributes_are_torchs(case):
    kw = CASES[case]
    a, b = TorchDL(DS, **kw), pt.DataLoader(DS, **kw)
    for k in ATTRS:
        assert getattr(a, k) == getattr(b, k), k
    assert b.collate_fn is a.collate_fn          # default_collate / default_convert, as torch
    assert samplers_equal(a.sampler, b.sampler) and samplers_equal(a.batch_sampler, b.batch_sampler)
    assert type(a.multiprocessing_context) is type(b.multiprocessing_context)
    assert len(a) == len(b)
    a2 = TorchDL(Stream(), batch_size=4)
    b2 = pt.DataLoader(Stream(), batch_size=4)
    assert type(a2.sampler) is type(b2.sampler) and a2._dataset_kind == b2._dataset_kind


def rebuild(dl, sampler):
    """What Lightning's _update_dataloader does: the class called again with the
    attributes that match its __init__ parameters, and a new sampler."""
    attrs = {k: v for k, v in vars(dl).items() if not k.startswith("_")}
    attrs["multiprocessing_context"] = dl.multiprocessing_context
    params = inspect.signature(dl.__init__).parameters
    keep = {n for n, p in params.items() if n in attrs and p.default is not attrs[n]} | {"dataset"}
    kw = {k: v for k, v in attrs.items() if k in keep}
    kw.update(sampler=sampler, shuffle=False, batch_sampler=None, batch_size=dl.batch_size,
              drop_last=dl.drop_last)
    missing = {p.name for p in params.values() if p.default is p.empty and p.name not in kw
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY)}
    assert not missing
    return type(dl)(**kw)


def test_reinstantiated_with_a_distributed_sampler_is_a_pinmem_loader():
    ours = pt.DataLoader(Images(), batch_size=4, shuffle=True, num_workers=1, slots=5,
                         pin="auto", oversize="raise", module=MODULE_MODE)
    theirs = TorchDL(Images(), batch_size=4, shuffle=True, num_workers=1)
    for rank in (0, 1):
        new = rebuild(ours, DistributedSampler(Images(), num_replicas=2, rank=rank, seed=3))
        ref = rebuild(theirs, DistributedSampler(Images(), num_replicas=2, rank=rank, seed=3))
        assert type(new) is pt.DataLoader and type(ref) is TorchDL
        assert (new.slots, new.oversize, new.module) == (5, "raise", MODULE_MODE)
        assert isinstance(new.sampler, DistributedSampler)
        want, got = [clone(b) for b in ref], [clone(b) for b in new]
        assert len(got) == len(want) == 5 and all(equal(w, g) for w, g in zip(want, got))
        new.close()


# -- errors and sharding as torch's --

def test_sharding_filter_is_not_duplicated_across_workers():
    from torch.utils.data.datapipes.iter import IterableWrapper
    for workers in (0, 2):
        pipe = IterableWrapper(range(20)).sharding_filter()
        want = sorted(int(x) for b in TorchDL(pipe, batch_size=2, num_workers=workers) for x in b)
        got = sorted(int(x) for b in pt.DataLoader(pipe, batch_size=2, num_workers=workers,
                                                   module=MODULE_MODE) for x in b)
        assert got == want == list(range(20))


@pytest.mark.parametrize("kw", [dict(num_workers=0, prefetch_factor=4), dict(timeout=-1),
                                dict(num_workers=0, multiprocessing_context="fork"),
                                dict(num_workers=-1), dict(persistent_workers=True),
                                dict(batch_size=None, drop_last=True),
                                dict(sampler=[1, 2], shuffle=True)])
def test_torchs_argument_errors(kw):
    with pytest.raises(ValueError) as want:
        TorchDL(Images(), **kw)
    with pytest.raises(ValueError) as got:
        pt.DataLoader(Images(), **kw)
    assert str(got.value) == str(want.value)


class Slow(Images):
    def __getitem__(self, i):
        time.sleep(30)


def test_timeout_raises_after_the_timeout_as_torch():
    t = time.monotonic()
    L = pt.DataLoader(Slow(), batch_size=2, num_workers=1, timeout=2, module=MODULE_MODE)
    it = iter(L)
    with pytest.raises(RuntimeError, match="DataLoader timed out after 2 seconds"):
        next(it)
    del it                                   # the busy worker is stopped, not waited for
    assert time.monotonic() - t < 6


# -- the smaller differences --

class Uint16(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return numpy.arange(4, dtype=numpy.uint16) + i


@pytest.mark.parametrize("workers", [0, 2])
def test_numpy_uint16_collates_as_torch(workers):
    """torch 1.13 refuses uint16 (TypeError), newer torch collates it: either way the same."""
    same_outcome(Uint16(), batch_size=3, num_workers=workers)


@pytest.mark.parametrize("workers", [0, 2])
def test_empty_dataset_yields_no_batch(workers):
    assert same_outcome(Images(n=0), batch_size=4, num_workers=workers) == []


@pytest.mark.parametrize("workers", [0, 2])
def test_batch_size_none_with_a_sampler_yields_items(workers):
    want = same_outcome(Images(), batch_size=None, sampler=[5, 3, 30], num_workers=workers)
    assert len(want) == 3


@dataclasses.dataclass
class Pair:
    x: torch.Tensor
    y: list


def collate_pairs(samples):
    return Pair(torch.stack([s[0] for s in samples]), [s[1] for s in samples])


def test_collate_fn_returning_a_dataclass():
    collate = collate_pairs
    for workers in (0, 2):
        want = list(TorchDL(Images(), batch_size=4, collate_fn=collate, num_workers=workers))
        got = list(pt.DataLoader(Images(), batch_size=4, collate_fn=collate, num_workers=workers,
                                 module=MODULE_MODE))
        assert len(got) == len(want) == 10
        assert all(torch.equal(w.x, g.x) and w.y == g.y for w, g in zip(want, got))


class WorkersOnly(Images):
    """Refuses to be read in the main process (datasets that shard by worker do)."""

    def __getitem__(self, i):
        if torch.utils.data.get_worker_info() is None:
            raise AssertionError("dataset read in the main process")
        return super().__getitem__(i)


def test_dataset_is_never_read_in_the_main_process_and_rng_is_untouched():
    for cls in (TorchDL, pt.DataLoader):
        torch.manual_seed(7)
        random.seed(7)
        numpy.random.seed(7)
        n = sum(len(y) for _, y in cls(WorkersOnly(), batch_size=4, shuffle=True, num_workers=2))
        assert n == 37
        after = (torch.rand(1).item(), random.random(), numpy.random.rand())
        if cls is TorchDL:
            want = after
    assert after == want


@pytest.mark.parametrize("workers", [0, 2])
def test_one_slot_works_in_a_for_loop(workers):
    with pytest.warns(pt.PinningWarning, match="slots of the batch ring are held"):
        got = outcome(pt.DataLoader, Images(), batch_size=4, num_workers=workers, slots=1,
                      module=MODULE_MODE)
    want = outcome(TorchDL, Images(), batch_size=4, num_workers=workers)
    assert len(got) == 10 and all(equal(w, g) for w, g in zip(want, got))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawn_and_forkserver_workers_share_the_ring(method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip("no %s here" % method)
    want = outcome(TorchDL, Images(), batch_size=4, num_workers=1, multiprocessing_context=method)
    L = pt.DataLoader(Images(), batch_size=4, num_workers=1, multiprocessing_context=method,
                      module=MODULE_MODE, slot_bytes=4096)
    it = iter(L)
    got, placed = [], 0
    lo, hi = it._ring.base, it._ring.base + it._ring.total
    for b in it:
        placed += lo <= b[0].data_ptr() < hi
        got.append(clone(b))
    assert len(got) == len(want) == 10 and all(equal(w, g) for w, g in zip(want, got))
    assert placed == 10                          # the worker wrote into the ring
    assert L.pin_mode in ("module", "mlock")
    L.close()


def test_default_collate_fn_is_torchs():
    assert pt.DataLoader(Images()).collate_fn is default_collate
    assert os.environ.get("PINMEM_NO_SUCH") is None


def test_a_loader_copies_and_pickles_as_torchs_does():
    import copy
    import pickle
    L = pt.DataLoader(Images(), batch_size=4, num_workers=1, module=MODULE_MODE, slots=5)
    assert sum(1 for _ in L) == 10
    for new in (copy.deepcopy(L), pickle.loads(pickle.dumps(L))):
        assert type(new) is pt.DataLoader and new.slots == 5 and new.pin_mode == ""
        assert [b[1].tolist() for b in new] == [b[1].tolist() for b in L]
        new.close()
    L.close()


def deny_proc_fds(worker_id):
    """worker_init_fn: this worker cannot open another process's fds through /proc
    (a non-dumpable parent, a hardened /proc)."""
    real = os.open

    def fake(path, *a, **kw):
        if str(path).startswith("/proc/") and "/fd/" in str(path):
            raise PermissionError(13, "Permission denied", path)
        return real(path, *a, **kw)
    os.open = fake


def test_workers_that_cannot_open_the_ring_by_proc():
    """Forked workers started after the ring exists inherit its mapping; others (the first
    epoch's, which size the ring) deliver through ordinary memory with one warning."""
    want = outcome(TorchDL, Images(), batch_size=4, num_workers=1)
    L = pt.DataLoader(Images(), batch_size=4, num_workers=1, worker_init_fn=deny_proc_fds,
                      module=MODULE_MODE, slot_bytes=4096, multiprocessing_context="fork")
    it = iter(L)
    lo, hi = it._ring.base, it._ring.base + it._ring.total
    got = [clone(b) for b in it if lo <= b[0].data_ptr() < hi]
    assert len(got) == 10 and all(equal(w, g) for w, g in zip(want, got))
    del it
    L.close()
    L = pt.DataLoader(Images(), batch_size=4, num_workers=1, worker_init_fn=deny_proc_fds,
                      module=MODULE_MODE, multiprocessing_context="fork")
    with pytest.warns(pt.PinningWarning, match="a worker could not map the ring"):
        got = [clone(b) for b in L]
    assert len(got) == 10 and all(equal(w, g) for w, g in zip(want, got))
    L.close()


# -- what torch's collate returns, kept: tensor subclasses, requires_grad, container types --

class Boxes(torch.Tensor):
    pass


class Rec(dict):
    def __init__(self, *a, meta=None, **k):
        super().__init__(*a, **k)
        self.meta = meta


class Kinds(Dataset):
    def __init__(self, kind):
        self.kind = kind

    def __len__(self):
        return 8

    def __getitem__(self, i):
        x = torch.full((2,), float(i))
        if self.kind == "subclass":
            b = x.as_subclass(Boxes)
            b.fmt = "XYXY"
            return torch.zeros(3), {"boxes": b}
        if self.kind == "grad":
            return x.requires_grad_(), i
        if self.kind == "defaultdict":
            d = collections.defaultdict(list)
            d["x"] = x
            return d
        return Rec(x=x, meta="m%d" % i)


def collate_kinds(batch):
    """Builds the kinds itself (what a detection or graph collate_fn does)."""
    xs = torch.stack([torch.full((2,), float(len(batch)))] * len(batch))
    b = xs.as_subclass(Boxes)
    b.fmt = "XYXY"
    d = collections.defaultdict(list)
    d["x"] = xs
    return b, d, Rec(x=xs.clone(), meta="m"), xs.clone().requires_grad_()


def signature(obj):
    """Types, attributes, requires_grad, device and values of a batch, all the way down."""
    if isinstance(obj, torch.Tensor):
        attrs = {k: v for k, v in vars(obj).items() if not isinstance(v, torch.Tensor)}
        return (type(obj).__name__, obj.requires_grad, obj.device.type, sorted(attrs.items()),
                obj.detach().tolist())
    if isinstance(obj, dict):
        attrs = sorted(vars(obj).items()) if hasattr(obj, "__dict__") else []
        return (type(obj).__name__, attrs, sorted((k, signature(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [signature(v) for v in obj])
    return obj


def kinds_outcome(cls, kind, workers):
    kw = dict(batch_size=2, num_workers=workers)
    if kind == "collate_fn":
        ds, kw["collate_fn"] = Kinds("rec"), collate_kinds
    else:
        ds = Kinds(kind)
    loader = cls(ds, **kw)
    try:
        return [[signature(b) for b in loader] for _epoch in range(2)]
    except Exception as e:                  # noqa: BLE001  (torch's own outcome, whatever it is)
        return type(e)
    finally:
        if hasattr(loader, "close"):
            loader.close()


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", ["subclass", "grad", "defaultdict", "rec", "collate_fn"])
def test_collated_types_and_attributes_are_torchs(kind, workers):
    """A tensor subclass and its attributes, requires_grad, a defaultdict, a dict subclass
    with attributes: each batch as torch's DataLoader delivers it (or torch's error)."""
    want = kinds_outcome(TorchDL, kind, workers)
    got = kinds_outcome(pt.DataLoader, kind, workers)
    assert got == want
