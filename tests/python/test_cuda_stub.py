# SPDX-License-Identifier: MIT
"""Stream batches on the cuda backend, against the test-only CUDA runtime stand-in
(tests/cuda_stub, $PINMEM_CUDA_STUB, built by `make python-check` when the
toolkit's headers are there): what the library is asked to do on which stream."""
import ctypes

import pytest

import pinmem
from conftest import CUDA_STUB as STUB, MODULE_MODE, cuda_stub, needs_cuda_stub

pytestmark = needs_cuda_stub


class Call(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_char * 40), ("a", ctypes.c_void_p), ("b", ctypes.c_void_p),
                ("len", ctypes.c_size_t), ("flags", ctypes.c_uint), ("ret", ctypes.c_int),
                ("dev", ctypes.c_int)]


@pytest.fixture
def stub():
    lib = cuda_stub(2)
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


def test_default_context_is_the_threads_current_gpu(stub, data_files):
    """Rank 3 called torch.cuda.set_device(3): its context, stream and slots are on
    GPU 3 without naming it, and nothing is opened on GPU 0."""
    import threading
    stub.cudastub_reset(8, 0)
    got = {}

    def rank3():
        stub.cudaSetDevice(3)
        ctx = pinmem.open(backend="cuda", cuda_library=STUB, module=MODULE_MODE)
        got["ctx"] = ctx.info()["cuda_device"]
        with pinmem.Stream(data_files, batch_items=2, ctx=ctx, device="cuda") as s:
            with next(iter(s)) as b:
                got["views"] = b.views[0].__dlpack_device__()
        ctx.close()
    t = threading.Thread(target=rank3)
    t.start()
    t.join()
    assert got == {"ctx": 3, "views": (2, 3)}
    assert stub.cudastub_count(b"retained0") == 0


def test_release_waits_for_the_consumer_stream(stub, data_files):
    """batch.release() after torch.from_dlpack on a stream: the slot is rewritten only
    after that stream's work, as with 'with batch:' (not under the running kernel)."""
    ctx = pinmem.open(backend="cuda", cuda_library=STUB, cuda_device=1, module=MODULE_MODE)
    st = stream_on(stub, 1)
    with pinmem.Stream(data_files, batch_items=2, ctx=ctx, device="cuda:1") as s:
        b = next(iter(s))
        cap = b.views[0].__dlpack__(stream=st)
        n0 = stub.cudastub_log_count()
        b.release()
        assert st in [c.b for c in calls_since(stub, n0, b"cudaEventRecord")]
        del cap
    stub.cudastub_complete()
    ctx.close()


def test_dlpack_stream_values(stub, data_files):
    """DLPack's stream=: 1 and 2 are the legacy and per-thread default streams (what
    torch.from_dlpack passes on the default stream), -1 asks for no synchronization,
    0 is ambiguous and refused."""
    ctx = pinmem.open(backend="cuda", cuda_library=STUB, cuda_device=1, module=MODULE_MODE)
    stub.cudaSetDevice(1)
    with pinmem.Stream(data_files, batch_items=2, ctx=ctx, device="cuda:1", handoff="queued") as s:
        it = iter(s)
        for value in (1, 2):
            with next(it) as b:
                n0 = stub.cudastub_log_count()
                b.views[0].__dlpack__(stream=value)
                waits = calls_since(stub, n0, b"cudaStreamWaitEvent")
                assert [(w.a, w.ret) for w in waits] == [(value, 0)]
                n0 = stub.cudastub_log_count()
            # released after the consumer's work: a per-thread stream is the exporting
            # thread's, so the legacy stream (which waits for it) stands in for it
            recorded_on = [c.b for c in calls_since(stub, n0, b"cudaEventRecord")]
            assert 1 in recorded_on and 2 not in recorded_on
        with next(it) as b:
            n0 = stub.cudastub_log_count()
            b.views[0].__dlpack__(stream=-1)
            assert calls_since(stub, n0, b"cudaStreamWaitEvent") == []
            with pytest.raises(ValueError, match="stream=0 is not a CUDA stream"):
                b.views[0].__dlpack__(stream=0)
    stub.cudastub_complete()
    ctx.close()


def test_second_close_while_the_first_tears_down(stub, data_files, monkeypatch):
    """Two threads close one stream: the first tears it down without the GIL and waits
    for its copies (held here); the second finds nothing left to destroy and returns,
    leaving the context to the first (it used to release the context the teardown
    still used, and closing it waited on the same copies)."""
    import threading
    monkeypatch.setenv("PINMEM_CUDART", STUB)
    s = pinmem.Stream(data_files, batch_items=2, device="cuda:1", handoff="queued",
                      module=MODULE_MODE)
    stub.cudastub_hold(2)                        # copies, and waits on them, block
    it = iter(s)
    next(it).release()                           # handed over with its copy queued
    first = threading.Thread(target=s.close)
    first.start()
    first.join(0.5)
    assert first.is_alive()                      # tearing down, waiting for the copies
    second = threading.Thread(target=s.close)
    second.start()
    second.join(5)
    second_returned, first_waiting = not second.is_alive(), first.is_alive()
    stub.cudastub_hold(0)
    first.join(30)
    second.join(30)
    assert not second.is_alive() and not first.is_alive()
    assert second_returned and first_waiting     # the second close did not wait for it
    assert stub.cudastub_count(b"retained1") == 0
