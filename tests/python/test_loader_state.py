# SPDX-License-Identifier: MIT
"""pinmem.torch.DataLoader.state_dict()/load_state_dict(): resuming mid-epoch or between
epochs gives the batches an uninterrupted run gives (torch's DataLoader is the oracle)."""
import io

import pytest

torch = pytest.importorskip("torch")

import pinmem.torch as pt  # noqa: E402
from conftest import MODULE_MODE  # noqa: E402
from test_loader import Images, Samples, clone, equal  # noqa: E402


def make(cls, dataset, seed=5, **kw):
    extra = {"module": MODULE_MODE} if cls is pt.DataLoader else {}
    return cls(dataset, generator=torch.Generator().manual_seed(seed), **kw, **extra)


def epochs(loader, n=2):
    return [[clone(b) for b in loader] for _ in range(n)]


def roundtrip(sd):
    f = io.BytesIO()
    torch.save(sd, f)
    f.seek(0)
    return torch.load(f)


def same(want, got):
    assert len(got) == len(want) and all(equal(w, g) for w, g in zip(want, got))


KW = [dict(num_workers=0), dict(num_workers=2), dict(num_workers=2, persistent_workers=True)]


@pytest.mark.parametrize("kw", KW, ids=["inline", "workers", "persistent"])
@pytest.mark.parametrize("epoch", [0, 1])
def test_resume_mid_epoch_gives_the_uninterrupted_batches(kw, epoch):
    want = epochs(make(torch.utils.data.DataLoader, Images(), batch_size=4, shuffle=True, **kw), 3)
    a = make(pt.DataLoader, Images(), batch_size=4, shuffle=True, **kw)
    for _ in range(epoch):
        for b in a:
            pass
    it = iter(a)
    head = [clone(next(it)) for _ in range(3)]
    sd = roundtrip(a.state_dict())
    assert sd["_num_yielded"] == 3 and sd["mid_epoch"]
    del it
    a.close()
    b = make(pt.DataLoader, Images(), batch_size=4, shuffle=True, seed=123, **kw)
    b.load_state_dict(sd)
    rest = [clone(x) for x in b]
    same(want[epoch], head + rest)
    same(want[epoch + 1], [clone(x) for x in b])         # and the epoch after
    b.close()


@pytest.mark.parametrize("kw", KW, ids=["inline", "workers", "persistent"])
def test_resume_between_epochs(kw):
    want = epochs(make(torch.utils.data.DataLoader, Images(), batch_size=4, shuffle=True, **kw), 2)
    a = make(pt.DataLoader, Images(), batch_size=4, shuffle=True, **kw)
    same(want[0], [clone(x) for x in a])
    sd = a.state_dict()
    assert not sd["mid_epoch"] and sd["_iterator_finished"]
    a.close()
    b = make(pt.DataLoader, Images(), batch_size=4, shuffle=True, seed=77, **kw)
    b.load_state_dict(sd)
    same(want[1], [clone(x) for x in b])
    b.close()


def test_map_style_resume_reads_no_skipped_sample():
    class Counted(Images):
        reads = 0

        def __getitem__(self, i):
            Counted.reads += 1
            return super().__getitem__(i)
    a = make(pt.DataLoader, Counted(), batch_size=4, shuffle=True)
    it = iter(a)
    for _ in range(7):
        next(it)
    sd = a.state_dict()
    Counted.reads = 0
    b = make(pt.DataLoader, Counted(), batch_size=4, shuffle=True)
    b.load_state_dict(sd)
    assert len([x for x in b]) == 3 and Counted.reads == 37 - 28


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_dataset_resumes(workers):
    want = [clone(x) for x in torch.utils.data.DataLoader(Samples(), batch_size=4,
                                                          num_workers=workers)]
    a = pt.DataLoader(Samples(), batch_size=4, num_workers=workers, module=MODULE_MODE)
    it = iter(a)
    head = [clone(next(it)) for _ in range(4)]
    sd = a.state_dict()
    del it
    b = pt.DataLoader(Samples(), batch_size=4, num_workers=workers, module=MODULE_MODE)
    b.load_state_dict(sd)
    same(want, head + [clone(x) for x in b])


def test_dataset_state_is_saved_and_restored():
    class Stateful(Images):
        def __init__(self):
            super().__init__()
            self.level = 0

        def state_dict(self):
            return {"level": self.level}

        def load_state_dict(self, st):
            self.level = st["level"]
    a = pt.DataLoader(Stateful(), batch_size=4)
    a.dataset.level = 3
    sd = a.state_dict()
    b = pt.DataLoader(Stateful(), batch_size=4)
    b.load_state_dict(sd)
    assert b.dataset.level == 3 and sd["dataset_state"] == {"level": 3}
    with pytest.raises(ValueError, match="not a state dict"):
        b.load_state_dict({"something": "else"})


@pytest.mark.parametrize("kw", KW, ids=["inline", "workers", "persistent"])
@pytest.mark.parametrize("mid_epoch", [True, False])
def test_resume_leaves_torchs_global_random_state_to_the_user(kw, mid_epoch):
    """No generator: the sampler draws from torch's global state.  A user who checkpoints
    that state with the loader's and restores both gets the batches and the torch.rand values
    of an uninterrupted run (torch's DataLoader): mid-epoch, resuming leaves the global state
    as the user restored it (the epoch's draws were made before the checkpoint)."""
    def run(cls, k):
        torch.manual_seed(0)
        L = cls(Images(), batch_size=4, shuffle=True, **kw,
                **({"module": MODULE_MODE} if cls is pt.DataLoader else {}))
        if not mid_epoch:
            [clone(b) for b in L]
        it = iter(L)
        head = [clone(next(it)) for _ in range(k)]
        torch.rand(5)
        sd = L.state_dict() if cls is pt.DataLoader else None
        user = torch.get_rng_state()
        rest = [clone(b) for b in it]
        return L, head, sd, user, rest, torch.rand(3)
    k = 2 if mid_epoch else 0
    _, _, _, _, want_rest, want_rand = run(torch.utils.data.DataLoader, k)
    L, _, sd, user, _, _ = run(pt.DataLoader, k)
    L.close()
    if not mid_epoch:
        # between epochs (the epoch before ended): checkpoint then; the uninterrupted run
        # goes on with the same loader
        L = pt.DataLoader(Images(), batch_size=4, shuffle=True, **kw, module=MODULE_MODE)
        torch.manual_seed(0)
        [clone(b) for b in L]
        sd, user = L.state_dict(), torch.get_rng_state()
        L.close()
        torch.manual_seed(0)
        ref = torch.utils.data.DataLoader(Images(), batch_size=4, shuffle=True, **kw)
        [clone(b) for b in ref]
        assert torch.equal(torch.get_rng_state(), user)
        want_rest = [clone(b) for b in ref]
        want_rand = torch.rand(3)
        del ref
    R = pt.DataLoader(Images(), batch_size=4, shuffle=True, **kw, module=MODULE_MODE)
    torch.manual_seed(123)          # whatever the state was before the user restores
    R.load_state_dict(roundtrip(sd))
    torch.set_rng_state(user)
    it = iter(R)
    same(want_rest, [clone(b) for b in it])
    assert torch.equal(torch.rand(3), want_rand)
    del it
    R.close()
