# SPDX-License-Identifier: MIT
"""The slot ring of one pinmem.torch iterator: a memfd, pinned slot by slot.

The ring is one memfd mapped shared.  Workers map it themselves (they open
/proc/<main pid>/fd/<fd>, whatever their start method), so it can be made
after the workers started, once the first batches told how big a slot must
be.  Each slot is pinned (and CUDA-registered) on its own: when the ring is
dropped, the slots no batch holds are unpinned at once, and a batch a user
keeps holds only its own slot.

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


_MODE_ARGS = {"module": ("module", True), "mlock": ("mlock", True), "cuda": ("none", True),
              "none": ("none", False)}


def _pin_slots(ctx, mv, slots, slot_bytes, mode, register, skip):
    """Buffers of every slot but those in skip (None there) pinned with mode, or the
    BudgetError/Error of the first refusal (what was pinned before it is released)."""
    bufs = []
    try:
        for i in range(slots):
            bufs.append(None if i in skip else
                        ctx.pin(mv[i * slot_bytes:(i + 1) * slot_bytes], pin=mode,
                                register=register))
    except _pinmem.Error:
        del bufs
        raise
    return bufs


def _mode_of(bufs, default):
    return next((b.pin_mode for b in bufs if b is not None), default)


def pin_ring(ctx, mv, slots, slot_bytes, pin, skip=()):
    """(buffers, pin mode, notes): the first mode of the ladder that pins every slot
    (but those in skip, held by a batch of an earlier ring: None in buffers).

    Modes: 'module', 'mlock', 'cuda' (registered with CUDA only) and 'none'.
    notes: what refused, for the one warning; empty when nothing worth one happened."""
    info = ctx.info()
    total = (slots - len(skip)) * slot_bytes
    if pin != "auto":
        try:
            bufs = _pin_slots(ctx, mv, slots, slot_bytes, pin, pin != "none", skip)
        except _pinmem.BudgetError as e:
            raise _pinmem.BudgetError("%s (pin=%r asked for explicitly; held in this process: %s)"
                                      % (e, pin, holders())) from None
        return bufs, _mode_of(bufs, pin), []
    notes = []
    if info.get("module"):
        try:
            bufs = _pin_slots(ctx, mv, slots, slot_bytes, "module", True, skip)
            return bufs, _mode_of(bufs, "module"), notes
        except _pinmem.Error as e:
            notes.append("/dev/pinmem refused %s: %s" % (fmt_bytes(total), e))
    room = mlock_room()
    if room is not None and room < total:
        notes.append("mlock of %s would exceed RLIMIT_MEMLOCK (%s free of %s)" % (
            fmt_bytes(total), fmt_bytes(room),
            fmt_bytes(resource.getrlimit(resource.RLIMIT_MEMLOCK)[0])))
    else:
        try:
            bufs = _pin_slots(ctx, mv, slots, slot_bytes, "mlock", True, skip)
            return bufs, "mlock", notes
        except _pinmem.Error as e:
            notes.append(str(e))
    if info.get("backend") == "cuda":
        try:
            bufs = _pin_slots(ctx, mv, slots, slot_bytes, "none", True, skip)
            if all(b.registered for b in bufs if b is not None):
                return bufs, "cuda", notes + [
                    "the ring is registered with CUDA only, as torch's pinned memory is: no "
                    "pinmem budget applies to it"]
            del bufs
        except _pinmem.Error as e:
            notes.append("cudaHostRegister: %s" % e)
    bufs = _pin_slots(ctx, mv, slots, slot_bytes, "none", False, skip)
    return bufs, "none", notes + ["the ring is not pinned: copies to the GPU are synchronous "
                                  "and staged, as from pageable memory"]


class Spare:
    """A released ring's memory (unpinned), kept by its loader for the next iterator's ring
    (faulting fresh pages in every epoch costs more than pinning resident ones).
    held: slot -> weak reference to the Buffer of a batch a user still holds there."""

    def __init__(self, fd, mm, slots, slot_bytes, held):
        self.fd, self.mm, self.slots, self.slot_bytes, self.held = fd, mm, slots, slot_bytes, held

    def fits(self, slots, slot_bytes):
        return ((self.slots, self.slot_bytes) == (slots, slot_bytes)
                and len(self.held) < slots)

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.mm = None

    def __del__(self):
        self.close()


class Ring:
    """slots x slot_bytes of one memfd, each slot pinned as its own Buffer.

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
        self.ctx = ctx
        dev = ctx.info().get("cuda_device", -1)
        # The GPU the ring is registered with: its fences go there, whichever
        # thread (a prefetch thread, the garbage collector) drops a slot.
        self.device = torch.device("cuda", dev) if dev >= 0 else None
        self.pid = os.getpid()
        # Weak references whose callbacks are deque.append, C code: no Python code runs
        # at garbage collection, where a Ctrl-C would be swallowed as an "ignored exception".
        self.dead = collections.deque()     # slot views whose tensors are all gone
        self._views = {}                    # weakref -> slot
        self.returned = collections.deque() # Buffers of an earlier ring's kept batches, gone
        self._old = {}                      # weakref -> slot, for those
        held = {}                           # slot -> the Buffer a kept batch holds it by
        if spare is not None and spare.fits(slots, slot_bytes):
            self.fd, self.mm = spare.fd, spare.mm
            spare.fd, spare.mm = -1, None
            for k, r in spare.held.items():
                buf = r()
                if buf is not None:
                    held[k] = buf
        else:
            self.fd = os.memfd_create("pinmem-loader-ring", os.MFD_CLOEXEC)
            self.mm = None
        try:
            if self.mm is None:
                os.ftruncate(self.fd, self.total)
                self.mm = mmap.mmap(self.fd, self.total, mmap.MAP_SHARED,
                                    mmap.PROT_READ | mmap.PROT_WRITE)
            addr = ctypes.c_char.from_buffer(self.mm)
            self.base = ctypes.addressof(addr)      # where slot 0 starts in this process
            del addr
            mv = memoryview(self.mm)
            try:
                self.bufs, self.pin_mode, self.notes = pin_ring(ctx, mv, slots, slot_bytes, pin,
                                                                skip=held)
            finally:
                mv.release()
        except BaseException:
            os.close(self.fd)
            raise
        self.free = collections.deque(k for k in range(slots) if k not in held)
        for k, buf in held.items():
            self._old[weakref.ref(buf, self.returned.append)] = k
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
            self._host = torch.frombuffer(self.mm, dtype=torch.uint8)
        return self._host

    def describe(self):
        held = self.slots - len(self.free) - len(self.fenced)
        return "a pinmem.torch.DataLoader ring%s: %d slots x %s = %s (%s), %d held" % (
            " (%s)" % self.what if self.what else "", self.slots, fmt_bytes(self.slot_bytes),
            fmt_bytes(self.total), self.pin_mode, max(0, held))

    def slot_view(self, slot):
        """A view of one slot; when it and every tensor made from it are gone, the slot is free."""
        v = self.bufs[slot].view(0, (self.slot_bytes,))
        self._views[weakref.ref(v, self.dead.append)] = slot
        return v

    def _collect_returned(self):
        """Pin the slots an earlier ring's kept batches held, now that they are gone."""
        while self.returned:
            slot = self._old.pop(self.returned.popleft())
            mode, register = _MODE_ARGS.get(self.pin_mode, ("none", False))
            mv = memoryview(self.mm)
            try:
                self.bufs[slot] = self.ctx.pin(
                    mv[slot * self.slot_bytes:(slot + 1) * self.slot_bytes], pin=mode,
                    register=register)
            except _pinmem.Error:
                continue                    # refused now: the ring goes on with one slot less
            finally:
                mv.release()
            self.free.append(slot)

    def _collect_dead(self):
        if self.returned:
            self._collect_returned()
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
        """Wait for every GPU read of a dropped slot (before the ring is unpinned)."""
        self._collect_dead()
        while self.fenced:
            ev, slot = self.fenced.pop(0)
            ev.synchronize()
            self.free.append(slot)

    def close(self):
        """Unpin the slots no batch holds (the others when their batches go); returns the
        memory as a Spare for the next ring (None when there is nothing to hand on)."""
        try:
            self.quiesce()
        except Exception:
            pass
        _rings.discard(self)
        if self.fd < 0:
            return None
        refs = {k: weakref.ref(b) for k, b in enumerate(self.bufs) if b is not None}
        self.bufs = []
        self._host = None
        held = {k: r for k, r in refs.items() if r() is not None}
        for r, k in self._old.items():
            if r() is not None:
                held[k] = r
        self._old.clear()
        spare = Spare(self.fd, self.mm, self.slots, self.slot_bytes, held)
        self.fd, self.mm = -1, None
        return spare

    def __del__(self):
        try:
            spare = self.close()
            if spare is not None:
                spare.close()
        except Exception:
            pass
