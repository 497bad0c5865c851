# SPDX-License-Identifier: MIT
"""The slot ring of one pinmem.torch iterator: a memfd, pinned as a whole.

The ring is one memfd mapped shared.  Workers map it themselves (they open
/proc/<main pid>/fd/<fd>, whatever their start method), so it can be made
after the workers started, once the first batches told how big a slot must
be.  The ring is pinned (and CUDA-registered) by one Buffer that only the
ring holds; the batches handed out are tensors over memoryviews of their
slot, which keep the memory mapped but not pinned.  So when the ring is
released (its iterator ended or was dropped) it is unpinned at once, even
while batches are still referenced: those live on in ordinary memory, and
the next ring, made over the same memory, leaves their slots alone until
they are gone.

Pinning steps down where torch's DataLoader would still run: /dev/pinmem,
else mlock within RLIMIT_MEMLOCK, else (with a CUDA backend) memory only
registered with CUDA, as torch's pinned memory is (no budget applies), else
an unpinned ring.  An explicit pin= is not stepped around: its refusal is a
BudgetError that names what this process already holds.
"""
import collections
import ctypes
import mmap
import os
import re
import resource
import weakref

import torch

from . import _pinmem
from ._collate import Leaf, _map

_PAGE = os.sysconf("SC_PAGE_SIZE")
_CAP_IPC_LOCK = 14

# Every live ring, for a refusal's sentence ("held in this process: ...").
_rings = weakref.WeakSet()


def page_up(n):
    return max(_PAGE, (n + _PAGE - 1) // _PAGE * _PAGE)


def fmt_bytes(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%.1f %s" % (n / div, unit)
    return "%d B" % n


def _status():
    try:
        with open("/proc/self/status") as f:
            return f.read()
    except OSError:
        return ""


def mlock_room():
    """Bytes mlock may still lock in this process, or None when RLIMIT_MEMLOCK does not bind."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY:
        return None
    st = _status()
    m = re.search(r"^CapEff:\s+([0-9a-f]+)", st, re.M)
    if m and int(m.group(1), 16) >> _CAP_IPC_LOCK & 1:
        return None
    m = re.search(r"^VmLck:\s+(\d+) kB", st, re.M)
    locked = int(m.group(1)) * 1024 if m else 0
    return max(0, soft - locked)


def holders():
    """One sentence: what this process holds pinned or locked, loader rings first."""
    parts = [r.describe() for r in list(_rings)]
    st = _status()
    for field in ("VmLck", "VmPin"):
        m = re.search(r"^%s:\s+(\d+) kB" % field, st, re.M)
        if m and int(m.group(1)):
            parts.append("%s %s" % (field, fmt_bytes(int(m.group(1)) * 1024)))
    return "; ".join(parts) if parts else "nothing"


class PinRefused(Exception):
    """Every step of the pinning ladder that was tried, and why each refused."""


def _pin(ctx, mv, mode, register):
    """One Buffer pinning all of mv with mode, or the library's BudgetError/Error."""
    return ctx.pin(mv, pin=mode, register=register)


def pin_ring(ctx, mv, pin):
    """(buffer, pin mode, notes): the first mode of the ladder that pins all of mv.

    Modes: 'module', 'mlock', 'cuda' (registered with CUDA only) and 'none'.
    notes: what refused, for the one warning; empty when nothing worth one happened."""
    info = ctx.info()
    total = mv.nbytes
    if pin != "auto":
        if pin == "module" and not info.get("module"):
            # The library would step down to mlock; pin="module" asked for /dev/pinmem.
            raise _pinmem.BudgetError(
                "pin='module' asked for explicitly, but /dev/pinmem is not available to this "
                "context (run `pinctl doctor`; held in this process: %s)" % holders())
        try:
            buf = _pin(ctx, mv, pin, pin != "none")
        except _pinmem.BudgetError as e:
            raise _pinmem.BudgetError("%s (pin=%r asked for explicitly; held in this process: %s)"
                                      % (e, pin, holders())) from None
        return buf, buf.pin_mode, []
    notes = []
    if info.get("module"):
        try:
            buf = _pin(ctx, mv, "module", True)
            return buf, buf.pin_mode, notes
        except _pinmem.Error as e:
            notes.append("/dev/pinmem refused %s: %s" % (fmt_bytes(total), e))
    room = mlock_room()
    if room is not None and room < total:
        notes.append("mlock of %s would exceed RLIMIT_MEMLOCK (%s free of %s)" % (
            fmt_bytes(total), fmt_bytes(room),
            fmt_bytes(resource.getrlimit(resource.RLIMIT_MEMLOCK)[0])))
    else:
        try:
            return _pin(ctx, mv, "mlock", True), "mlock", notes
        except _pinmem.Error as e:
            notes.append(str(e))
    if info.get("backend") == "cuda":
        try:
            buf = _pin(ctx, mv, "none", True)
            if buf.registered:
                return buf, "cuda", notes + [
                    "the ring is registered with CUDA only, as torch's pinned memory is: no "
                    "pinmem budget applies to it"]
            del buf
        except _pinmem.Error as e:
            notes.append("cudaHostRegister: %s" % e)
    return _pin(ctx, mv, "none", False), "none", notes + [
        "the ring is not pinned: copies to the GPU are synchronous and staged, as from "
        "pageable memory"]


class Spare:
    """A released ring's memory (unpinned), kept by its loader for the next iterator's ring
    (faulting fresh pages in every epoch costs more than pinning resident ones).
    held: slot -> weak reference to the view a batch a user still holds there keeps."""

    def __init__(self, fd, mm, slots, slot_bytes, held):
        self.fd, self.mm, self.slots, self.slot_bytes, self.held = fd, mm, slots, slot_bytes, held

    def fits(self, slots, slot_bytes):
        return ((self.slots, self.slot_bytes) == (slots, slot_bytes)
                and len(self.held) < slots)

    def close(self, _os_close=os.close):
        # os.close bound at definition: a spare still held by a loader at interpreter exit
        # is closed after the os module's globals are cleared.
        fd, self.fd = self.fd, -1
        self.mm = None
        if fd >= 0:
            _os_close(fd)

    def __del__(self):
        self.close()


class Ring:
    """slots x slot_bytes of one memfd, pinned by one Buffer.

    A slot goes back to the free list when the last tensor made from the view
    slot_view() handed out is gone (a weak reference's callback), and with
    CUDA initialised only after an event recorded then has completed."""

    _gen = 0

    def __init__(self, ctx, slots, slot_bytes, pin, what="", spare=None):
        Ring._gen += 1
        self.gen = Ring._gen
        self.slots, self.slot_bytes = slots, slot_bytes
        self.total = slots * slot_bytes
        self.what = what
        dev = ctx.info().get("cuda_device", -1)
        # The GPU the ring is registered with: its fences go there, whichever
        # thread (a prefetch thread, the garbage collector) drops a slot.
        self.device = torch.device("cuda", dev) if dev >= 0 else None
        self.pid = os.getpid()
        # Weak references whose callbacks are deque.append, C code: no Python code runs
        # at garbage collection, where a Ctrl-C would be swallowed as an "ignored exception".
        self.dead = collections.deque()     # slot views whose tensors are all gone
        # id(weakref) -> (weakref, slot): a writable memoryview cannot be hashed, so
        # neither can a weak reference to it.
        self._views = {}
        self.returned = collections.deque() # views an earlier ring's kept batches held, gone
        self._old = {}                      # id(weakref) -> (weakref, slot), for those
        held = {}                           # slot -> the view a kept batch holds it by
        if spare is not None and spare.fits(slots, slot_bytes):
            self.fd, self.mm = spare.fd, spare.mm
            spare.fd, spare.mm = -1, None
            for k, r in spare.held.items():
                v = r()
                if v is not None:
                    held[k] = v
        else:
            self.fd = os.memfd_create("pinmem-loader-ring", os.MFD_CLOEXEC)
            self.mm = None
        try:
            if self.mm is None:
                os.ftruncate(self.fd, self.total)
                self.mm = mmap.mmap(self.fd, self.total, mmap.MAP_SHARED,
                                    mmap.PROT_READ | mmap.PROT_WRITE)
            self._mv = memoryview(self.mm)
            addr = ctypes.c_char.from_buffer(self.mm)
            self.base = ctypes.addressof(addr)      # where slot 0 starts in this process
            del addr
            self.buf, self.pin_mode, self.notes = pin_ring(ctx, self._mv, pin)
        except BaseException:
            # Closed here, once: a half-built ring's __del__ must not close the number
            # again (by then it may be a file of the user's).
            fd, self.fd = self.fd, -1
            self._mv = self.mm = self._host = None
            self.buf = None
            os.close(fd)
            raise
        self.free = collections.deque(k for k in range(slots) if k not in held)
        for k, v in held.items():
            r = weakref.ref(v, self.returned.append)
            self._old[id(r)] = (r, k)
        del held
        # (CUDA event, slot): dropped by the host, maybe still read by GPU work queued before.
        self.fenced = []
        self._host = None
        _rings.add(self)

    def desc(self):
        """What a worker needs to map the ring (see _worker.attach)."""
        return (self.gen, self.pid, self.fd, self.total, self.slot_bytes)

    def host_tensor(self):
        """The whole ring as a uint8 tensor (for collating in the main process)."""
        if self._host is None:
            self._host = torch.frombuffer(self._mv, dtype=torch.uint8)
        return self._host

    def describe(self):
        held = self.slots - len(self.free) - len(self.fenced)
        return "a pinmem.torch.DataLoader ring%s: %d slots x %s = %s (%s), %d held" % (
            " (%s)" % self.what if self.what else "", self.slots, fmt_bytes(self.slot_bytes),
            fmt_bytes(self.total), self.pin_mode, max(0, held))

    def slot_view(self, slot):
        """A view of one slot; when it and every tensor made from it are gone, the slot is free."""
        v = self._mv[slot * self.slot_bytes:(slot + 1) * self.slot_bytes]
        r = weakref.ref(v, self.dead.append)
        self._views[id(r)] = (r, slot)
        return v

    def _collect_dead(self):
        # The ring is CUDA-registered: a copy queued from a slot (x.cuda(non_blocking=True))
        # may still read it after the last host tensor is gone.  An event recorded now on
        # the ring's GPU's current stream comes after that copy.  A slot an earlier ring's
        # kept batch held is fenced the same way (that batch may have been copied from too).
        while self.returned:
            self._fence(self._old.pop(id(self.returned.popleft()))[1])
        while self.dead:
            self._fence(self._views.pop(id(self.dead.popleft()))[1])

    def _fence(self, slot):
        if self.device is not None and torch.cuda.is_initialized():
            ev = torch.cuda.Event()
            ev.record(torch.cuda.current_stream(self.device))
            self.fenced.append((ev, slot))
        else:
            self.free.append(slot)

    def take(self, wait=False):
        """A slot nothing reads any more, or None; wait: block on the oldest GPU fence if need be."""
        self._collect_dead()
        if self.fenced:
            done = [f for f in self.fenced if f[0].query()]
            for f in done:
                self.fenced.remove(f)
                self.free.append(f[1])
        if not self.free and self.fenced and wait:
            ev, slot = self.fenced.pop(0)
            ev.synchronize()
            self.free.append(slot)
        return self.free.popleft() if self.free else None

    def give_back(self, slot):
        """A slot handed to a batch that never reached the user."""
        if slot is not None:
            self.free.append(slot)

    def quiesce(self):
        """Wait for every GPU read of the ring (before it is unregistered and unpinned)."""
        self._collect_dead()
        while self.fenced:
            ev, slot = self.fenced.pop(0)
            ev.synchronize()
            self.free.append(slot)
        if self._views and self.device is not None and torch.cuda.is_initialized():
            # A batch still referenced may have a copy queued from it.
            torch.cuda.synchronize(self.device)

    def close(self):
        """Unpin the ring now (batches still referenced live on, unpinned); returns its memory
        as a Spare for the next ring (None when there is nothing to hand on)."""
        try:
            self.quiesce()
        except Exception:
            pass
        _rings.discard(self)
        self.buf = None
        self._host = None
        if self.fd < 0:
            return None
        held = {k: r for r, k in list(self._views.values()) + list(self._old.values())
                if r() is not None}
        self._views.clear()
        self._old.clear()
        spare = Spare(self.fd, self.mm, self.slots, self.slot_bytes, held)
        self.fd, self.mm, self._mv = -1, None, None
        return spare

    def __del__(self):
        try:
            spare = self.close()
            if spare is not None:
                spare.close()
        except Exception:
            pass


def slot_batch(layout, view, device_copy=None):
    """The batch for the consumer: every Leaf of layout a zero-copy tensor (or array) over
    view (a slot's memoryview, which every such tensor keeps referenced)."""
    if isinstance(layout, Leaf):
        dtype = getattr(torch, layout.dtype)
        if layout.offset < 0:
            t = torch.empty(layout.shape, dtype=dtype)
        else:
            t = torch.frombuffer(view, dtype=torch.uint8, count=layout.nbytes,
                                 offset=layout.offset).view(dtype).view(layout.shape)
        if layout.kind == "ndarray":
            return t.numpy()
        return device_copy(t) if device_copy is not None else t
    return _map(layout, lambda x: slot_batch(x, view, device_copy))
