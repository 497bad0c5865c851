# SPDX-License-Identifier: MIT
"""pinmem.open, Context.empty/pin and Buffer: buffer protocol, DLPack, lifetime, errors."""
import errno
import mmap
import os
import resource
import subprocess
import sys

import numpy
import pytest

import pinmem
from conftest import MODULE, MODULE_MODE, pinned_bytes

MiB = 1 << 20


def test_open_info(ctx):
    info = ctx.info()
    assert info["backend"] in ("host", "cuda", "none")
    assert info["page_size"] == os.sysconf("SC_PAGE_SIZE")
    if MODULE:
        assert info["module"]
    if not info["module"]:
        assert info["module_note"]


def test_open_bad_arguments():
    with pytest.raises(ValueError, match="unknown backend"):
        pinmem.open(backend="tpu")
    with pytest.raises(ValueError, match="unknown module mode"):
        pinmem.open(module="maybe")


def test_open_require_module_without_module_says_why(tmp_path):
    with pytest.raises(pinmem.Error) as e:
        pinmem.open(module="require", device=str(tmp_path / "no-such-device"))
    assert "module" in str(e.value)


def test_empty_shape_dtype_buffer_protocol(ctx):
    b = ctx.empty((4, 5), "float32")
    assert b.shape == (4, 5) and b.dtype == "float32" and b.nbytes == 80
    assert b.pin_mode == ("module" if MODULE else b.pin_mode)
    assert b.pin_mode in ("module", "mlock")
    m = memoryview(b)
    assert m.format == "f" and m.shape == (4, 5) and not m.readonly
    a = numpy.asarray(b)
    a[:] = numpy.arange(20, dtype=numpy.float32).reshape(4, 5)
    assert m[3, 4] == 19.0
    assert b.exports >= 1


def test_empty_nbytes_and_torch_style_dtype(ctx):
    b = ctx.empty(1000)
    assert b.shape == (1000,) and b.dtype == "uint8"
    assert ctx.empty(3, "torch.int64").nbytes == 24


def test_dlpack_shares_memory_with_numpy(ctx):
    b = ctx.empty((3, 7), "int32")
    assert b.__dlpack_device__() == (1, 0)
    a = numpy.from_dlpack(b)
    assert a.shape == (3, 7) and a.dtype == numpy.int32
    assert a.ctypes.data == b.ptr
    memoryview(b)[2, 6] = 12345              # numpy < 2 makes DLPack imports read-only
    assert a[2, 6] == 12345


def test_view_offset_shape_dtype(ctx):
    b = ctx.empty(4096)
    v = b.view(64, (4, 4), "float64")
    assert v.ptr == b.ptr + 64 and v.nbytes == 128
    numpy.asarray(v)[:] = 2.5
    assert numpy.frombuffer(memoryview(b)[64:192], numpy.float64).tolist() == [2.5] * 16
    with pytest.raises(ValueError, match="not aligned"):
        b.view(3, None, "int32")
    with pytest.raises(ValueError, match="needs"):
        b.view(4000, (100,), "uint8")
    with pytest.raises(ValueError, match="outside"):
        b.view(5000)


def test_bad_shape_dtype_pin(ctx):
    with pytest.raises(TypeError, match="unsupported dtype"):
        ctx.empty(4, "complex64")
    with pytest.raises(ValueError, match="bad shape"):
        ctx.empty((-1, 4))
    with pytest.raises(ValueError, match="unknown pin mode"):
        ctx.empty(4, pin="glue")


def test_freed_when_last_view_goes(ctx):
    base = pinned_bytes()
    b = ctx.empty(8 * MiB)
    assert pinned_bytes() - base >= 8 * MiB
    a = numpy.asarray(b)
    d = numpy.from_dlpack(b.view(0, (16,), "uint8"))
    del b
    a[0] = 1                                 # still mapped and pinned
    assert pinned_bytes() - base >= 8 * MiB
    del a
    assert pinned_bytes() - base >= 8 * MiB  # the DLPack consumer still holds it
    del d
    assert pinned_bytes() == base


def test_pin_mmap_in_place(ctx):
    base = pinned_bytes()
    fd = os.memfd_create("t")
    os.ftruncate(fd, 4 * MiB)
    mm = mmap.mmap(fd, 4 * MiB)
    os.close(fd)
    b = ctx.pin(mm)
    assert b.ptr and b.nbytes == 4 * MiB
    assert b.pin_mode in ("module", "mlock")
    assert pinned_bytes() - base >= 4 * MiB
    mm[0:5] = b"hello"
    assert bytes(memoryview(b)[0:5]) == b"hello"
    with pytest.raises(BufferError):
        mm.close()                           # pinned: the mapping cannot go away
    del b
    assert pinned_bytes() == base
    mm.close()


def test_pin_unaligned_memory_is_refused(ctx):
    base = pinned_bytes()
    with pytest.raises(pinmem.Error) as e:
        ctx.pin(bytearray(10000))
    assert e.value.errno == errno.EINVAL
    assert pinned_bytes() == base


def test_closed_context(ctx):
    b = ctx.empty(100)
    ctx.close()
    assert ctx.closed
    with pytest.raises(ValueError, match="closed"):
        ctx.empty(10)
    memoryview(b)[0] = 7                     # buffers outlive close()
    assert memoryview(b)[0] == 7


def test_context_in_forked_child_fails_clearly(ctx):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            ctx.empty(10)
            os.write(w, b"no error")
        except RuntimeError as e:
            os.write(w, str(e).encode())
        finally:
            os._exit(0)
    os.close(w)
    msg = os.read(r, 1000).decode()
    os.waitpid(pid, 0)
    assert "forked child" in msg
    assert ctx.empty(10).nbytes == 10        # the parent's context still works


BUDGET_CHILD = r"""
import os, resource, sys
# nobody, without CAP_IPC_LOCK, in the group that may open /dev/pinmem.
os.setgroups([os.stat("/dev/pinmem").st_gid] if os.path.exists("/dev/pinmem") else [])
os.setgid(65534); os.setuid(65534)
resource.setrlimit(resource.RLIMIT_MEMLOCK, (256 * 1024, 256 * 1024))
import pinmem
ctx = pinmem.open(module=sys.argv[1])
try:
    ctx.empty(4 << 20, pin=sys.argv[2])
except pinmem.BudgetError as e:
    print("BUDGET", e.budget, e.errno, e.strerror)
    print("LAST", ctx.last_error)
"""


@pytest.mark.parametrize("module,pin", [("off", "mlock")] + ([("require", "module")] if MODULE else []))
def test_budget_error_carries_the_library_sentence(module, pin):
    if os.getuid() != 0:
        pytest.skip("needs root to drop CAP_IPC_LOCK by becoming nobody")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", BUDGET_CHILD, module, pin], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    budget, err, sentence = lines["BUDGET"].split(" ", 2)
    assert budget == "rlimit" and int(err) == errno.ENOMEM
    assert "RLIMIT_MEMLOCK" in sentence and "ulimit -l" in sentence
    assert "4.0 MiB" in sentence or "4194304" in sentence
    assert lines["LAST"] == sentence


@pytest.mark.skipif(not MODULE, reason="needs pinmem.ko (runs in the VM)")
def test_module_user_budget_refusal():
    st = pinmem.module_stats()
    user = st["user"]
    if user["limit_bytes"] == st["unlimited"] or user["limit_bytes"] - user["pinned_bytes"] > 700 * MiB:
        pytest.skip("per-user budget too large to exceed in the VM's memory")
    ask = user["limit_bytes"] - user["pinned_bytes"] + MiB
    ctx = pinmem.open(module="require")
    base = pinned_bytes()
    with pytest.raises(pinmem.BudgetError) as e:
        ctx.empty(ask, pin="module")
    assert e.value.budget == "user" and e.value.errno == errno.EDQUOT
    assert "per-user budget" in e.value.strerror and "in use" in e.value.strerror
    after = pinmem.module_stats()
    assert after["user"]["refused_user"] == user["refused_user"] + 1
    # ABI 1.5: by reason, for this user and globally; only "user" moved
    for scope in ("user", "global"):
        assert set(after[scope]["refused"]) == {"global", "user", "rlimit", "fault",
                                                "regions", "cgroup", "refs"}
        for reason, n in after[scope]["refused"].items():
            assert n == st[scope]["refused"][reason] + (reason == "user"), (scope, reason)
    assert after["users_evicted"]["max_idle_users"] >= 1
    assert pinned_bytes() == base                # nothing left pinned by the refusal


def test_module_stats_without_module_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        pinmem.module_stats(device=str(tmp_path / "none"))


def test_crc32c():
    assert pinmem.crc32c(b"123456789") == 0xE3069283


def test_forked_child_writes_into_pinned_memfd(ctx):
    """What pinmem.torch's workers do: write into the shared ring the parent pinned."""
    fd = os.memfd_create("ring")
    os.ftruncate(fd, 2 * MiB)
    mm = mmap.mmap(fd, 2 * MiB)
    os.close(fd)
    b = ctx.pin(mm)
    pid = os.fork()
    if pid == 0:
        mm[MiB:MiB + 6] = b"worker"
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    assert bytes(memoryview(b)[MiB:MiB + 6]) == b"worker"
    if MODULE:
        assert b.pin_mode == "module"
    del b
    mm.close()


def test_inherited_buffer_in_forked_child_fails_clearly(ctx):
    """Library memory is MADV_DONTFORK: a child touching it gets an error, not SIGSEGV;
    memory the caller pinned in place (a shared mmap) stays usable there."""
    import mmap
    own = ctx.empty(4096)
    view = own.view(16, (8,))
    mm = mmap.mmap(-1, 4096, mmap.MAP_SHARED)
    shared = ctx.pin(mm)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            msgs = []
            for what in (lambda: memoryview(own), lambda: view.__dlpack__(), lambda: own.view(8)):
                try:
                    what()
                    msgs.append("no error")
                except RuntimeError as e:
                    msgs.append(str(e))
            memoryview(shared)[:2] = b"ok"
            os.write(w, "\n".join(msgs).encode())
        finally:
            os._exit(0)
    os.close(w)
    msg = os.read(r, 4000).decode()
    _, status = os.waitpid(pid, 0)
    assert status == 0, "child died: %r" % status
    assert msg.count("cannot be used in a forked child") == 3, msg
    assert mm[:2] == b"ok"
    del shared
