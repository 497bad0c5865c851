# SPDX-License-Identifier: MIT
"""pinmem.torch: torch's DataLoader, with workers writing batches straight into pinned memory.

    from pinmem.torch import DataLoader
    loader = DataLoader(dataset, batch_size=256, shuffle=True, num_workers=4,
                        device="cuda")
    for x, y in loader:          # x, y already on the GPU
        ...

pinmem.torch.DataLoader is a torch.utils.data.DataLoader (a subclass: its
arguments, attributes, iterator semantics and batches are torch's for the
same arguments and seeds).  What differs is where a batch lies.  With
torch's DataLoader(pin_memory=True), workers collate each batch into shared
memory, then the main process's pin thread copies it again into page-locked
memory before the copy to the GPU can be asynchronous.  Here the workers
collate straight into a ring of slots that is itself pinned: one memfd,
mapped shared by the main process and its workers (of any start method:
they map it through /proc), each slot pinned by /dev/pinmem (budgeted,
FOLL_LONGTERM), else with mlock within RLIMIT_MEMLOCK, and registered with
CUDA.  A worker sends only the batch's layout; the main process makes
tensors that view the slot (no CPU copy) and, with a device, queues the
host-to-device copy on its own CUDA stream.

A slot goes back to the workers only once nothing can still read it: with
a device, when the copy's CUDA event has completed; without one, when every
tensor of the batch is gone.  When CUDA is initialised, a slot whose
tensors are gone is fenced: an event recorded on the ring's GPU's current
stream must complete first, so `x.cuda(non_blocking=True)` then dropping x
is safe.

Where it cannot be fast it goes on as torch's loader would, with one
PinningWarning per loader saying what was given up and what fixes it:
- pinning steps down from the module to mlock, to memory only registered
  with CUDA (as torch's pinned memory is; no budget applies), to an
  unpinned ring; loader.pin_mode says which ('module', 'mlock', 'cuda',
  'none'); pin="module"/"mlock" makes a refusal a BudgetError instead;
- the first batches of the first epoch come in ordinary memory: they size
  the slots (nothing is read from the dataset in the main process);
- a batch bigger than a slot comes in ordinary memory (the next epoch's
  ring has slots that fit it); oversize="raise" raises SlotTooSmallError;
- a batch asked for while every slot is held by batches still referenced
  (a user keeping them) comes in ordinary memory.

Each iterator owns its ring and its workers (persistent workers: the one
iterator the loader keeps, as torch's does); the ring is unpinned when the
iterator ends, is dropped (leaving a loop early) or the loader is closed,
except the slots of batches still referenced, which go with their batches.
See docs/python-differences.md for what still differs from torch's loader.
"""
import inspect
from typing import TypeVar

import torch
import torch.utils.data

from . import _state
from ._collate import SlotTooSmallError
from ._loader_iter import MultiIter, PinningWarning, Shared, SingleIter, WorkerError

__all__ = ["DataLoader", "SlotTooSmallError", "WorkerError", "PinningWarning"]

T_co = TypeVar("T_co", covariant=True)
_TORCH_PARAMS = frozenset(inspect.signature(torch.utils.data.DataLoader.__init__).parameters)


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


def _cuda_device_or_none(name):
    """pin_memory_device as a CUDA device (torch also takes other accelerators: not ours)."""
    try:
        return _device_of(name or None)
    except (ValueError, RuntimeError):
        return None


class DataLoader(torch.utils.data.DataLoader[T_co]):
    """DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
    num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
    worker_init_fn=None, multiprocessing_context=None, generator=None, *,
    prefetch_factor=None, persistent_workers=False, pin_memory_device="", in_order=True,
    device=None, slot_bytes=None, slots=None, ctx=None, module="auto", pin="auto",
    oversize="copy")

    torch.utils.data.DataLoader, with batches collated by the workers straight
    into a pinned, CUDA-registered ring (see the module doc).  torch's
    arguments mean what they mean to torch (pin_memory: batches that come in
    ordinary memory are pinned as torch would; ring batches always are).
    device: None yields tensors viewing the pinned slot; "cuda[:N]" yields
    device tensors, copied asynchronously on the loader's CUDA stream (the
    current stream is made to wait for the copy).  slot_bytes: bytes per
    slot (default: learned from the first batches, plus an eighth).  slots:
    ring slots (default num_workers * prefetch_factor + 2, 3 without
    workers).  ctx: a pinmem.Context (default: one opened with
    module=module, on this rank's GPU as pinmem.open picks it, or on
    pin_memory_device).  pin: "auto" (module, else mlock, else CUDA-only
    registration, else unpinned, with one warning), or "module", "mlock",
    "none" (a refusal is a BudgetError).  oversize: "copy" (a batch bigger
    than a slot comes unpinned, with one warning) or "raise"
    (SlotTooSmallError).  Batches always come in order (in_order=False is
    accepted).  pin_mode: how the last ring was pinned ('' before one).
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True, device=None, slot_bytes=None, slots=None, ctx=None,
                 module="auto", pin="auto", oversize="copy"):
        kw = {"persistent_workers": persistent_workers, "pin_memory_device": pin_memory_device,
              "in_order": in_order}
        if prefetch_factor is not None:
            kw["prefetch_factor"] = prefetch_factor
        super().__init__(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
                         collate_fn, pin_memory, drop_last, timeout, worker_init_fn,
                         multiprocessing_context, generator,
                         **{k: v for k, v in kw.items() if k in _TORCH_PARAMS})
        if "in_order" not in _TORCH_PARAMS:
            self.in_order = in_order
        if oversize not in ("copy", "raise"):
            raise ValueError("oversize option should be 'copy' or 'raise'")
        if pin not in ("auto", "module", "mlock", "none"):
            raise ValueError("pin option should be 'auto', 'module', 'mlock' or 'none'")
        if slots is not None and slots < 1:
            raise ValueError("slots option should be a positive int")
        # Plain attributes named as the arguments: frameworks that rebuild a loader from
        # its attributes (Lightning's _update_dataloader) carry them over.
        self.device = _device_of(device)
        self.slot_bytes = slot_bytes
        self.slots = slots
        self.ctx = ctx
        self.module = module
        self.pin = pin
        self.oversize = oversize
        self._shared = Shared(
            ctx=ctx, module=module, pin=pin, device=self.device,
            ring_device=self.device if self.device is not None
            else _cuda_device_or_none(pin_memory_device),
            slot_bytes=slot_bytes, slots=slots, oversize=oversize,
            what="dataset %s" % type(self.dataset).__name__)

    def _get_iterator(self):
        st, self._shared.resume = self._shared.resume, None
        if st is not None and not st["mid_epoch"] and "base_seed" not in st:
            _state.set_rng(self, st["rng"])
            st = None
        if self.num_workers == 0:
            return SingleIter(self, self._shared, st)
        self.check_worker_number_rationality()
        return MultiIter(self, self._shared, st)

    def state_dict(self):
        """Where this loader is (torchdata StatefulDataLoader's contract): mid-epoch, the
        epoch's random state, its workers' base seed and the batches yielded; between
        epochs, the random state the next one starts from.  See load_state_dict."""
        return _state.capture(self, self._shared.current())

    def load_state_dict(self, state_dict):
        """The next iter(self) resumes where state_dict was taken (by this loader or one
        made with the same arguments): the same batches, in the same order, from there on,
        without reading the skipped samples of a map-style dataset."""
        _state.check(state_dict)
        it = self._iterator
        if it is not None:
            it._shutdown_workers()      # persistent workers: a fresh iterator resumes
            self._iterator = None
        _state.restore_dataset(self, state_dict)
        self._shared.resume = state_dict

    def __iter__(self):
        it = self._iterator
        if it is not None and getattr(it, "_shutdown", False):
            # Persistent workers stopped (close(), a dead worker, Ctrl-C): start new ones.
            self._iterator = None
        return super().__iter__()

    @property
    def pin_mode(self):
        """How the last ring was pinned: 'module', 'mlock', 'cuda', 'none' ('' before one)."""
        return self._shared.pin_mode

    def close(self):
        """Stop this loader's iterators' workers and unpin their rings (a slot whose batch
        is still referenced is unpinned with it); the loader can be iterated again."""
        for it in list(self._shared.iterators):
            it._shutdown_workers()
        self._iterator = None
        sh = self._shared
        sh.drop_spare()
        if sh.ctx is not None:
            sh.ctx.close()          # closes once the last ring made from it is gone
            sh.ctx = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
