# SPDX-License-Identifier: MIT
"""pinmem.torch.DataLoader's pinning ladder: module, mlock within RLIMIT_MEMLOCK, CUDA-only
registration, unpinned; one warning naming `pinctl doctor`; never a BudgetError where torch's
loader runs; an explicit pin= still refuses, naming what this process holds."""
import json
import os
import resource
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import pinmem  # noqa: E402
import pinmem._ring as ring_mod  # noqa: E402
import pinmem.torch as pt  # noqa: E402
from conftest import MODULE_MODE  # noqa: E402
from test_loader import Images, clone, equal, run_guarded  # noqa: E402

NOBODY = 65534


class FakeBuf:
    def __init__(self, mode, registered):
        self.pin_mode, self.registered = mode, registered


class FakeCtx:
    """A context whose pins are refused for the modes in `refuse`."""

    def __init__(self, module, backend, refuse):
        self._info = {"module": module, "backend": backend, "cuda_device": -1}
        self.refuse, self.tried, self.closed = refuse, [], False

    def info(self):
        return self._info

    def pin(self, obj, pin="auto", register=True):
        self.tried.append((pin, register))
        if pin in self.refuse:
            raise pinmem.BudgetError("%s refused: over budget" % pin)
        return FakeBuf(pin if pin != "auto" else "module", register and self._info["backend"] == "cuda")


def ladder(ctx, pin="auto"):
    mv = memoryview(bytearray(3 * 4096))
    buf, mode, notes = ring_mod.pin_ring(ctx, mv, pin)
    return mode, notes, [t[0] for t in ctx.tried]


def test_ladder_steps_down_in_order():
    # the module pins: nothing to say
    assert ladder(FakeCtx(True, "cuda", set()))[:2] == ("module", [])
    # the module refuses (a budget): mlock, and the refusal is noted
    mode, notes, tried = ladder(FakeCtx(True, "host", {"module"}))
    assert mode == "mlock" and tried == ["module", "mlock"]
    assert "/dev/pinmem refused" in notes[0]
    # no module, mlock refused, a CUDA backend: registered with CUDA only, budgets not enforced
    mode, notes, tried = ladder(FakeCtx(False, "cuda", {"mlock"}))
    assert mode == "cuda" and tried == ["mlock", "none"]
    assert any("no pinmem budget applies" in n for n in notes)
    # no CUDA either: an unpinned ring, never an error
    mode, notes, _ = ladder(FakeCtx(False, "host", {"mlock"}))
    assert mode == "none" and any("not pinned" in n for n in notes)


def test_ladder_skips_mlock_beyond_the_rlimit(monkeypatch):
    monkeypatch.setattr(ring_mod, "mlock_room", lambda: 8192)
    mode, notes, tried = ladder(FakeCtx(False, "host", set()))
    assert mode == "none" and "mlock" not in tried
    assert "RLIMIT_MEMLOCK" in notes[0]


def test_explicit_pin_refusal_is_a_budget_error_naming_the_holders():
    held = pt.DataLoader(Images(), batch_size=4, num_workers=0, module=MODULE_MODE,
                         slot_bytes=8192)
    it = iter(held)
    next(it)                                  # a live ring in this process
    with pytest.raises(pinmem.BudgetError) as e:
        ladder(FakeCtx(False, "host", {"mlock"}), pin="mlock")
    msg = str(e.value)
    assert "mlock refused" in msg and "pin='mlock' asked for explicitly" in msg
    assert "a pinmem.torch.DataLoader ring (dataset Images): 3 slots x 8.0 KiB = 24.0 KiB" in msg
    del it
    held.close()


def test_one_warning_naming_pinctl_doctor(monkeypatch):
    """An unpinned ring (mlock over the rlimit, no module): the batches are torch's, the
    loader says 'none' and warns once, for every epoch."""
    monkeypatch.setattr(ring_mod, "mlock_room", lambda: 0)
    L = pt.DataLoader(Images(), batch_size=4, num_workers=2, module="off")
    with pytest.warns(pt.PinningWarning) as rec:
        got = [[b[1].tolist() for b in L] for _ in range(2)]
    msgs = [str(w.message) for w in rec if issubclass(w.category, pt.PinningWarning)]
    assert len(msgs) == 1 and "pinctl doctor" in msgs[0] and "RLIMIT_MEMLOCK" in msgs[0]
    assert L.pin_mode == "none"
    want = [b[1].tolist() for b in torch.utils.data.DataLoader(Images(), batch_size=4)]
    assert got == [want, want]
    L.close()


UNPRIVILEGED = r"""
import json, sys, warnings
import torch
import pinmem, pinmem.torch as pt
from child_datasets import Big, Small

out = {}
with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    want = [(x.clone(), y.clone()) for x, y in torch.utils.data.DataLoader(Big(), batch_size=8, num_workers=2)]
    L = pt.DataLoader(Big(), batch_size=8, num_workers=2, module="off")
    got = [(x.clone(), y.clone()) for x, y in L]
    out["same"] = len(got) == len(want) == 3 and all(
        torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(want, got))
    out["mode"] = L.pin_mode
    out["warnings"] = [str(w.message) for w in rec if w.category is pt.PinningWarning]
    # a training loader between epochs holds nothing: a validation loader can mlock
    train = pt.DataLoader(Small(), batch_size=8, num_workers=1, module="off", slot_bytes=1 << 20)
    val = pt.DataLoader(Small(), batch_size=8, num_workers=1, module="off", slot_bytes=1 << 20)
    modes = []
    for epoch in range(2):
        for b in train:
            pass
        del b
        for b in val:
            pass
        del b
        modes.append((train.pin_mode, val.pin_mode))
    out["modes"] = modes
    # an explicit pin="mlock" beyond the rlimit refuses, naming what this process holds
    it = iter(train)
    next(it)
    try:
        for b in pt.DataLoader(Big(), batch_size=8, module="off", pin="mlock"):
            pass
        out["budget_error"] = None
    except pinmem.BudgetError as e:
        out["budget_error"] = str(e)
print(json.dumps(out))
"""


def _as_nobody():
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (8 << 20, 8 << 20))
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def test_unprivileged_user_with_8mib_memlock_and_no_module_runs_as_torch():
    """The issue's case: no module, an ordinary user, Debian's 8 MiB RLIMIT_MEMLOCK, a ring
    of 3x224x224 float32 batches far over it: no BudgetError; the same batches as torch's;
    pin_mode 'none' with one warning; a loader between epochs has released its ring."""
    if os.getuid() != 0:
        pytest.skip("needs root to become an unprivileged user")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), HOME="/tmp")
    probe = subprocess.run([sys.executable, "-c", "import pinmem.torch"], env=env,
                           preexec_fn=_as_nobody, capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip("the package is not readable by uid %d: %s" % (NOBODY, probe.stderr[-300:]))
    p = subprocess.run([sys.executable, "-c", UNPRIVILEGED], env=env, preexec_fn=_as_nobody,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["same"] is True
    assert out["mode"] == "none"
    assert len(out["warnings"]) == 1, out["warnings"]
    assert "pinctl doctor" in out["warnings"][0] and "RLIMIT_MEMLOCK" in out["warnings"][0]
    assert out["modes"] == [["mlock", "mlock"], ["mlock", "mlock"]]
    err = out["budget_error"]
    assert err and "RLIMIT_MEMLOCK" in err and "pin='mlock' asked for explicitly" in err
    assert "a pinmem.torch.DataLoader ring (dataset Small)" in err, err


FD_REUSE = r"""
import gc, resource, warnings
warnings.simplefilter("ignore")
import torch, pinmem, pinmem.torch as pt, pinmem._ring as ring_mod
resource.setrlimit(resource.RLIMIT_MEMLOCK, (64 << 10, 64 << 10))
if ring_mod.mlock_room() is None:
    # CAP_IPC_LOCK (root): mlock ignores the rlimit; refuse as the library would without it
    def _pin(ctx, mv, mode, register):
        raise pinmem.BudgetError("mlock of %d bytes would exceed RLIMIT_MEMLOCK" % mv.nbytes)
    ring_mod._pin = _pin

class D(torch.utils.data.Dataset):
    def __len__(self): return 40
    def __getitem__(self, i): return torch.full((65536,), i)

path = "@PATH@"
L = pt.DataLoader(D(), batch_size=4, num_workers=0, pin="mlock")
it = iter(L)
try:
    next(it)
    raise SystemExit("no BudgetError")
except pinmem.BudgetError:
    mine = open(path)   # the lowest free number: the one the failed ring's memfd had
del it, L
gc.collect()
print(repr(mine.read()))
"""


def test_failed_ring_does_not_close_a_users_file_later(tmp_path):
    """A ring whose pin= refused closes its memfd once: the number, reused by a file the user
    opens next, stays the user's after the loader is gone (torch's loader touches no fds)."""
    f = tmp_path / "mine.txt"
    f.write_text("user data")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-c", FD_REUSE.replace("@PATH@", str(f))], env=env,
                       capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.splitlines()[-1] == repr("user data")


@pytest.mark.parametrize("workers", [0, 2])
def test_explicit_pin_refusal_ends_the_iterator_without_a_hang(monkeypatch, workers):
    """pin= refused when the first batch sizes the ring: that next() and every later one
    raise the BudgetError (no batch silently lost, no hang waiting on workers); a new
    iterator, once pinning is allowed, yields torch's batches."""
    real = ring_mod._pin

    def refuse(ctx, mv, mode, register):
        raise pinmem.BudgetError("mlock refused: over budget")
    monkeypatch.setattr(ring_mod, "_pin", refuse)
    kw = dict(batch_size=4, num_workers=workers)
    L = pt.DataLoader(Images(), pin="mlock", module="off", **kw)
    it = iter(L)

    def three_nexts():
        errors = []
        for _ in range(3):
            try:
                next(it)
                errors.append(None)
            except pinmem.BudgetError as e:
                errors.append(str(e))
        return errors
    errors = run_guarded(three_nexts, 30)
    assert all(e and "pin='mlock' asked for explicitly" in e for e in errors), errors
    if workers:
        assert it._shutdown and not any(w.is_alive() for w in it._workers)
    del it
    monkeypatch.setattr(ring_mod, "_pin", real)
    want = [clone(b) for b in torch.utils.data.DataLoader(Images(), **kw)]
    got = run_guarded(lambda: [clone(b) for b in L], 60)
    assert len(got) == len(want) and all(equal(w, g) for w, g in zip(want, got))
    L.close()


def test_explicit_pin_module_without_the_module_is_a_budget_error():
    """pin="module" where /dev/pinmem is not there: a BudgetError, not a silent mlock."""
    ctx = FakeCtx(module=False, backend="none", refuse=())
    with pytest.raises(pinmem.BudgetError, match="pin='module'"):
        ladder(ctx, pin="module")
    assert ctx.tried == []
    ctx = FakeCtx(module=True, backend="none", refuse=())
    assert ladder(ctx, pin="module")[0] == "module"
