# SPDX-License-Identifier: MIT
"""Shared fixtures of the pinmem Python tests (run by `make python-check`).

PINMEM_TEST_MODULE=1 (set by the VM run) means /dev/pinmem must be used:
contexts are opened with module="require" and pinned bytes are read from
the module's STATS ioctl; otherwise the library falls back to
mlock and VmLck counts them.
"""
import ctypes
import gc
import multiprocessing
import os
import re

import pytest

import pinmem

# torch's own DataLoader suite runs apart, twice (torch_suite/run.py, after this suite on
# each platform: tests/platform/suite.sh).
collect_ignore = ["torch_suite"]

# Python 3.14 starts workers with forkserver by default: each is a fresh process that
# imports torch (seconds each on a 2-core machine), for torch's loader and pinmem's alike,
# and the suite starts hundreds.  The forkserver imports them once and forks workers
# from there, as a training script may (multiprocessing.set_forkserver_preload).
# Workers that import everything themselves, as 3.14's default gives a script that
# does not preload, run in the spawn tests and in the child scripts' tests (EXIT_CHILD,
# CTRL_C_CHILD, UNPRIVILEGED: processes of their own, without this preload).
multiprocessing.set_forkserver_preload(["torch", "pinmem.torch"])
# The ASan row (make python-check-asan) asks for forkserver on every Python: GCC 12's
# libasan takes no allocator lock across fork(), so a worker forked while another
# thread of pytest was in malloc can wait on that lock forever (seen once, make check
# on a clean clone).  Tests that ask for fork by name still fork.  The
# forkserver is single-threaded when it forks; the plain rows keep the platform default.
if os.environ.get("PINMEM_TEST_START_METHOD"):
    multiprocessing.set_start_method(os.environ["PINMEM_TEST_START_METHOD"], force=True)

MODULE = os.environ.get("PINMEM_TEST_MODULE") == "1"
MODULE_MODE = "require" if MODULE else "auto"

# The test-only CUDA runtime stand-in (tests/cuda_stub), built by `make python-check`
# when the toolkit's headers are there.
CUDA_STUB = os.environ.get("PINMEM_CUDA_STUB", "")
needs_cuda_stub = pytest.mark.skipif(not os.path.exists(CUDA_STUB),
                                     reason="no CUDA stand-in ($PINMEM_CUDA_STUB)")


def cuda_stub(devices):
    """The stand-in libpinmem loads (the same handle it dlopens), reset to `devices` GPUs."""
    lib = ctypes.CDLL(CUDA_STUB)
    lib.cudastub_reset(devices, 0)
    return lib


def status_kb(field):
    with open("/proc/self/status") as f:
        m = re.search(r"^%s:\s+(\d+) kB" % field, f.read(), re.M)
    return int(m.group(1)) if m else 0


def pinned_bytes(collect=True):
    """Bytes this process has pinned: mlock'd (VmLck), plus with the module what
    its STATS ioctl counts machine-wide (only the tests pin in the VM; VmPin
    stays 0 for root, whose CAP_IPC_LOCK exempts it from RLIMIT_MEMLOCK),
    else VmPin.

    Garbage is collected first (unless collect=False, for tests that what
    they check is freed without the cyclic collector): a buffer an earlier
    test left in a reference cycle would otherwise be freed in the middle of
    the next measurement."""
    if collect:
        gc.collect()
    if MODULE:
        return status_kb("VmLck") * 1024 + pinmem.module_stats()["global"]["pinned_bytes"]
    return (status_kb("VmLck") + status_kb("VmPin")) * 1024


@pytest.fixture
def ctx():
    c = pinmem.open(module=MODULE_MODE)
    yield c
    c.close()


@pytest.fixture
def data_files(tmp_path):
    """Ten files of different sizes with random bytes; returns their paths."""
    rnd = __import__("random").Random(7)
    paths = []
    for i in range(10):
        p = tmp_path / ("f%02d" % i)
        p.write_bytes(bytes(rnd.getrandbits(8) for _ in range(3000 + 517 * i)))
        paths.append(str(p))
    return paths
