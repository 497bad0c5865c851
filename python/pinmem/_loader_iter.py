# SPDX-License-Identifier: MIT
"""The iterators of pinmem.torch.DataLoader: torch's, with batches in the pinned ring.

Both are torch's _BaseDataLoaderIter (sampler iterator, base seed, DataPipe
seeding, IterableDataset length warnings: torch's code) with torch's
_next_data logic; what differs is where a batch lies.  Each iterator owns
its ring (persistent workers: the one iterator the loader keeps owns it for
every epoch): the ring is made once the first batch says how big a slot
must be (or at once when that is known), and released when the iterator
ends, is shut down or is dropped.  A batch that cannot have a slot comes in
ordinary memory, as torch's would: the first batches of the first epoch
(they size the slots), a batch larger than a slot, and a batch asked for
while every slot is held by batches still referenced.
"""
import atexit
import collections
import errno
import gc
import itertools
import os
import queue
import signal
import sys
import time
import warnings
import weakref

import torch
import torch.multiprocessing as torch_mp
from torch._utils import ExceptionWrapper
from torch.utils.data import _utils as tu
from torch.utils.data import dataloader as tdl
from torch.utils.data._utils.collate import default_collate

from . import _state, _worker
from ._collate import SlotTooSmallError, SlotWriter
from ._ring import Ring, fmt_bytes, page_up, slot_batch

# When the loader may next run a full collection of its own (the collector is
# the process's: one budget for all loaders).
_full_gc = type("_FullGC", (), {"next_at": 0.0})()

_POLL_S = 0.5
# DataPipes, while torch still has them.
_DATAPIPES = tuple(c for c in (getattr(tdl, "IterDataPipe", None),
                               getattr(tdl, "MapDataPipe", None)) if c is not None)
_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH_DATA = os.path.dirname(os.path.abspath(tdl.__file__))

# Live multi-process iterators, stopped at interpreter exit before multiprocessing's
# own exit handler and before finalization (where no thread can start).
_live = weakref.WeakSet()


_exiting = False


@atexit.register
def _stop_all_at_exit():
    global _exiting
    _exiting = True
    for it in list(_live):
        try:
            it._shutdown_workers()
        except Exception:
            pass


def _raise_if_out_of_fds():
    """torch's _try_get_data: a batch in ordinary memory comes as file descriptors, which
    the socket drops at the open-files limit ("received 0 items of ancdata"); say so as
    torch's loader does (NOTE [ DataLoader on Linux and open files limit ] there)."""
    import tempfile
    try:
        files = [tempfile.TemporaryFile() for _ in range(10)]
    except OSError as e:
        if e.errno == errno.EMFILE:
            raise RuntimeError(
                "Too many open files. Communication with the workers is no longer possible. "
                "Please increase the limit using `ulimit -n` in the shell or change the "
                "sharing strategy by calling "
                "`torch.multiprocessing.set_sharing_strategy('file_system')` at the "
                "beginning of your code") from None
        return
    for f in files:
        f.close()


class WorkerError(RuntimeError):
    """A worker died, or raised an exception that cannot be raised again as its own type."""


class PinningWarning(RuntimeWarning):
    """pinmem.torch gave up some speed (pinning, a slot) to keep going as torch's DataLoader would."""


def _user_stacklevel():
    """warnings.warn's stacklevel of the first frame outside pinmem and torch.utils.data."""
    f, level = sys._getframe(1), 1
    while f is not None:
        path = os.path.dirname(os.path.abspath(f.f_code.co_filename))
        if not (path == _HERE or path.startswith(_TORCH_DATA)):
            return level
        f, level = f.f_back, level + 1
    return level


class Shared:
    """What a loader and its iterators share, without the iterators referencing the loader:
    the pinmem context, the slot size learned, the pin mode obtained, warnings given."""

    def __init__(self, *, ctx, module, pin, device, ring_device, slot_bytes, slots, oversize,
                 what):
        self.ctx_arg, self.module, self.pin = ctx, module, pin
        self.device, self.ring_device = device, ring_device
        self.given_slot_bytes = slot_bytes
        self.slot_bytes = page_up(slot_bytes) if slot_bytes else None
        self.slots, self.oversize, self.what = slots, oversize, what
        self.ctx = None
        self.pin_mode = ""
        self.warned = set()
        self.iterators = weakref.WeakSet()
        self.spare = None               # the last ring's memory, unpinned (see _ring.Spare)
        self.last = None                # weak reference to the latest iterator (state_dict)
        self.last_done = False          # whether its epoch ended
        self.resume = None              # a state the next iterator starts from

    def __getstate__(self):
        # A copy (copy.deepcopy of the loader, or a pickle) starts with no context, ring
        # or warnings of its own; a context given as ctx= is shared, not copied.
        st = dict(self.__dict__, ctx=None, pin_mode="", warned=set(), spare=None, resume=None)
        del st["iterators"], st["last"]
        return st

    def __setstate__(self, st):
        self.__dict__.update(st)
        self.iterators = weakref.WeakSet()
        self.last = None

    def current(self):
        return self.last() if self.last is not None else None

    def __deepcopy__(self, memo):
        new = Shared.__new__(Shared)
        new.__setstate__(self.__getstate__())
        return new

    def __reduce__(self):
        st = self.__getstate__()
        st["ctx_arg"] = None        # a Context does not travel to another process
        return (Shared.__new__, (Shared,), st)

    def keep_spare(self, spare):
        old, self.spare = self.spare, spare
        if old is not None:
            old.close()

    def drop_spare(self):
        self.keep_spare(None)

    def context(self):
        if self.ctx_arg is not None:
            return self.ctx_arg
        if self.ctx is None:
            from . import _pinmem
            from ._device import default_cuda_device
            # Without a device the ring is still registered with CUDA when there is a
            # GPU, so the caller's own .to(device, non_blocking=True) is asynchronous.
            backend = "cuda" if self.device is not None else "auto"
            dev = (self.ring_device.index if self.ring_device is not None
                   else default_cuda_device())
            self.ctx = _pinmem.Context(module=self.module, backend=backend, cuda_device=dev)
        return self.ctx

    def warn(self, key, msg):
        if key not in self.warned:
            self.warned.add(key)
            warnings.warn(msg, PinningWarning, stacklevel=_user_stacklevel())


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


class _RingIter(tdl._BaseDataLoaderIter):
    """What both iterators do with the ring: make it, hand out slots, deliver batches."""

    @property
    def _epoch_done(self):
        return self._done_epoch

    @_epoch_done.setter
    def _epoch_done(self, done):
        # The loader's state_dict() tells whether the latest epoch ended, also once its
        # iterator is gone.
        self._done_epoch = done
        if self._shared_ref.last is not None and self._shared_ref.last() is self:
            self._shared_ref.last_done = done

    def __init__(self, loader, shared, resume):
        # Resuming mid-epoch leaves torch's global random state as it was (the epoch's draws
        # were made before the state was saved); between epochs the epoch starts from the
        # saved state and draws from it, as the uninterrupted run did.
        saved = torch.get_rng_state() if (resume is not None and resume["mid_epoch"]
                                           and loader.generator is None) else None
        rng = _state.rng_state(loader)          # what this first epoch starts from
        super().__init__(loader)
        self._resumed_sampler = None
        self._refused = None            # the error that ended this iterator (see _sized_by)
        self._shared_ref = shared
        shared.last = weakref.ref(self)
        self._epoch_rng, self._epoch_fresh, self._epoch_done = rng, True, False
        self._discard = 0
        self._forward = 0               # batches to skip once the sampler iterator is made
        try:
            if resume is not None:
                _state.resume(self, loader, resume)
                self._forward = resume["_num_yielded"]
        finally:
            if saved is not None:
                torch.set_rng_state(saved)
        shared.last = weakref.ref(self)

    def _skip_discarded(self):
        """An IterableDataset resumed mid-epoch: its first batches again, dropped."""
        while self._discard:
            self._discard -= 1
            self._next_one()

    def _ring_init(self, loader, shared):
        self._shared = shared
        self._ring = None
        self._ring_failed = False
        self._device = shared.device
        self._main_pid = os.getpid()
        self._pending = []          # (CUDA event, host views) of device copies in flight
        if self._device is not None:
            self._copy_stream = torch.cuda.Stream(self._device)
        self._slots = shared.slots or (self._num_workers * self._prefetch_factor + 2
                                       if self._num_workers else 3)
        self._collate = _worker.SlotCollate(self._collate_fn,
                                            self._auto_collation and self._collate_fn is default_collate)
        if shared.slot_bytes:
            self._make_ring(shared.slot_bytes)
        shared.iterators.add(self)

    # -- the ring --
    def _make_ring(self, slot_bytes):
        sh = self._shared
        ctx = sh.context()          # module="require" without a module: an error, as asked
        spare, sh.spare = sh.spare, None
        try:
            self._ring = Ring(ctx, self._slots, slot_bytes, sh.pin, sh.what, spare)
        except Exception as e:
            if sh.pin != "auto" or ctx.closed:
                raise
            # The ring itself could not be made (no memfd, ...): torch's path, unpinned.
            self._ring_failed = True
            sh.pin_mode = "none"
            sh.warn("ring", "pinmem.torch: the batch ring could not be made (%s); batches come in "
                    "ordinary memory as with torch.utils.data.DataLoader. `pinctl doctor` "
                    "tells what this machine allows" % e)
            return
        sh.pin_mode = self._ring.pin_mode
        if self._ring.notes:
            sh.warn("pin", "pinmem.torch: the batch ring (%d slots of %s) is pinned as %r: %s. "
                    "Run `pinctl doctor` to see why and what to change (the module, its "
                    "budgets, ulimit -l), or pass pin= to make this an error" % (
                        self._slots, fmt_bytes(slot_bytes), self._ring.pin_mode,
                        "; ".join(self._ring.notes)))

    def _sized_by(self, unpinned):
        """A batch in ordinary memory arrived: with no ring yet, it says how big slots are."""
        if self._ring is None and not self._ring_failed and not self._released:
            need = page_up(unpinned.need + unpinned.need // 8)
            if self._shared.slot_bytes is None:
                self._shared.slot_bytes = need
            try:
                self._make_ring(max(need, self._shared.slot_bytes))
            except Exception as e:
                # An explicit pin= refused (or module="require" found none): this iterator
                # is done; its workers stop, and every later next() raises the same error
                # (never a batch lost in silence, never a wait on tasks no one will send).
                self._refused = e
                self._shutdown_workers()
                raise

    def _reap_copies(self, wait=False):
        while self._pending and (wait or self._pending[0][0].query()):
            ev, _host = self._pending.pop(0)
            ev.synchronize()
            wait = False

    def _take_slot(self, stall=False):
        """A free slot, or None.  stall: the pipeline waits on this one, so wait for
        pending GPU copies and fences, and let the garbage collector free slots."""
        ring = self._ring
        if ring is None:
            return None
        slot = ring.take()
        if slot is None and self._pending:
            self._reap_copies()
            slot = ring.take()
        if slot is not None or not stall:
            return slot
        if self._pending:
            self._reap_copies(wait=True)
            slot = ring.take()
        if slot is None and ring.fenced:
            slot = ring.take(wait=True)
        if slot is None:
            # Batches in reference cycles hold slots until the collector runs.  Such a
            # cycle is young (made since the last few batches): collecting the young
            # generations finds it for ~0.2 ms, where a full collection traverses every
            # object (~0.2 s with torch loaded, per miss of a user keeping every batch).
            gc.collect(1)
            slot = ring.take()
        if slot is None and time.monotonic() >= _full_gc.next_at:
            # A cycle still referenced at the last collection was moved to the oldest
            # generation by it: only a full collection frees that one.  Rate-limited
            # to a tenth of the time (each costs ~0.2 s with torch loaded), for a
            # user who keeps every batch.
            t0 = time.monotonic()
            gc.collect()
            _full_gc.next_at = time.monotonic() + 10 * (time.monotonic() - t0)
            slot = ring.take()
        if slot is None:
            self._shared.warn("kept", (
                "pinmem.torch: all %d slots of the batch ring are held by batches still "
                "referenced (kept in a list, say), so batches now come in ordinary, unpinned "
                "memory until slots are free again. Keep .clone()s of what you keep, or pass "
                "a larger slots= to pinmem.torch.DataLoader") % ring.slots)
        return slot

    def _writer(self, slot):
        ring = self._ring
        return SlotWriter(ring.host_tensor(), slot * ring.slot_bytes, ring.slot_bytes)

    # -- delivery --
    def _deliver(self, idx, slot, data):
        if isinstance(data, _worker.Placed):
            return self._deliver_placed(slot, data.layout)
        if self._ring is not None:
            self._ring.give_back(slot)
        return self._deliver_unpinned(idx, data)

    def _deliver_placed(self, slot, layout):
        view = self._ring.slot_view(slot)
        if self._device is None:
            return slot_batch(layout, view)
        host = []
        cur = torch.cuda.current_stream(self._device)

        def copy(t):
            host.append(t)
            with torch.cuda.stream(self._copy_stream):
                d = t.to(self._device, non_blocking=True)
            d.record_stream(cur)
            return d
        out = slot_batch(layout, view, copy)
        ev = torch.cuda.Event()
        ev.record(self._copy_stream)
        cur.wait_stream(self._copy_stream)
        # The slot is free once this event completed and the host views are dropped.
        self._pending.append((ev, host))
        return out

    def _deliver_unpinned(self, idx, big):
        sh = self._shared
        if big.overflow:
            have = self._ring.slot_bytes if self._ring is not None else 0
            want = page_up(big.need + big.need // 8)
            if sh.oversize == "raise":
                raise SlotTooSmallError(
                    "batch %d needs %d bytes but a slot holds %d; pass slot_bytes=%d (or more) "
                    "to pinmem.torch.DataLoader" % (idx, big.need, have, page_up(big.need)))
            if sh.given_slot_bytes is None and want > (sh.slot_bytes or 0):
                sh.slot_bytes = want            # the next epoch's ring fits it
            sh.warn("oversize", "pinmem.torch: a batch needs %d bytes but a slot holds %d: such "
                    "batches are delivered unpinned (an extra copy)%s; pass slot_bytes=%d (or "
                    "more) to pinmem.torch.DataLoader" % (
                        big.need, have, "" if sh.given_slot_bytes else
                        " until the next epoch's ring, made with slots that fit", page_up(big.need)))
        elif big.note:
            sh.warn("note", "pinmem.torch: %s; batches come in ordinary memory as with "
                    "torch.utils.data.DataLoader" % big.note)
        batch = big.batch
        if self._device is not None:
            return _map_tensors(batch, lambda t: t.to(self._device, non_blocking=True))
        if self._pin_memory:
            # What torch's pin thread would have done with it.
            if self._pin_memory_device:
                return tu.pin_memory.pin_memory(batch, self._pin_memory_device)
            return tu.pin_memory.pin_memory(batch)
        return batch

    def _release(self):
        """Give the ring up: slots no batch holds are unpinned now, the others with their batches."""
        self._released = True
        ring, self._ring = self._ring, None
        if self._device is not None and os.getpid() == self._main_pid:
            # Every copy queued from the ring must be done before it is unregistered.
            self._copy_stream.synchronize()
            self._reap_copies(wait=True)
        self._pending = []
        if ring is not None:
            _worker.disinherit(ring)
            spare = ring.close()
            if spare is not None:
                if os.getpid() == self._main_pid:
                    self._shared.keep_spare(spare)
                else:
                    spare.close()


class SingleIter(_RingIter):
    """torch's _SingleProcessDataLoaderIter, collating into the ring in this process."""

    def __init__(self, loader, shared, resume=None):
        super().__init__(loader, shared, resume)
        self._released = False
        self._finished = False
        if _DATAPIPES and isinstance(self._dataset, _DATAPIPES):
            torch.utils.data.graph_settings.apply_sharding(self._dataset, self._world_size,
                                                           self._rank)
        self._ring_init(loader, shared)
        if self._forward:
            _state.fast_forward(self, self._forward)
        self._dataset_fetcher = tdl._DatasetKind.create_fetcher(
            self._dataset_kind, self._dataset, self._auto_collation, self._collate,
            self._drop_last)

    def _next_data(self):
        if self._refused is not None:
            raise self._refused.with_traceback(None)
        if self._discard:
            self._skip_discarded()
        return self._next_one()

    def _next_one(self):
        if self._finished:
            raise StopIteration
        try:
            index = self._next_index()
        except StopIteration:
            self._end()
            raise
        slot = self._take_slot(stall=True)
        self._collate.target = (self._writer(slot), "") if slot is not None else (None, "")
        try:
            data = self._dataset_fetcher.fetch(index)
        except StopIteration:
            self._end()
            raise
        except BaseException:
            self._collate.target = (None, "")
            if self._ring is not None:
                self._ring.give_back(slot)
            raise
        if isinstance(data, _worker.Unpinned) and not data.overflow:
            self._sized_by(data)
        return self._deliver(self._num_yielded, slot, data)

    def _end(self):
        self._finished = self._epoch_done = True
        self._release()

    def _shutdown_workers(self):
        self._release()

    def __del__(self):
        try:
            self._release()
        except Exception:
            pass


class MultiIter(_RingIter):
    """torch's _MultiProcessingDataLoaderIter, its workers collating into the ring."""

    def __init__(self, loader, shared, resume=None):
        super().__init__(loader, shared, resume)
        # torch 1.13's base iterator set it; torch 2.x sets it in its multiprocessing one
        self._prefetch_factor = loader.prefetch_factor
        self._released = False
        self._shutdown = True           # until the workers exist
        self._workers = []
        self._index_queues = []
        mp = loader.multiprocessing_context or torch_mp
        self._worker_init_fn = loader.worker_init_fn
        if _DATAPIPES and isinstance(self._dataset, _DATAPIPES) and \
                hasattr(tdl, "_sharding_worker_init_fn"):
            import functools
            self._worker_init_fn = functools.partial(
                tdl._sharding_worker_init_fn, self._worker_init_fn, self._world_size, self._rank)
        self._ring_init(loader, shared)
        start = mp.get_start_method() if hasattr(mp, "get_start_method") else "fork"
        if self._ring is not None and start == "fork":
            # Forked workers find the ring already mapped (see _worker.attach).
            _worker.inherit(self._ring)
        self._result_q = mp.Queue()
        self._done = mp.Event()
        loop = _worker.torch_worker_loop()
        self._shutdown = False
        _live.add(self)
        for i in range(self._num_workers):
            iq = mp.Queue()
            iq.cancel_join_thread()
            w = mp.Process(target=loop, args=(
                self._dataset_kind, _worker.dataset_arg(loop, self._dataset),
                _worker.TaskQueue(iq, self._done, self._collate),
                self._result_q, self._done, self._auto_collation, self._collate,
                self._drop_last, self._base_seed, self._worker_init_fn, i, self._num_workers,
                self._persistent_workers, self._shared_seed))
            w.daemon = True
            w.start()
            self._index_queues.append(iq)
            self._workers.append(w)
        self._reset(loader, first_iter=True)

    # -- torch's epoch bookkeeping, with a slot per task --
    def _reset(self, loader, first_iter=False):
        if not first_iter:
            # A persistent iterator's next epoch: what it starts from, for state_dict().
            self._epoch_rng, self._epoch_fresh = _state.rng_state(loader), False
            self._shared.last = weakref.ref(self)
        self._epoch_done = False
        super()._reset(loader, first_iter)
        if first_iter and self._resumed_sampler is not None:
            self._sampler_iter = self._resumed_sampler      # made by _state.resume
        self._resumed_sampler = None
        if self._forward:
            _state.fast_forward(self, self._forward)
            self._forward = 0
        if self._shutdown:
            raise RuntimeError("pinmem.torch: this iterator's workers were stopped; "
                               "iterate the DataLoader again for a new one")
        if not first_iter:
            for q in self._index_queues:
                q.put(tu.worker._ResumeIteration(self._shared_seed))
            acks = self._num_workers
            while acks > 0:
                idx, _data = self._get_data()
                if isinstance(idx, tu.worker._ResumeIteration):
                    acks -= 1
            # Every task of the last epoch is back: their slots are free.
            for slot in self._slot_of.values():
                if self._ring is not None:
                    self._ring.give_back(slot)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info = {}
        self._slot_of = {}              # task idx -> slot (None: ordinary memory)
        self._tasks_outstanding = 0
        self._owed = collections.deque()  # indices torch would have sent, waiting for a slot
        self._sizing = 0                # tasks sent before the slots were sized
        self._workers_status = [True] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        # The index is drawn now, as torch's _try_put_index draws it (a shuffling sampler's
        # generator advances exactly when torch's would); the task waits for a slot.
        try:
            index = self._next_index()
        except StopIteration:
            return
        self._owed.append(index)
        self._pay()

    def _pay(self):
        """Send owed tasks while slots are free (before the ring: one per worker, to size it)."""
        while self._owed:
            if self._ring is None:
                if self._ring_failed or (self._sizing < self._num_workers
                                         and self._shared.slot_bytes is None):
                    slot = None
                    self._sizing += 1
                else:
                    return
            else:
                slot = self._take_slot()
                if slot is None:
                    return
            if not self._send(slot, self._owed.popleft()):
                self._owed.clear()
                return

    def _stall(self):
        """Nothing is in flight and the next batch waits for a slot: free one, or send the
        task without (ordinary memory), as torch's loader would go on."""
        slot = self._take_slot(stall=True)
        if not self._send(slot, self._owed.popleft()):
            self._owed.clear()

    def _send(self, slot, index):
        """torch's _try_put_index for one drawn index; False when no worker is active."""
        for _ in range(self._num_workers):
            wid = next(self._worker_queue_idx_cycle)
            if self._workers_status[wid]:
                break
        else:
            self._give_back(slot)
            return False
        desc = self._ring.desc() if slot is not None else None
        self._index_queues[wid].put((self._send_idx, index, slot, desc))
        self._task_info[self._send_idx] = (wid,)
        self._slot_of[self._send_idx] = slot
        self._tasks_outstanding += 1
        self._send_idx += 1
        return True

    def _give_back(self, slot):
        if slot is not None and self._ring is not None:
            self._ring.give_back(slot)

    def _next_data(self):
        if self._refused is not None:
            raise self._refused.with_traceback(None)
        if self._shutdown:
            raise StopIteration
        try:
            if self._discard:
                self._skip_discarded()
            return self._next_batch()
        except Exception:
            raise                   # a batch's error: the next batch can still come
        except BaseException:
            # Ctrl-C: the workers go, the pins with the ring.
            self._shutdown_workers()
            raise

    def _next_batch(self):
        while True:
            self._pay()
            if self._owed and self._rcvd_idx == self._send_idx:
                self._stall()
                continue
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._workers_status[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]
                self._give_back(self._slot_of.pop(self._rcvd_idx, None))
                self._rcvd_idx += 1
            else:
                self._epoch_done = True
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                return self._process_data(data)
            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, _worker.Unpinned) and not data.overflow:
                self._sized_by(data)
            if isinstance(data, tu.worker._IterableDatasetStopIteration):
                self._workers_status[data.worker_id] = False
                self._give_back(self._slot_of.pop(idx, None))
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)
            else:
                del self._task_info[idx]
                return self._process_data(data)

    _next_one = _next_batch

    def _process_data(self, data):
        idx = self._rcvd_idx
        self._rcvd_idx += 1
        slot = self._slot_of.pop(idx, None)
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            self._give_back(slot)
            data.reraise()
        return self._deliver(idx, slot, data)

    def _check_workers(self):
        for w in self._workers:
            if not w.is_alive():
                # torch's words (its SIGCHLD handler's), which users and tests match.
                code = w.exitcode
                if code is not None and code < 0:
                    msg = "DataLoader worker (pid %d) is killed by signal: %s. " % (
                        w.pid, signal.strsignal(-code))
                    if -code == signal.SIGBUS:
                        msg += ("It is possible that dataloader's workers are out of shared "
                                "memory. Please try to raise your shared memory limit.")
                elif code:
                    msg = ("DataLoader worker (pid %d) exited unexpectedly with exit code %d. "
                           "Details are lost due to multiprocessing. Rerunning with "
                           "num_workers=0 may give better error trace." % (w.pid, code))
                else:
                    msg = "DataLoader worker (pid(s) %d) exited unexpectedly" % w.pid
                self._shutdown_workers()
                raise WorkerError(msg)

    def _get_data(self):
        timeout = self._timeout
        end = time.monotonic() + timeout if timeout > 0 else None
        while True:
            wait = _POLL_S if end is None else max(0.0, min(_POLL_S, end - time.monotonic()))
            try:
                return self._result_q.get(timeout=wait)
            except queue.Empty:
                self._check_workers()
                if end is not None and time.monotonic() >= end:
                    raise RuntimeError("DataLoader timed out after {} seconds".format(timeout))
            except Exception:
                self._check_workers()
                _raise_if_out_of_fds()
                raise

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        _live.discard(self)
        if os.getpid() != self._main_pid:
            return                  # a forked child's copy: not its workers
        # Workers see `done` within 0.1 s between batches (TaskQueue.get); the None wakes
        # an idle one at once.  At interpreter exit no put: a queue's first put starts
        # its feeder thread, which can no longer start then.
        self._done.set()
        exiting = sys.is_finalizing() or _exiting
        if not exiting:
            for q in self._index_queues:
                q.put(None)
        deadline = time.monotonic() + (0.2 if exiting else 1.0)
        for w in self._workers:
            w.join(timeout=max(0.0, deadline - time.monotonic()))
        for w in self._workers:
            if w.is_alive():
                w.terminate()       # busy in a slow batch nobody will take any more
        for w in self._workers:
            w.join(timeout=2)
            if w.is_alive():
                w.kill()
                w.join()
        for q in self._index_queues + [self._result_q]:
            q.cancel_join_thread()
            q.close()
        self._release()

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:
            pass
