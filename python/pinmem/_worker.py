# SPDX-License-Identifier: MIT
"""What a pinmem.torch worker runs: torch's own worker loop, collating into the ring.

A worker is torch's worker loop (seeds, get_worker_info(), worker_init_fn,
the fetcher, IterableDataset ends, persistent-worker resets, DataPipe
seeding: all torch's, for the torch release installed) with two things
swapped in:

- the index queue is a TaskQueue: a task from the main process carries,
  besides torch's (idx, index), the slot to write the batch into and how to
  map the ring; get() maps the ring when it is new, points the collate
  function at the slot and hands torch's loop (idx, index) (the queue and
  the collate function travel in one Process, pickled together for spawn);
- collate_fn is a SlotCollate: it collates the batch straight into that
  slot (Placed: the batch's layout, leaves as offsets into the slot), or,
  when the task has no slot or the batch does not fit, collates as torch
  does and sends the batch through shared memory (Unpinned, with the bytes
  it takes, which is how the main process sizes the slots).

The same SlotCollate serves the main process when num_workers is 0.
"""
import mmap
import os
import queue
import time

import torch

from . import _pinmem
from ._collate import SlotWriter, _Foreign, _Overflow, collate_into, nbytes_needed, place

# gen -> (mmap, uint8 tensor) of the ring this worker maps (one at a time).
_mapped = {}
_POLL_S = 0.1


class Placed:
    """A batch collated into its slot: the layout materialize() turns into tensors."""
    __slots__ = ("layout",)

    def __init__(self, layout):
        self.layout = layout

    def __reduce__(self):
        return (Placed, (self.layout,))


class Unpinned:
    """A batch in ordinary (shared) memory: need: the slot bytes it would take;
    overflow: it did not fit its slot; note: why it has no slot, if not sizing."""

    def __init__(self, batch, need, overflow=False, note=""):
        self.batch, self.need, self.overflow, self.note = batch, need, overflow, note


def inherit(ring):
    """Map ring in this (main) process's table, for workers forked from now on."""
    _mapped[ring.gen] = (None, ring.host_tensor())


def disinherit(ring):
    _mapped.pop(ring.gen, None)


def attach(desc):
    """The ring described by desc (see _ring.Ring.desc) as a uint8 tensor, mapped once per ring."""
    gen, pid, fd, total, _slot_bytes = desc
    hit = _mapped.get(gen)
    if hit is not None:
        return hit[1]
    _mapped.clear()
    if pid == os.getpid():
        dup = os.open("/proc/self/fd/%d" % fd, os.O_RDWR)
    else:
        dup = os.open("/proc/%d/fd/%d" % (pid, fd), os.O_RDWR)
    try:
        mm = mmap.mmap(dup, total, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(dup)
    t = torch.frombuffer(mm, dtype=torch.uint8)
    _mapped[gen] = (mm, t)
    return t


def target(slot, desc):
    """Where a worker collates its next batch: (SlotWriter of slot, '') or (None, why not)."""
    if slot is None:
        return (None, "")
    try:
        ring = attach(desc)
    except OSError as e:
        return (None, "a worker could not map the ring (%s)" % e)
    return (SlotWriter(ring, slot * desc[4], desc[4]), "")


class SlotCollate:
    """collate_fn for torch's fetcher: into the current slot, else as torch collates."""

    def __init__(self, collate_fn, fast_default):
        self.collate_fn = collate_fn
        # torch's default_collate: stack every leaf straight into the slot (collate_into).
        self.fast_default = fast_default
        # Where the next batch goes: (SlotWriter or None, note); set per task.
        self.target = (None, "")

    def __call__(self, data):
        w, note = self.target
        self.target = (None, "")
        if w is None:
            full = self.collate_fn(data)
            return Unpinned(full, nbytes_needed(full), note=note)
        if self.fast_default:
            try:
                return Placed(collate_into(data, w))
            except _Overflow:
                full = self.collate_fn(data)
                return Unpinned(full, nbytes_needed(full), overflow=True)
            except _Foreign:
                # A tensor subclass, one requiring grad or on a GPU, a dict subclass...:
                # the batch is torch's, as torch's collate returns it.
                full = self.collate_fn(data)
                return Unpinned(full, nbytes_needed(full))
            except Exception:
                # A type collate_into does not know (numpy uint16 on a newer torch, a
                # registered collate function): torch's own collation decides.
                pass
        full = self.collate_fn(data)
        w.used = 0
        try:
            return Placed(place(full, w))
        except _Overflow:
            return Unpinned(full, nbytes_needed(full), overflow=True)
        except Exception:
            # Something place() cannot copy (a tensor subclass, say): as torch sends it.
            return Unpinned(full, nbytes_needed(full))


class TaskQueue:
    """The worker's index queue as torch's loop sees it.

    Tasks are (idx, index, slot, ring desc); get() returns torch's (idx, index)
    after pointing the collation at the slot.  The first task with a slot (and
    one with larger slots) makes the worker's malloc keep a batch's memory
    between batches (keep_heap).  Once done is set, get() returns
    None (torch's "exit" message), so stopping workers never needs a put (no
    feeder thread is started at interpreter exit)."""

    def __init__(self, q, done, collate):
        self.q, self.done, self.collate = q, done, collate
        self.heap_kept = None     # (pid, slot bytes) keep_heap was last called for

    def get(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.done.is_set():
                return None
            wait = _POLL_S if end is None else min(_POLL_S, end - time.monotonic())
            if wait <= 0:
                raise queue.Empty
            try:
                r = self.q.get(timeout=wait)
            except queue.Empty:
                continue
            if isinstance(r, tuple) and len(r) == 4:
                idx, index, slot, desc = r
                kept = self.heap_kept
                if slot is not None and (kept is None or kept[0] != os.getpid() or desc[4] > kept[1]):
                    # Keep a batch's samples' memory from one batch to the next
                    # (see keep_heap), again when a later ring has larger slots.
                    _pinmem.keep_heap(desc[4])
                    self.heap_kept = (os.getpid(), desc[4])
                self.collate.target = target(slot, desc)
                return idx, index
            return r

    def put(self, obj):
        self.q.put(obj)

    def cancel_join_thread(self):
        self.q.cancel_join_thread()

    def close(self):
        self.q.close()


def torch_worker_loop():
    """torch's worker loop function (its name changed across releases)."""
    from torch.utils.data._utils import worker as tw
    return getattr(tw, "_process_worker_loop", None) or tw._worker_loop


def dataset_arg(loop, dataset):
    """The dataset as torch's worker loop takes it: newer releases take a one-item list
    (dataset_holder) that the worker pops, so it holds the only reference."""
    import inspect
    return [dataset] if "dataset_holder" in inspect.signature(loop).parameters else dataset
