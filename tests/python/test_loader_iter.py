# SPDX-License-Identifier: MIT
"""pinmem.torch.DataLoader's iterators against torch's: nesting, zip, abandonment, persistent
workers' resets, and what leaving a loop early releases (workers, pinned slots)."""
import gc
import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

import pinmem.torch as pt  # noqa: E402
from conftest import MODULE_MODE, pinned_bytes  # noqa: E402
from test_loader import Images, clone, equal  # noqa: E402


def loaders(workers, persistent, shuffle=True, n=37, **kw):
    """A torch DataLoader and a pinmem one with the same arguments and generator seed."""
    out = []
    for cls, extra in ((torch.utils.data.DataLoader, {}), (pt.DataLoader, {"module": MODULE_MODE})):
        g = torch.Generator().manual_seed(99)
        out.append(cls(Images(n=n), batch_size=4, shuffle=shuffle, num_workers=workers,
                       persistent_workers=persistent, generator=g, **kw, **extra))
    return out


def labels(b):
    return b[1].tolist()


def nested(L):
    """A second iter(L) inside the loop (a validation pass, say) at batch 3."""
    seen = []
    for k, b in enumerate(L):
        seen.append(("outer", labels(b), clone(b[0])))
        if k == 3:
            inner = next(iter(L))
            seen.append(("inner", labels(inner), clone(inner[0])))
            del inner
    return seen


def nested_full(L):
    """A whole inner epoch inside the outer one."""
    seen = []
    for k, b in enumerate(L):
        seen.append(("outer", labels(b)))
        if k == 1:
            seen.extend(("inner", labels(c)) for c in L)
    return seen


def zipped(L):
    return [(labels(a), labels(b), clone(a[0]), clone(b[0])) for a, b in zip(L, L)]


def abandoned(L):
    """break after 2 batches, then a whole epoch; an iterator dropped after one batch; again."""
    seen = []
    for k, b in enumerate(L):
        seen.append(labels(b))
        if k == 2:
            break
    del b
    seen.append([labels(b) for b in L])
    it = iter(L)
    seen.append(labels(next(it)))
    del it
    seen.append([labels(b) for b in L])
    return seen


def raised(L):
    """An exception from the loop body, caught outside it; then a whole epoch."""
    seen = []
    try:
        for k, b in enumerate(L):
            seen.append(labels(b))
            if k == 1:
                raise KeyError("stop")
    except KeyError:
        pass
    seen.append([labels(b) for b in L])
    return seen


def two_epochs(L):
    return [[labels(b) for b in L] for _ in range(2)]


def kept(L):
    """Batches kept past their step (every slot held) while the shuffling sampler's generator
    goes on: each index drawn when torch draws it (the reviewer's keep2/keep3 case)."""
    def state():
        return L.generator.get_state().tolist()
    ep1 = list(L)                           # every batch kept: the ring's slots all held
    seen = [[labels(b) for b in ep1], state()]
    it = iter(L)
    seen += [state(), [labels(next(it)) for _ in range(3)], state()]
    del it
    seen += [[labels(a) + labels(b) for a, b in zip(L, L)], state()]
    it = iter(L)
    seen += [state(), labels(next(it)), state()]
    del it, ep1
    return seen


SCENARIOS = {"kept": kept, "nested": nested, "nested_full": nested_full, "zip": zipped,
             "abandoned": abandoned, "raised": raised, "two_epochs": two_epochs}


@pytest.mark.parametrize("workers,persistent", [(0, False), (2, False), (2, True)])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_iterators_behave_as_torchs(scenario, workers, persistent):
    ref, ours = loaders(workers, persistent)
    want = SCENARIOS[scenario](ref)
    got = SCENARIOS[scenario](ours)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert equal(list(w) if isinstance(w, tuple) else w, list(g) if isinstance(g, tuple) else g)
    ours.close()


def test_zip_of_a_loader_with_itself_yields_every_pair():
    """The issue's case: zip(L, L) gave 0 pairs; torch's gives 10."""
    _, L = loaders(2, False, shuffle=False)
    pairs = list(zip(L, L))
    assert len(pairs) == 10
    assert all(torch.equal(a[0], b[0]) for a, b in pairs)
    del pairs
    L.close()


def workers_of(it):
    return [w.pid for w in it._workers]


def gone(pids):
    time.sleep(0.1)
    for pid in pids:
        if os.path.exists("/proc/%d" % pid):
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split()[2] != "Z":
                    return False
    return True


@pytest.mark.parametrize("how", ["break", "exception", "drop", "keyboardinterrupt"])
def test_leaving_early_stops_workers_and_unpins_without_the_collector(how):
    """break, an exception out of the loop, or the last reference to an iterator dropped:
    the workers stop and the ring is unpinned at once (no gc.collect()), also while the
    last batch is still referenced (it lives on in ordinary memory)."""
    base = pinned_bytes()
    L = pt.DataLoader(Images(n=64, shape=(3, 64, 64)), batch_size=8, num_workers=2,
                      module=MODULE_MODE, slot_bytes=128 * 1024)
    gc.disable()
    try:
        it = iter(L)
        pids = workers_of(it)
        assert pinned_bytes(collect=False) - base == it._ring.total
        if how == "drop":
            x = next(it)
            del it
        elif how == "break":
            del it
            for x in L:
                pids = workers_of(L._shared.iterators.__iter__().__next__())
                break
        else:
            del it
            exc = KeyError if how == "exception" else KeyboardInterrupt
            try:
                for x in L:
                    pids = workers_of(next(iter(L._shared.iterators)))
                    raise exc("out")
            except exc:
                pass
        assert pinned_bytes(collect=False) == base    # x lives on, unpinned
        assert gone(pids)
        del x
        assert not L._shared.iterators
    finally:
        gc.enable()
    L.close()


def test_persistent_workers_stay_across_epochs_and_die_with_the_loader():
    base = pinned_bytes()
    gc.disable()
    try:
        L = pt.DataLoader(Images(n=64), batch_size=8, num_workers=2, persistent_workers=True,
                          module=MODULE_MODE)
        for k, b in enumerate(L):
            if k == 2:
                break                       # torch's reset: the next epoch starts afresh
        del b
        pids = workers_of(L._iterator)
        assert [len(y) for _, y in L] == [8] * 8
        assert workers_of(L._iterator) == pids
        assert pinned_bytes(collect=False) > base     # the persistent iterator keeps its ring
        del L
        assert pinned_bytes(collect=False) == base
        assert gone(pids)
    finally:
        gc.enable()


EXIT_CHILD = r"""
import sys, time, torch
import pinmem.torch as pt
from child_datasets import Ramp
cls, kw = (pt.DataLoader, {"module": sys.argv[1]}) if sys.argv[4] == "pinmem" else \
    (torch.utils.data.DataLoader, {})
L = cls(Ramp(), batch_size=4, num_workers=2, persistent_workers=sys.argv[2] == "1", **kw)
it = iter(L)
if sys.argv[3] == "1":
    next(it)
print("READY", flush=True)
"""


@pytest.mark.parametrize("persistent", ["0", "1"])
@pytest.mark.parametrize("started", ["0", "1"])
def test_no_hang_at_exit_with_a_live_iterator(persistent, started):
    """A process that exits with a live iterator exits as it does with torch's loader: the
    hang this guards against was forever, so the bound is relative to torch's time (a
    loaded machine slows both), with a floor."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    took = {}
    for which in ("torch", "pinmem"):
        t = time.monotonic()
        out = subprocess.run([sys.executable, "-c", EXIT_CHILD, MODULE_MODE, persistent, started,
                              which], env=env, capture_output=True, text=True, timeout=300)
        took[which] = time.monotonic() - t
        assert out.returncode == 0 and "READY" in out.stdout, (which, out.stderr)
        if which == "pinmem":
            assert "Error" not in out.stderr and "Exception" not in out.stderr, out.stderr
    assert took["pinmem"] < min(60, max(20, 3 * took["torch"])), took


def test_a_spare_ring_closes_after_the_os_module_is_cleared(monkeypatch):
    """A loader alive at interpreter exit drops its spare ring (an epoch's memory kept for
    the next) after modules' globals are cleared: its fd is closed without 'Exception
    ignored ... NoneType has no attribute close' on stderr (seen at the exit of a script
    whose loader was still referenced)."""
    from pinmem import _ring
    fd = os.memfd_create("spare")
    spare = _ring.Spare(fd, None, 2, 4096, {})
    monkeypatch.setattr(_ring, "os", None)      # what interpreter shutdown leaves
    spare.close()
    monkeypatch.undo()
    with pytest.raises(OSError):
        os.fstat(fd)                             # closed
    spare.close()                                # and once only


def test_second_iterator_has_its_own_ring_and_workers():
    """Two live iterators of one loader, interleaved, yield what torch's two would."""
    def interleaved(L):
        a, b = iter(L), iter(L)
        out = [(labels(next(a)), labels(next(b)))]
        if isinstance(L, pt.DataLoader):
            assert a._ring is not b._ring and workers_of(a) != workers_of(b)
        out += [(labels(x), labels(y)) for x, y in zip(a, b)]
        out += [labels(x) for x in a] + [labels(y) for y in b]
        del a, b
        return out
    ref, ours = loaders(1, False)
    assert interleaved(ours) == interleaved(ref)
    ours.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_next_epoch_reuses_the_ring_memory_but_not_a_kept_batchs_slot(workers):
    """An epoch's ring is unpinned when it ends, its memory kept for the next epoch's ring
    (no fresh pages to fault each epoch); a slot whose batch the user still holds is not
    written until that batch is gone."""
    base = pinned_bytes()
    L = pt.DataLoader(Images(), batch_size=4, num_workers=workers, module=MODULE_MODE,
                      slot_bytes=4096, slots=8)
    it = iter(L)
    addr = it._ring.base
    kept = [b for k, b in enumerate(it) if k in (2, 9)]   # two slots held past the epoch
    copies = [clone(b) for b in kept]
    del it
    assert pinned_bytes() == base
    it = iter(L)
    assert it._ring.base == addr
    assert len(it._ring._old) == 2                          # two slots wait for their batches
    second = [clone(b) for b in it]
    assert all(equal(c, k) for c, k in zip(copies, kept))      # not overwritten
    assert len(second) == 10
    kept.clear()
    it = iter(L)
    next(it)
    assert not it._ring._old                                   # they came back
    del it
    L.close()
    assert pinned_bytes() == base
