# SPDX-License-Identifier: MIT
"""pinmem.Stream: read dataset items straight into pinned batch slots."""
import operator
import os
from collections.abc import Mapping

from . import _pinmem
from ._device import default_cuda_device

__all__ = ["Stream"]


def _dist_default(name, env, fn):
    """rank/world_size from torch.distributed when initialised, else the launcher's environment."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return fn(dist)
    except ImportError:
        pass
    v = os.environ.get(env)
    return int(v) if v is not None else None


def _device(device):
    """(backend, cuda_device, views_on_device) for a device argument."""
    if device is None:
        # Slots registered with CUDA when there is a GPU; the consumer copies.
        return "auto", default_cuda_device(), False
    if isinstance(device, int):
        return "cuda", device, True
    s = str(device)
    if s == "host":
        return "host", 0, True      # copies into ordinary memory: the pipeline without a GPU
    if s == "cuda":
        return "cuda", default_cuda_device(), True
    if s.startswith("cuda:"):
        return "cuda", int(s[5:]), True
    raise ValueError("pinmem.Stream: device must be None, 'host', 'cuda', 'cuda:N' or an int, not %r" % (device,))


def _state_int(v, key):
    if isinstance(v, bool):
        raise ValueError("pinmem.Stream: state[%r] holds %r, not a batch number" % (key, v))
    try:
        return operator.index(v)
    except TypeError:
        raise ValueError("pinmem.Stream: state[%r] holds %r, not a batch number" % (key, v)) from None


class Stream:
    """Stream(source=None, *, tar=None, batch_bytes=0, batch_items=0, shuffle=False,
    seed=0, epochs=1, rank=None, world_size=None, device=None, ...)

    source is a pinmem.Manifest, the path of a manifest file (lines
    "path offset length [crc32c]"), or a list of files (each one item, or cut
    into item_bytes-sized items).  tar is a list of tar shards (ustar, GNU,
    pax; WebDataset layout), read in place: the members of one key
    ("000001.input.npy", "000001.label.txt") are one sample, never split
    over batches or ranks; shuffle and sharding move whole samples,
    batch_items counts samples, and batch["input.npy"] is the list of that
    field's views, one per sample of the batch.  Iterating yields pinmem.Batch objects
    whose .views are zero-copy DLPack/buffer views of each item: of the
    pinned host slot when device is None (handoff "host": the slots are
    registered with CUDA when there is a GPU and the consumer copies), of the
    batch's device copy when device is "cuda:N" (or "host": a host-memory
    "device", to run the copy path without a GPU).  handoff="queued" hands a
    batch over as soon as its copy is queued: torch.from_dlpack(view) on the
    current stream (or batch.wait(stream)) orders the GPU work after the copy.
    Release each batch (batch.release(), "with batch:", or
    batch.release(stream=torch.cuda.current_stream()) once its GPU work is
    queued: the slot is rewritten only after that work, and the caller never
    blocks) so its slot can be refilled (without stream=, a device batch is
    released after the work queued on the stream its view was exported to,
    else the legacy default stream); a released batch's views must not be
    read: new exports raise ValueError, tensors made before still map the
    slot but see later batches' bytes.

    rank and world_size default to torch.distributed's (when initialised),
    else $RANK and $WORLD_SIZE, else 0 and 1.  state_dict() after k batches
    and load_state_dict() on a new Stream with the same arguments resume at
    batch k without reading anything before it (the plan is a function of
    the manifest, the options, the seed, the epoch and the rank); with
    order="as_completed" the state also lists the batches above k already
    taken, which the resumed stream reads again (fewer than the slots) and
    drops: every batch is delivered once across the checkpoint.  Other
    keywords go to the library: slots, prefetch, qd,
    readers (reader threads, each with its own io_uring; default: the CPUs
    the process may use, at most 4), chunk_bytes, direct ("auto"/"on"/"off"), on_error ("stop"/"skip"),
    order ("in_order"/"as_completed"), shard_pad ("exact"/"pad"/"drop"),
    no_crc, pin ("auto"/"module"/"mlock"/"none"), handoff
    ("copied"/"queued"/"host"), coalesce ("auto"/"on"/"off": shard-sequential
    reads, consecutive items of a batch from one file with small gaps, such
    as tar members and their headers, read as one range into a staging
    buffer and copied to their places; "auto" does it for runs of small
    items, "on" for every run, "off" reads item by item; stats() counts them
    in "coalesced_reads" and "coalesced_items").  coalesce does not change
    which items a batch holds: a state saved with one value resumes with
    another.
    """

    def __init__(self, source=None, *, tar=None, batch_bytes=0, batch_items=0,
                 shuffle=False, seed=0, epochs=1, rank=None, world_size=None,
                 device=None, item_bytes=0, ctx=None, module="auto", **opts):
        backend, cuda_device, on_dev = _device(device)
        if source is None and tar is None:
            raise ValueError("pinmem.Stream: give a source (manifest, manifest file or files) or tar=[shards]")
        if isinstance(tar, (str, bytes, os.PathLike)):
            raise ValueError("pinmem.Stream: tar= takes a list of shards, not one path")
        if isinstance(source, _pinmem.Manifest):
            if tar is not None:
                raise ValueError("pinmem.Stream: tar= with a Manifest: add the shards with manifest.add_tar()")
            self.manifest = source
        else:
            self.manifest = _pinmem.Manifest()
            if isinstance(source, (str, bytes, os.PathLike)):
                self.manifest.load(source)
            else:
                for f in source or ():
                    self.manifest.add_file(f, item_bytes)
        for shard in tar or ():
            self.manifest.add_tar(shard)
        if rank is None:
            rank = _dist_default("rank", "RANK", lambda d: d.get_rank())
        if world_size is None:
            world_size = _dist_default("world_size", "WORLD_SIZE", lambda d: d.get_world_size())
        self._own_ctx = ctx is None
        if ctx is not None:
            # Device views are labelled from the context: it must be the device asked for.
            have = ctx.info()["backend"]
            if device is not None and have != backend:
                raise ValueError("pinmem.Stream: device=%r needs a context with the %r backend, "
                                 "this one has %r" % (device, backend, have))
        self.ctx = ctx if ctx is not None else _pinmem.Context(
            module=module, backend=backend, cuda_device=cuda_device)
        self.device = device
        if device is None:
            opts.setdefault("handoff", "host")
        self._opts = dict(opts, batch_bytes=batch_bytes, batch_items=batch_items,
                          shuffle=bool(shuffle), seed=seed, epochs=epochs,
                          rank=rank or 0, world_size=world_size or 1,
                          cuda_device=cuda_device if backend == "cuda" else -1,
                          views_on_device=on_dev)
        self._s = None
        self._skip = 0      # the batch the library starts at (start_batch)
        # Where a resume starts: every batch below _low was taken (or dropped as
        # failed, on_error="skip"); _done holds those above it taken out of order.
        self._low = 0
        self._done = set()
        self._drop = set()  # batches a resumed stream reads again and drops

    def _config(self):
        o = self._opts
        return {"items": len(self.manifest), "bytes": self.manifest.nbytes,
                **{k: o[k] for k in ("batch_bytes", "batch_items", "shuffle", "seed",
                                     "epochs", "rank", "world_size")}}

    def _open(self):
        if self._s is None:
            self._s = _pinmem._Stream(self.ctx, self.manifest, start_batch=self._skip,
                                      **self._opts)
        return self._s

    def __iter__(self):
        self._open()
        return self

    def __next__(self):
        """The next Batch; StopIteration at the end.  After a pinmem.Error (a failed
        batch with on_error="stop", every slot held) the stream can be asked again."""
        s = self._open()
        while True:
            b = s.next()
            if b is None:
                raise StopIteration
            if b.seq not in self._drop:
                break
            # taken before the checkpoint (order="as_completed"): read again, not delivered again
            self._drop.discard(b.seq)
            b.release()
        self._taken(b.seq)
        return b

    def _taken(self, seq):
        if seq == self._low:
            self._low += 1
        elif seq > self._low:
            self._done.add(seq)
        if self._done:
            # out of order, or a batch below was dropped as failed: the library knows
            self._sync()

    def _sync(self):
        """Advance _low past what the library handed over or dropped as failed."""
        if self._s is not None:
            try:
                self._low = max(self._low, self._s.resume_batch())
            except (ValueError, RuntimeError):
                pass        # closed: nothing changed since the last batch taken
        while self._low in self._done:
            self._low += 1
        self._done = {q for q in self._done if q > self._low}

    def state_dict(self):
        """Where the consumer is: "batches", the lowest batch number not taken yet
        (batches a failure skipped count as taken), "delivered", the batches above
        it taken already (order="as_completed"), and what makes the order."""
        if self._done:
            self._sync()
        return {"batches": self._low, "delivered": sorted(self._done),
                "config": self._config()}

    def load_state_dict(self, state):
        """Resume at state's batch; call before iterating, with the same source and options.
        A state without "delivered" (saved by an older pinmem) resumes at "batches"."""
        if self._s is not None:
            raise RuntimeError("pinmem.Stream: load_state_dict() must come before iterating")
        if not isinstance(state, Mapping):
            raise ValueError("pinmem.Stream: a state is the dict state_dict() returned, not %r"
                             % (type(state).__name__,))
        if state.get("config") != self._config():
            raise ValueError("pinmem.Stream: state was saved with %r, this stream has %r"
                             % (state.get("config"), self._config()))
        low = _state_int(state.get("batches"), "batches")
        if low < 0:
            raise ValueError("pinmem.Stream: state['batches'] is %d, not a batch number" % low)
        delivered = state.get("delivered", ())
        if isinstance(delivered, (str, bytes, Mapping)) or not hasattr(delivered, "__iter__"):
            raise ValueError("pinmem.Stream: state['delivered'] must be a list of batch numbers, "
                             "not %r" % (delivered,))
        done = set()
        for q in delivered:
            q = _state_int(q, "delivered")
            if q <= low or q in done:
                raise ValueError("pinmem.Stream: state['delivered'] must list distinct batch numbers "
                                 "above state['batches'] (%d), not %r" % (low, list(delivered)))
            done.add(q)
        self._skip = self._low = low
        self._done = done
        self._drop = set(done)

    def stats(self):
        """The library's counters: bytes, batches, GB/s, waits, latencies, pin mode."""
        return self._open().stats()

    def close(self):
        """Stop reading; slots are unpinned once no batch of this stream is left."""
        if self._s is not None:
            self._s.close()
        if self._own_ctx:
            self.ctx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
