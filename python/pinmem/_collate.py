# SPDX-License-Identifier: MIT
"""Collating a batch straight into a ring slot, and rebuilding it from there.

A worker collates its samples the way torch's default_collate does, except
that every tensor leaf is stacked directly into the slot (one copy, the one
default_collate makes into shared memory anyway); what travels to the main
process is the batch's structure with each leaf replaced by a Leaf (offset,
dtype, shape).  A custom collate_fn's result is placed into the slot leaf by
leaf, in the worker.
"""
import collections.abc
import re

import numpy
import torch

_ALIGN = 64
_NP_BAD_DTYPE = re.compile(r"[SaUO]")


class SlotTooSmallError(RuntimeError):
    """A collated batch does not fit one slot; the message says how many bytes it needs."""


class _Overflow(Exception):
    pass


class _Foreign(Exception):
    """The batch holds what a slot cannot carry as torch would deliver it (a tensor subclass,
    one that requires grad or is not on the CPU, a container that is not exactly a dict, list,
    tuple or namedtuple): the whole batch travels as torch's collate returns it."""


def _plain_tensor(t):
    return (type(t) is torch.Tensor and t.device.type == "cpu" and t.layout == torch.strided
            and not t.requires_grad)


def _plain_container(obj):
    """obj is a dict, list, tuple or namedtuple that _map rebuilds as it was."""
    tp = type(obj)
    return tp in (dict, list, tuple) or (isinstance(obj, tuple) and hasattr(obj, "_fields"))


def _foreign_container(obj):
    return (isinstance(obj, (collections.abc.Mapping, collections.abc.Sequence))
            and not isinstance(obj, (str, bytes)) and not _plain_container(obj))


class Leaf:
    """A tensor (or numpy array) of the batch: where it lies in the slot."""
    __slots__ = ("kind", "offset", "nbytes", "dtype", "shape")

    def __init__(self, kind, offset, nbytes, dtype, shape):
        self.kind, self.offset, self.nbytes = kind, offset, nbytes
        self.dtype, self.shape = dtype, shape

    def __reduce__(self):
        return (Leaf, (self.kind, self.offset, self.nbytes, self.dtype, self.shape))


def _torch_dtype_name(dtype):
    return str(dtype)[len("torch."):]


class SlotWriter:
    """Hands out tensors inside one slot of the ring (a uint8 tensor over the shared memory)."""

    def __init__(self, ring, base, size):
        self.ring, self.base, self.size, self.used = ring, base, size, 0

    def tensor(self, shape, dtype, kind="tensor"):
        """An uninitialised tensor in the slot, and its Leaf."""
        shape = tuple(int(d) for d in shape)
        numel = 1
        for d in shape:
            numel *= d
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        leaf = Leaf(kind, -1, nbytes, _torch_dtype_name(dtype), shape)
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype), leaf
        off = (self.used + _ALIGN - 1) // _ALIGN * _ALIGN
        if off + nbytes > self.size:
            raise _Overflow()
        self.used = off + nbytes
        leaf.offset = off
        raw = self.ring[self.base + off:self.base + off + nbytes]
        return raw.view(dtype).view(shape), leaf

    def put(self, t, kind="tensor"):
        """Copy tensor t into the slot."""
        out, leaf = self.tensor(t.shape, t.dtype, kind)
        out.copy_(t)
        return leaf


def collate_into(batch, w):
    """default_collate(batch), with every tensor leaf written into w's slot."""
    elem = batch[0]
    if isinstance(elem, torch.Tensor):
        if not all(_plain_tensor(b) for b in batch):
            raise _Foreign()
        out, leaf = w.tensor((len(batch),) + tuple(elem.shape), elem.dtype)
        torch.stack(batch, 0, out=out)
        return leaf
    elem_type = type(elem)
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if elem_type.__name__ in ("ndarray", "memmap"):
            if any(type(b) is not numpy.ndarray and type(b) is not numpy.memmap for b in batch):
                raise _Foreign()
            if _NP_BAD_DTYPE.search(elem.dtype.str) is not None:
                raise TypeError("default_collate: batch must contain tensors, numpy arrays, "
                                "numbers, dicts or lists; found {}".format(elem.dtype))
            return collate_into([torch.as_tensor(b) for b in batch], w)
        if elem.shape == ():
            return w.put(torch.as_tensor(batch))
    if isinstance(elem, float):
        return w.put(torch.tensor(batch, dtype=torch.float64))
    if isinstance(elem, int):
        return w.put(torch.tensor(batch))
    if isinstance(elem, (str, bytes)):
        return batch
    if _foreign_container(elem) or any(type(b) is not elem_type for b in batch):
        raise _Foreign()
    if isinstance(elem, collections.abc.Mapping):
        try:
            return elem_type({key: collate_into([d[key] for d in batch], w) for key in elem})
        except TypeError:
            return {key: collate_into([d[key] for d in batch], w) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return elem_type(*(collate_into(list(s), w) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [collate_into(list(s), w) for s in transposed]
        try:
            return elem_type([collate_into(list(s), w) for s in transposed])
        except TypeError:
            return [collate_into(list(s), w) for s in transposed]
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, "
                    "dicts or lists; found {}".format(elem_type))


def place(obj, w):
    """A custom collate_fn's result with its tensors and numpy arrays copied into w's slot."""
    if isinstance(obj, torch.Tensor):
        if not _plain_tensor(obj):
            raise _Foreign()
        return w.put(obj)
    if isinstance(obj, numpy.ndarray) and _NP_BAD_DTYPE.search(obj.dtype.str) is None:
        if type(obj) is not numpy.ndarray:
            raise _Foreign()
        return w.put(torch.as_tensor(obj), "ndarray")
    if _foreign_container(obj):
        raise _Foreign()
    return _map(obj, lambda x: place(x, w))


def _map(obj, fn):
    """obj with fn applied to the members of its dicts, lists, tuples and namedtuples (exactly
    those types: anything else, a dict subclass say, is left as it is)."""
    tp = type(obj)
    if tp is dict:
        return {k: fn(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return tp(*(fn(v) for v in obj))
    if tp is tuple:
        return tuple(fn(v) for v in obj)
    if tp is list:
        return [fn(v) for v in obj]
    return obj


def nbytes_needed(obj):
    """Slot bytes a collated batch takes (with alignment), to size slots and explain overflows."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size() + _ALIGN
    if isinstance(obj, numpy.ndarray):
        return obj.nbytes + _ALIGN
    total = [0]

    def add(x):
        total[0] += nbytes_needed(x)
        return x
    _map(obj, add)
    return total[0]


def materialize(obj, slot_view, device_copy=None):
    """The batch for the consumer: every Leaf becomes a zero-copy tensor (or array) over slot_view."""
    if isinstance(obj, Leaf):
        dtype = getattr(torch, obj.dtype)
        if obj.offset < 0:
            t = torch.empty(obj.shape, dtype=dtype)
        else:
            raw = torch.from_dlpack(slot_view.view(obj.offset, (obj.nbytes,), "uint8"))
            t = raw.view(dtype).view(obj.shape)
        if obj.kind == "ndarray":
            return t.numpy()
        return device_copy(t) if device_copy is not None else t
    return _map(obj, lambda x: materialize(x, slot_view, device_copy))
