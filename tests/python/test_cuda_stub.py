# SPDX-License-Identifier: MIT
"""Stream batches on the cuda backend, against the test-only CUDA runtime stand-in
(tests/cuda_stub, $PINMEM_CUDA_STUB, built by `make python-check` when the
toolkit's headers are there): what the library is asked to do on which stream."""
import ctypes
import os

import pytest

import pinmem
from conftest import MODULE_MODE

STUB = os.environ.get("PINMEM_CUDA_STUB", "")
pytestmark = pytest.mark.skipif(not os.path.exists(STUB), reason="no CUDA stand-in ($PINMEM_CUDA_STUB)")


class Call(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_char * 40), ("a", ctypes.c_void_p), ("b", ctypes.c_void_p),
                ("len", ctypes.c_size_t), ("flags", ctypes.c_uint), ("ret", ctypes.c_int),
                ("dev", ctypes.c_int)]


@pytest.fixture
def stub():
    lib = ctypes.CDLL(STUB)             # the same handle libpinmem dlopens
    lib.cudastub_reset(2, 0)
    lib.cudastub_log_at.restype = ctypes.POINTER(Call)
    return lib


def calls_since(lib, n0, fn):
    out = []
    for i in range(n0, lib.cudastub_log_count()):
        c = lib.cudastub_log_at(i).contents
        if c.fn == fn:
            out.append(c)
    return out


def stream_on(lib, dev):
    lib.cudaSetDevice(dev)
    st = ctypes.c_void_p()
    assert lib.cudaStreamCreateWithFlags(ctypes.byref(st), 1) == 0
    return st.value


def test_device_views_are_labelled_from_the_context(stub, data_files):
    ctx = pinmem.open(backend="cuda", cuda_library=STUB, cuda_device=1, module=MODULE_MODE)
    with pinmem.Stream(data_files, batch_items=2, ctx=ctx, handoff="copied") as s:
        b = next(iter(s))
        assert b.dev.__dlpack_device__() == (2, 1)       # not CPU memory, not GPU 0
        assert b.views[0].__dlpack_device__() == (1, 0)  # no device asked: host views
        b.release()
    with pinmem.Stream(data_files, batch_items=2, ctx=ctx, device="cuda") as s:
        with next(iter(s)) as b:
            assert b.views[0].__dlpack_device__() == (2, 1)
    with pytest.raises(ValueError, match="copies to CUDA device 1, not 0"):
        iter(pinmem.Stream(data_files, device="cuda:0", ctx=ctx))
    ctx.close()


def test_with_and_gc_release_after_the_consumer_stream(stub, data_files):
    ctx = pinmem.open(backend="cuda", cuda_library=STUB, cuda_device=1, module=MODULE_MODE)
    st = stream_on(stub, 1)
    s = pinmem.Stream(data_files, batch_items=2, ctx=ctx, device="cuda:1")
    it = iter(s)
    b = next(it)
    n0 = stub.cudastub_log_count()
    with b:
        cap = b.views[0].__dlpack__(stream=st)   # what torch.from_dlpack does on its stream
    assert st in [c.b for c in calls_since(stub, n0, b"cudaEventRecord")]
    del cap
    b = next(it)
    n0 = stub.cudastub_log_count()
    del b                                        # garbage: after the legacy default stream
    assert None in [c.b for c in calls_since(stub, n0, b"cudaEventRecord")]
    s.close()
    stub.cudastub_complete()
    ctx.close()
