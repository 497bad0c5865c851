# SPDX-License-Identifier: MIT
"""state_dict()/load_state_dict() of pinmem.torch.DataLoader (torchdata StatefulDataLoader's contract).

loader.state_dict() says where the loader is: in the middle of an epoch, the
random state the epoch's iterator started from (the loader's generator, or
torch's global one without a generator), the workers' base seed and how many
batches were yielded; between epochs, the random state the next epoch will
start from.  loader.load_state_dict(sd) makes the next iter(loader) resume
there: the same sampler order and worker seeds, the sampler fast-forwarded
past the batches already yielded (no sample is read for them) for a
map-style dataset; an IterableDataset's first batches are read again and
dropped.  A dataset with state_dict()/load_state_dict() has them called.
"""
import itertools

import torch

VERSION = 1


def rng_state(loader):
    """The random state an iterator of loader starts from."""
    g = loader.generator
    return g.get_state() if g is not None else torch.get_rng_state()


def set_rng(loader, state):
    if loader.generator is not None:
        loader.generator.set_state(state)
    else:
        torch.set_rng_state(state)


def capture(loader, it):
    """The state dict of loader whose latest iterator is it (None: none yet)."""
    st = {"_pinmem_loader_state": VERSION}
    if it is None or it._epoch_done:
        st.update(_iterator_finished=loader._shared.last_done, _num_yielded=0, mid_epoch=False,
                  rng=rng_state(loader))
        if it is not None and it._persistent_workers:
            # The next epoch is this iterator's reset: no new base seed is drawn.
            st.update(fresh=False, base_seed=it._base_seed)
    else:
        st.update(_iterator_finished=False, _num_yielded=it._num_yielded, mid_epoch=True,
                  rng=it._epoch_rng, fresh=it._epoch_fresh, base_seed=it._base_seed)
    sd = getattr(loader.dataset, "state_dict", None)
    if callable(sd):
        st["dataset_state"] = sd()
    return st


def check(st):
    if not isinstance(st, dict) or st.get("_pinmem_loader_state") != VERSION:
        raise ValueError("pinmem.torch.DataLoader.load_state_dict: not a state dict of this "
                         "loader (version %d)" % VERSION)


def restore_dataset(loader, st):
    if "dataset_state" in st:
        load = getattr(loader.dataset, "load_state_dict", None)
        if callable(load):
            load(st["dataset_state"])


def resume(it, loader, st):
    """Put a new iterator it where st's epoch was: the sampler iterator and base seed made
    from the same random state, then past the batches already yielded.

    Without a generator the state is torch's global one: it is set only while the sampler
    iterator draws its seed (drawn at once here, not at its first index) and the caller
    restores the user's global state afterwards (see _RingIter.__init__)."""
    set_rng(loader, st["rng"])
    si = iter(it._index_sampler)
    drawn = None
    if st["fresh"]:
        # A new iterator draws its workers' base seed after making its sampler iterator.
        drawn = torch.empty((), dtype=torch.int64).random_(generator=loader.generator).item()
    if loader.generator is None:
        # A RandomSampler draws its seed from the global state at its first index: now,
        # while that state is the epoch's.
        try:
            si = itertools.chain([next(si)], si)
        except StopIteration:
            si = iter(())
    it._sampler_iter = it._resumed_sampler = si
    it._base_seed = st["base_seed"] if st.get("base_seed") is not None else drawn
    it._epoch_rng, it._epoch_fresh = st["rng"], st["fresh"]


def fast_forward(it, k):
    """Past the first k batches of it's epoch (after its sampler iterator is made)."""
    it._num_yielded = k
    if it._dataset_kind == 0:        # map-style: indices only, no sample is read
        for _ in range(k):
            try:
                next(it._sampler_iter)
            except StopIteration:
                break
    else:
        it._discard = k
