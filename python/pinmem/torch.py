# SPDX-License-Identifier: MIT
"""pinmem.torch: a DataLoader whose workers write batches straight into pinned memory.

    from pinmem.torch import DataLoader
    loader = DataLoader(dataset, batch_size=256, shuffle=True, num_workers=4,
                        device="cuda")
    for x, y in loader:          # x, y already on the GPU
        ...

With torch.utils.data.DataLoader(pin_memory=True), workers collate each
batch into shared memory, then the main process's pin thread copies it again
into page-locked memory before the copy to the GPU can be asynchronous.
Here the ring the workers write into is itself pinned: one memfd, mapped
shared by the main process and its forked workers, pinned by /dev/pinmem
(budgeted, FOLL_LONGTERM) or with mlock when the module is not there, and
registered with CUDA.  A worker stacks the batch's samples straight into a
slot and sends only the slot number and the batch's layout over a pipe; the
main process makes tensors that view the slot (no CPU copy) and, with a
device, queues the host-to-device copy on its own CUDA stream.  A slot goes
back to the workers only once nothing can still read it: with a device,
when the copy's CUDA event has completed; without one, when every tensor
of the batch is gone (hold a batch past the next step and the loader waits
for a free slot; hold all of them and it raises instead of hanging).

Without a device the ring is still CUDA-registered, so the usual
`x = x.cuda(non_blocking=True)` is an asynchronous copy that reads the slot
after the host tensor is dropped.  So when CUDA is initialised, a slot whose
tensors are gone is fenced: before reusing it the loader records a CUDA event
on the current stream and the slot goes back to the workers only once that
event completed: queue the copy on the current stream (or make it wait for
yours) before dropping the batch.

A batch bigger than a slot is delivered anyway, by the ordinary unpinned
path (the worker sends it through shared memory, as torch's DataLoader
does), with a one-time warning naming the slot_bytes= to pass;
oversize="raise" raises SlotTooSmallError instead.

Workers are forked (they inherit the ring's mapping) and never use the
main process's pinmem context.  A worker's exception is raised again in the
main process with the worker's traceback; a worker that dies is reported
(which one, exit code or signal) within a second, without a hang; Ctrl-C,
close() and garbage collection stop the workers and unpin the ring once no
batch tensor is left.

An IterableDataset (a WebDataset-style stream of samples) works as with
torch's DataLoader: each worker iterates its own copy (shard it with
torch.utils.data.get_worker_info()), batches go round-robin over the workers
still producing, a worker's short last batch is kept unless drop_last, and
shuffle, sampler and batch_sampler are refused.  Without slot_bytes= the
main process takes one sample from its own iterator to size the slots.
"""
import collections
import gc
import itertools
import os
import queue
import random
import signal
import sys
import threading
import traceback
import warnings
import weakref

import numpy
import torch
import torch.multiprocessing as _unused_mp  # noqa: F401  (torch's pickling of tensors)
import multiprocessing
from torch.utils.data import (BatchSampler, IterableDataset, RandomSampler,
                              SequentialSampler)

from . import _pinmem
from ._device import default_cuda_device
from ._collate import (SlotTooSmallError, SlotWriter, _Overflow, collate_into,
                       materialize, nbytes_needed, place)

__all__ = ["DataLoader", "SlotTooSmallError", "WorkerError"]

_POLL_S = 0.5
_PAGE = os.sysconf("SC_PAGE_SIZE")


class WorkerError(RuntimeError):
    """A worker died, or raised an exception that cannot be raised again as its own type."""


class _ExceptionWrapper:
    """An exception from a worker, its type and traceback text (torch's ExceptionWrapper idea)."""

    def __init__(self, where):
        exc_type, exc, _ = sys.exc_info()
        self.exc_type = exc_type
        self.msg = "Caught %s in %s.\nOriginal %s" % (
            exc_type.__name__, where, "".join(traceback.format_exception(*sys.exc_info())))

    def reraise(self):
        if self.exc_type is KeyError:
            # KeyError's str() quotes its argument; keep the traceback readable.
            raise KeyError(self.msg)
        try:
            exc = self.exc_type(self.msg)
        except Exception:
            raise WorkerError(self.msg) from None
        raise exc


class _Unpinned:
    """A batch too big for a slot, delivered as ordinary tensors (need: the bytes it takes)."""

    def __init__(self, batch, need):
        self.batch, self.need = batch, need


def _too_big(samples, collate_fn, batch_idx, slot_bytes, oversize):
    """The batch that overflowed its slot: an _Unpinned one, or SlotTooSmallError with oversize="raise"."""
    from torch.utils.data import default_collate
    full = default_collate(samples) if collate_fn is None else collate_fn(samples)
    need = nbytes_needed(full)
    if oversize == "raise":
        raise SlotTooSmallError(
            "batch %d needs %d bytes but a slot holds %d; pass slot_bytes=%d (or more) to "
            "pinmem.torch.DataLoader" % (batch_idx, need, slot_bytes, _page_up(need))) from None
    return _Unpinned(full, need)


def _page_up(n):
    return (n + _PAGE - 1) // _PAGE * _PAGE


class _Exhausted:
    """A worker's iterable dataset has no batch for the task it was given."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _IterableSamples:
    """A worker's (or the main process's) iterator over an IterableDataset, one per epoch."""

    def __init__(self, dataset, batch_size, drop_last):
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.epoch, self.it = None, None

    def take(self, epoch):
        """The samples of this worker's next batch of epoch, or None when it has no more."""
        if epoch != self.epoch:
            self.epoch, self.it = epoch, iter(self.dataset)
        if self.it is None:
            return None
        samples = list(itertools.islice(self.it, self.batch_size))
        if len(samples) < self.batch_size:
            self.it = None          # ended: every later task of this epoch gets None
            if not samples or self.drop_last:
                return None
        return samples


def _worker_loop(dataset, index_q, result_q, ring_mm, slot_bytes, collate_fn, base_seed,
                 worker_id, num_workers, init_fn, parent_pid, oversize, iterable):
    # The main process handles Ctrl-C and stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    seed = base_seed + worker_id
    random.seed(seed)
    torch.manual_seed(seed)
    from torch.utils.data._utils import worker as tw
    numpy.random.seed(tw._generate_state(base_seed, worker_id))
    tw._worker_info = tw.WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed,
                                    dataset=dataset)
    ring = torch.frombuffer(ring_mm, dtype=torch.uint8)
    try:
        if init_fn is not None:
            init_fn(worker_id)
    except Exception:
        result_q.put((None, None, None, _ExceptionWrapper("worker %d's worker_init_fn" % worker_id)))
        return
    while True:
        try:
            task = index_q.get(timeout=_POLL_S)
        except queue.Empty:
            if os.getppid() != parent_pid:
                return          # the main process is gone
            continue
        if task is None:
            return
        batch_idx, slot, indices = task
        try:
            if iterable is None:
                samples = [dataset[i] for i in indices]
            else:
                samples = iterable.take(indices)    # indices: the epoch
                if samples is None:
                    result_q.put((batch_idx, slot, _Exhausted(worker_id), None))
                    continue
            w = SlotWriter(ring, slot * slot_bytes, slot_bytes)
            try:
                layout = collate_into(samples, w) if collate_fn is None else place(collate_fn(samples), w)
            except _Overflow:
                layout = _too_big(samples, collate_fn, batch_idx, slot_bytes, oversize)
            del samples
            result_q.put((batch_idx, slot, layout, None))
        except Exception:
            result_q.put((batch_idx, slot, None,
                          _ExceptionWrapper("pinmem.torch worker %d (pid %d)" % (worker_id, os.getpid()))))


def _device_of(device):
    if device is None:
        return None
    d = torch.device(device)
    if d.type == "cpu":
        return None
    if d.type != "cuda":
        raise ValueError("pinmem.torch.DataLoader: device must be None, 'cpu' or a CUDA device, not %r"
                         % (device,))
    return torch.device("cuda", d.index if d.index is not None else torch.cuda.current_device())


class _Ring:
    """The slot ring: a memfd mapped shared (workers inherit it), pinned and registered once."""

    def __init__(self, ctx, slots, slot_bytes, pin):
        import mmap
        self.slots, self.slot_bytes = slots, slot_bytes
        # The GPU the ring is registered with (None: not registered): its fences go there,
        # whichever thread (a prefetch thread, the garbage collector) drops a slot.
        dev = ctx.info().get("cuda_device", -1)
        self.device = torch.device("cuda", dev) if dev >= 0 else None
        fd = os.memfd_create("pinmem-loader-ring", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, slots * slot_bytes)
            self.mm = mmap.mmap(fd, slots * slot_bytes, mmap.MAP_SHARED,
                                mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.buf = ctx.pin(self.mm, pin=pin)
        self.free = collections.deque(range(slots))
        # Weak references to slot views whose tensors are all gone.  The callback is
        # deque.append, C code: no Python code runs at garbage collection, where a
        # Ctrl-C would be swallowed as an "ignored exception".
        self.dead = collections.deque()
        self._views = {}                    # weakref -> slot
        # (CUDA event, slot): dropped by the host, maybe still read by GPU work queued before.
        self.fenced = []
        self.warned_oversize = False

    def slot_view(self, slot):
        """A view of one slot; when it and every tensor made from it are gone, the slot is free."""
        v = self.buf.view(slot * self.slot_bytes, (self.slot_bytes,))
        self._views[weakref.ref(v, self.dead.append)] = slot
        return v

    def _collect_dead(self):
        # The ring is CUDA-registered: a copy queued from a slot (x.cuda(non_blocking=True))
        # may still read it after the last host tensor is gone.  An event recorded now on
        # the ring's GPU's current stream comes after that copy.
        while self.dead:
            slot = self._views.pop(self.dead.popleft())
            if self.device is not None and torch.cuda.is_initialized():
                ev = torch.cuda.Event()
                ev.record(torch.cuda.current_stream(self.device))
                self.fenced.append((ev, slot))
            else:
                self.free.append(slot)

    def take(self, wait=False):
        """A slot nothing reads any more, or None; wait: block on the oldest GPU fence if need be."""
        self._collect_dead()
        done = [f for f in self.fenced if f[0].query()]
        for f in done:
            self.fenced.remove(f)
            self.free.append(f[1])
        if not self.free and self.fenced and wait:
            ev, slot = self.fenced.pop(0)
            ev.synchronize()
            self.free.append(slot)
        return self.free.popleft() if self.free else None

    def quiesce(self):
        """Wait for every GPU read of a dropped slot (before the ring is unpinned)."""
        self._collect_dead()
        while self.fenced:
            ev, slot = self.fenced.pop(0)
            ev.synchronize()
            self.free.append(slot)

    def __del__(self):
        try:
            self.quiesce()
        except Exception:
            pass


class DataLoader:
    """DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
    num_workers=0, collate_fn=None, pin_memory=True, drop_last=False, timeout=0,
    worker_init_fn=None, multiprocessing_context=None, generator=None, *,
    prefetch_factor=None, persistent_workers=False, pin_memory_device="", in_order=True,
    device=None, slot_bytes=None, slots=None, ctx=None, module="auto", pin="auto",
    oversize="copy")

    torch.utils.data.DataLoader's arguments and batches (the same for the same
    dataset, sampler and generator seed), with the batches collated by the
    workers straight into a pinned, CUDA-registered ring (see the module doc).
    device: None yields tensors viewing the pinned slot; "cuda[:N]" yields
    device tensors, copied asynchronously on the loader's CUDA stream (the
    current stream is made to wait for the copy).  slot_bytes: bytes per
    slot (default: one sample's collated size times batch_size, plus an
    eighth); a bigger batch is delivered unpinned with a one-time warning
    saying what to pass (oversize="raise": SlotTooSmallError instead).
    slots: ring slots (default num_workers * prefetch_factor + 2).  ctx: a
    pinmem.Context (default: one opened with module=module, the CUDA
    backend with a device, the automatic one without, on this rank's GPU as
    pinmem.open picks it: torch's current device once set, else $LOCAL_RANK
    when several GPUs are visible, else this thread's current one).  pin:
    "auto" (module, else mlock), "module", "mlock".  pin_memory is accepted for compatibility:
    the ring is always pinned; pin_memory_device="cuda:N" registers it on
    GPU N.  Workers are forked (they inherit the ring's mapping), so
    multiprocessing_context may only be None or "fork".  Batches always come
    in order (in_order=False is accepted).  An IterableDataset is iterated by each
    worker as torch's DataLoader does (see the module doc).
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=True, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True, device=None, slot_bytes=None, slots=None, ctx=None,
                 module="auto", pin="auto", oversize="copy"):
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            # torch.utils.data.DataLoader's rules and words
            for name, v in (("shuffle", shuffle), ("sampler", sampler),
                            ("batch_sampler", batch_sampler)):
                if v not in (None, False):
                    raise ValueError("DataLoader with IterableDataset: expected unspecified %s "
                                     "option, but got %s=%r" % (name, name, v))
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if oversize not in ("copy", "raise"):
            raise ValueError("oversize option should be 'copy' or 'raise'")
        if prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor < 1:
            raise ValueError("prefetch_factor option should be a positive int")
        start = (multiprocessing_context if isinstance(multiprocessing_context, (str, type(None)))
                 else multiprocessing_context.get_start_method())
        if start not in (None, "fork"):
            raise ValueError("pinmem.torch.DataLoader: workers are forked (they inherit the pinned "
                             "ring's mapping); multiprocessing_context=%r is not supported, pass "
                             "None or 'fork'" % (start,))
        ring_device = _device_of(pin_memory_device or None)
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
        else:
            if batch_size is None:
                raise ValueError("pinmem.torch.DataLoader needs a batch_size (batches are what "
                                 "go into slots)")
            if sampler is not None and shuffle:
                raise ValueError("sampler option is mutually exclusive with shuffle")
            if self._iterable:
                pass            # the workers' iterators batch (batch_sampler stays None)
            elif sampler is None:
                sampler = (RandomSampler(dataset, generator=generator) if shuffle
                           else SequentialSampler(dataset))
            if not self._iterable:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.pin_memory = True
        self.device = _device_of(device)
        self.multiprocessing_context = multiprocessing_context
        self.pin_memory_device, self.in_order = pin_memory_device, in_order
        self._ring_device = self.device if self.device is not None else ring_device
        self._slot_bytes = slot_bytes
        self._slots = slots or max(2, num_workers * prefetch_factor) + 2
        self._ctx_arg, self._module, self._pin = ctx, module, pin
        self.oversize = oversize
        self._ring = None
        self._ctx = None
        self._iter = None

    def __len__(self):
        return _batches(self)

    # -- the ring --
    def _guess_slot_bytes(self):
        """One sample's collated size times the batch size, plus an eighth.

        The probe reads dataset[0] in the main process once, with every random
        number generator's state put back after, so the batches stay those
        torch's DataLoader gives for the same seeds."""
        n = self.batch_size if self._iterable else getattr(self.batch_sampler, "batch_size", None)
        if not n or (not self._iterable and len(self.dataset) == 0):
            raise ValueError("pinmem.torch.DataLoader: pass slot_bytes= (the largest batch's bytes) "
                             "with this batch_sampler")
        from torch.utils.data import default_collate
        py_state, np_state = random.getstate(), numpy.random.get_state()
        with torch.random.fork_rng(devices=[]):
            if self._iterable:
                sample = next(iter(self.dataset), None)
                if sample is None:
                    return _PAGE        # an empty dataset: no batch will need a slot
            else:
                sample = self.dataset[0]
            one = nbytes_needed(default_collate([sample]) if self.collate_fn is None
                                else self.collate_fn([sample]))
        random.setstate(py_state)
        numpy.random.set_state(np_state)
        need = one * n + (one * n) // 8
        return max(_PAGE, (need + _PAGE - 1) // _PAGE * _PAGE)

    def _ensure_ring(self):
        if self._ring is not None:
            return self._ring
        if self._ctx_arg is not None:
            self._ctx = self._ctx_arg
        else:
            # Without a device the ring is still registered with CUDA when there
            # is a GPU, so the caller's own .to(device, non_blocking=True) is async.
            backend = "cuda" if self.device is not None else "auto"
            self._ctx = _pinmem.Context(module=self._module, backend=backend,
                                        cuda_device=self._cuda_device())
        sb = _page_up(self._slot_bytes or self._guess_slot_bytes())
        self._ring = _Ring(self._ctx, self._slots, sb, self._pin)
        return self._ring

    def _cuda_device(self):
        """The GPU the ring is registered on: this rank's, not GPU 0 in every rank."""
        if self._ring_device is not None:
            return self._ring_device.index
        return default_cuda_device()

    def _current_iter(self):
        it = self._iter
        return it() if isinstance(it, weakref.ref) else it

    @property
    def pin_mode(self):
        """How the ring is pinned: 'module' or 'mlock' ('' before the first iteration)."""
        return self._ring.buf.pin_mode if self._ring is not None else ""

    @property
    def slot_bytes(self):
        return self._ring.slot_bytes if self._ring is not None else self._slot_bytes

    def __iter__(self):
        ring = self._ensure_ring()
        it = self._current_iter()
        if self.persistent_workers and it is not None and it.alive:
            it.reset()
        else:
            if it is not None:
                it.shutdown()
            it = _Iter(self, ring)
            # Persistent workers belong to the loader; a one-pass iterator is only
            # weakly referenced by it, so leaving a for loop stops its workers at once.
            self._iter = it if self.persistent_workers else weakref.ref(it)
        # An epoch keeps its loader alive (`for x in DataLoader(...)` drops the
        # loader at once); the iterator lets go at the epoch's end, so no reference
        # cycle outlives an epoch and dropping the loader then stops the workers.
        it._owner = self
        return it

    def close(self):
        """Stop the workers and unpin the ring (once no batch tensor is left)."""
        it = self._current_iter()
        if it is not None:
            it.shutdown()
        self._iter = None
        self._ring = None
        if self._ctx is not None and self._ctx_arg is None:
            self._ctx.close()
        self._ctx = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Settings:
    """What an iterator needs of its DataLoader, without referencing it."""

    def __init__(self, lo):
        for k in ("dataset", "batch_sampler", "num_workers", "collate_fn", "timeout",
                  "worker_init_fn", "generator", "prefetch_factor", "persistent_workers",
                  "oversize", "batch_size", "drop_last", "_iterable"):
            setattr(self, k, getattr(lo, k))

    def __len__(self):
        return _batches(self)


def _batches(lo):
    """len(): the batch sampler's, or for an IterableDataset the dataset's len() in batches."""
    if not lo._iterable:
        return len(lo.batch_sampler)
    n = len(lo.dataset)         # TypeError without __len__, as torch's
    return n // lo.batch_size if lo.drop_last else -(-n // lo.batch_size)


class _Iter:
    """One pass (or, with persistent workers, every pass) over the loader."""

    def __init__(self, loader, ring):
        # The loader's settings, copied: see DataLoader.__iter__ on references.
        self.loader = _Settings(loader)
        self._owner = None
        self.ring = ring
        self.device = loader.device
        self.workers = []
        self.alive = False
        self._epoch = 0
        self._sampler_iter = self._tasks()
        # As torch's _BaseDataLoaderIter: the workers' base seed comes from the
        # generator after the sampler iterator is made, so shuffles match.
        self._base_seed = torch.empty((), dtype=torch.int64).random_(
            generator=loader.generator).item()
        if self.device is not None:
            self._copy_stream = torch.cuda.Stream(self.device)
        self._pending = collections.deque()   # (event, host batch) of copies in flight
        if loader.num_workers > 0:
            self._start_workers()
        else:
            self._inline_ring = torch.frombuffer(ring.mm, dtype=torch.uint8)
            if loader._iterable:
                self._inline_samples = _IterableSamples(loader.dataset, loader.batch_size,
                                                        loader.drop_last)
        self._reset_state()

    def _tasks(self):
        """What each batch task carries: its indices, or with an IterableDataset the epoch."""
        if self.loader._iterable:
            return itertools.repeat(self._epoch)
        return iter(self.loader.batch_sampler)

    def _start_workers(self):
        mp = multiprocessing.get_context("fork")
        self._result_q = mp.Queue()
        self._index_qs = []
        lo = self.loader
        for i in range(lo.num_workers):
            iq = mp.Queue()
            iq.cancel_join_thread()
            w = mp.Process(target=_worker_loop, daemon=True,
                           args=(lo.dataset, iq, self._result_q, self.ring.mm, self.ring.slot_bytes,
                                 lo.collate_fn, self._base_seed, i, lo.num_workers,
                                 lo.worker_init_fn, os.getpid(), lo.oversize,
                                 _IterableSamples(lo.dataset, lo.batch_size, lo.drop_last)
                                 if lo._iterable else None))
            w.start()
            self._index_qs.append(iq)
            self.workers.append(w)
        self.alive = True

    def _reset_state(self):
        self._send_idx = 0          # next batch to hand to a worker
        self._rcvd_idx = 0          # next batch to yield
        self._outstanding = {}      # batch_idx -> slot, sent but not back
        self._ready = {}            # batch_idx -> (slot, layout) back, not yet yielded
        self._errors = {}           # batch_idx -> _ExceptionWrapper, raised in batch order
        self._exhausted = False
        self._worker_rr = 0
        self._active = set(range(self.loader.num_workers))    # workers still producing
        self._skipped = set()       # batch_idx a worker had no batch for

    def reset(self):
        """A new epoch with the same (persistent) workers."""
        self._drain()
        self._epoch += 1
        self._sampler_iter = self._tasks()
        self._reset_state()

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        return self

    # -- slots --
    def _reap_copies(self, wait=False):
        while self._pending and (wait or self._pending[0][0].query()):
            ev, _host = self._pending.popleft()
            ev.synchronize()
            wait = False

    def _take_slot(self):
        slot = self.ring.take()
        if slot is None and self._pending:
            self._reap_copies()
            slot = self.ring.take()
        if slot is None and self._pending:
            self._reap_copies(wait=True)
            slot = self.ring.take()
        return slot if slot is not None else self.ring.take(wait=True)

    # -- the pipeline --
    def _fill(self):
        """Give workers batches while slots are free, up to prefetch_factor per worker."""
        lo = self.loader
        limit = max(1, lo.num_workers) * lo.prefetch_factor
        while not self._exhausted and len(self._outstanding) + len(self._ready) < limit:
            slot = self._take_slot()
            if slot is None:
                return
            try:
                indices = next(self._sampler_iter)
            except StopIteration:
                self.ring.free.appendleft(slot)
                self._exhausted = True
                return
            idx = self._send_idx
            self._send_idx += 1
            if lo.num_workers == 0:
                self._run_inline(idx, slot, indices)
                continue
            # round robin, skipping the workers whose iterable ended, as torch's DataLoader
            for _ in range(lo.num_workers):
                worker = self._worker_rr
                self._worker_rr = (self._worker_rr + 1) % lo.num_workers
                if worker in self._active:
                    break
            self._outstanding[idx] = slot
            self._index_qs[worker].put((idx, slot, indices))

    def _run_inline(self, idx, slot, indices):
        lo = self.loader
        if lo._iterable:
            try:
                samples = self._inline_samples.take(indices)
            except BaseException:
                self.ring.free.append(slot)
                raise
            if samples is None:
                self.ring.free.append(slot)
                self._exhausted = True
                return
        else:
            samples = [lo.dataset[i] for i in indices]
        w = SlotWriter(self._inline_ring, slot * self.ring.slot_bytes, self.ring.slot_bytes)
        try:
            layout = collate_into(samples, w) if lo.collate_fn is None else place(lo.collate_fn(samples), w)
        except _Overflow:
            self.ring.free.append(slot)
            self._ready[idx] = (None, _too_big(samples, lo.collate_fn, idx, self.ring.slot_bytes,
                                               lo.oversize))
            return
        except BaseException:
            self.ring.free.append(slot)
            raise
        self._ready[idx] = (slot, layout)

    def _check_workers(self):
        for i, w in enumerate(self.workers):
            if not w.is_alive():
                code = w.exitcode
                how = ("killed by signal %s" % signal.Signals(-code).name if code is not None and code < 0
                       else "exit code %s" % code)
                raise WorkerError("pinmem.torch: worker %d (pid %d) exited unexpectedly (%s)"
                                  % (i, w.pid, how))

    def _receive(self):
        waited = 0.0
        while True:
            try:
                return self._result_q.get(timeout=_POLL_S)
            except queue.Empty:
                self._check_workers()
                waited += _POLL_S
                if self.loader.timeout and waited >= self.loader.timeout:
                    raise RuntimeError("pinmem.torch: no batch from the workers after %s s"
                                       % self.loader.timeout)

    def __next__(self):
        if self.ring is None:
            raise StopIteration          # shut down (an error, close()): nothing more comes
        try:
            return self._next()
        except StopIteration:
            self._owner = None
            if not self.loader.persistent_workers:
                self.shutdown()
            raise
        except BaseException:
            # A worker's error, a dead worker, Ctrl-C: the workers go, the pins with the ring.
            self.shutdown()
            raise

    def _next(self):
        while True:
            self._fill()
            if self._rcvd_idx in self._errors:
                self._rcvd_idx += 1
                self._errors.pop(self._rcvd_idx - 1).reraise()   # in batch order, as DataLoader does
            if self._rcvd_idx in self._skipped:
                self._skipped.discard(self._rcvd_idx)
                self._rcvd_idx += 1
                continue
            if self._rcvd_idx in self._ready:
                slot, layout = self._ready.pop(self._rcvd_idx)
                self._rcvd_idx += 1
                return self._deliver(slot, layout)
            if self._exhausted and not self._outstanding and not self._ready and not self._errors:
                raise StopIteration
            if not self._outstanding:
                # No slot free and none coming back: batches still referenced hold them.
                gc.collect()
                if self.ring.free or self.ring.fenced or self.ring.dead:
                    continue
                raise RuntimeError(
                    "pinmem.torch: all %d slots are held by batches still referenced (a slot is "
                    "reused once its batch's tensors are gone); drop or .clone() the batches you "
                    "keep, or pass a larger slots=" % self.ring.slots)
            idx, slot, layout, err = self._receive()
            if err is not None:
                if idx is None:
                    err.reraise()        # worker_init_fn: no batch to wait for
                self._outstanding.pop(idx, None)
                self.ring.free.append(slot)
                self._errors[idx] = err  # batches before it are delivered first
                continue
            self._outstanding.pop(idx)
            if isinstance(layout, _Exhausted):
                self.ring.free.append(slot)
                self._skipped.add(idx)
                self._active.discard(layout.worker_id)
                self._exhausted = self._exhausted or not self._active
                continue
            if isinstance(layout, _Unpinned):
                self.ring.free.append(slot)
                slot = None
            self._ready[idx] = (slot, layout)

    def _deliver_unpinned(self, big):
        if not self.ring.warned_oversize:
            self.ring.warned_oversize = True
            warnings.warn("pinmem.torch: a batch needs %d bytes but a slot holds %d: such batches "
                          "are delivered unpinned (an extra copy); pass slot_bytes=%d (or more) to "
                          "pinmem.torch.DataLoader" % (big.need, self.ring.slot_bytes,
                                                       _page_up(big.need)),
                          RuntimeWarning, stacklevel=4)
        if self.device is None:
            return big.batch
        return _map_tensors(big.batch, lambda t: t.to(self.device, non_blocking=True))

    def _deliver(self, slot, layout):
        if slot is None:
            return self._deliver_unpinned(layout)
        view = self.ring.slot_view(slot)
        if self.device is None:
            return materialize(layout, view)
        host = []
        cur = torch.cuda.current_stream(self.device)

        def copy(t):
            host.append(t)
            with torch.cuda.stream(self._copy_stream):
                d = t.to(self.device, non_blocking=True)
            d.record_stream(cur)
            return d
        out = materialize(layout, view, copy)
        ev = torch.cuda.Event()
        ev.record(self._copy_stream)
        cur.wait_stream(self._copy_stream)
        # The slot is free once this event completed and the host views are dropped.
        self._pending.append((ev, host))
        del view
        return out

    def _drain(self):
        """Wait for the batches handed to workers, so their slots come back."""
        while self._outstanding and self.alive:
            idx, slot, layout, err = self._receive()
            if idx is None:
                continue
            self._outstanding.pop(idx, None)
            self.ring.free.append(slot)
        for idx, (slot, _layout) in list(self._ready.items()):
            if slot is not None:
                self.ring.free.append(slot)
        self._ready.clear()
        self._errors.clear()

    def shutdown(self):
        """Stop the workers; the ring is then held only by batches still referenced."""
        if self.alive:
            self.alive = False
            for q in self._index_qs:
                try:
                    q.put(None)
                except Exception:
                    pass
            for w in self.workers:
                w.join(timeout=2)
            for w in self.workers:
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=2)
            for q in self._index_qs + [self._result_q]:
                q.cancel_join_thread()
                q.close()
            self.workers = []
        if self.ring is not None:
            # Batches in flight will never be delivered: their slots are free again.
            for slot in list(self._outstanding.values()) + [s for s, _ in self._ready.values()
                                                            if s is not None]:
                self.ring.free.append(slot)
            if self.device is not None:
                # Every copy queued from the ring, not only the oldest pending one, must be
                # done before the ring can be unregistered, unpinned and unmapped.
                self._copy_stream.synchronize()
            if self._pending:
                self._reap_copies(wait=True)
        self._outstanding.clear()
        self._ready.clear()
        self._errors.clear()
        self._pending.clear()
        self._drop_ring()

    def _drop_ring(self):
        # An exception's traceback keeps this iterator alive: it must not keep the pins.
        self.ring = None
        self._inline_ring = None
        self._owner = None

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass


def _map_tensors(obj, fn):
    """obj (a collated batch) with fn applied to each tensor."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return type(obj)((k, _map_tensors(v, fn)) for k, v in obj.items())
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map_tensors(v, fn) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(v, fn) for v in obj)
    return obj
