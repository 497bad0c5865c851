# SPDX-License-Identifier: MIT
"""pinmem.Stream: item bytes, zero-copy views, release, resume, sharding, errors."""
import errno
import io
import tarfile

import numpy
import pytest

import pinmem
from conftest import MODULE_MODE, pinned_bytes


def file_bytes(paths):
    return [open(p, "rb").read() for p in paths]


def run(stream):
    """[(epoch, [item indices])] of every batch, checking item bytes against the files."""
    out = []
    for b in stream:
        with b:
            out.append((b.epoch, [it[0] for it in b.items]))
    return out


def test_every_item_equals_its_file(data_files):
    want = file_bytes(data_files)
    s = pinmem.Stream(data_files, batch_items=3, shuffle=True, seed=5, epochs=2,
                      module=MODULE_MODE)
    seen = {0: [], 1: []}
    for b in s:
        with b:
            for it, v in zip(b.items, b.views):
                assert bytes(memoryview(v)) == want[it[0]]
            seen[b.epoch] += [it[0] for it in b.items]
    assert sorted(seen[0]) == sorted(seen[1]) == list(range(10))
    assert seen[0] != seen[1]                # each epoch is shuffled anew
    st = s.stats()
    assert st["items"] == 20 and st["pin"] in ("module", "mlock")
    s.close()


def test_readers(data_files):
    want = file_bytes(data_files)
    for n in (1, 3):
        s = pinmem.Stream(data_files, batch_items=2, epochs=2, readers=n, qd=4,
                          module=MODULE_MODE)
        seen = []
        for b in s:
            with b:
                for it, v in zip(b.items, b.views):
                    assert bytes(memoryview(v)) == want[it[0]]
                seen += [it[0] for it in b.items]
        assert sorted(seen) == sorted(list(range(10)) * 2)
        assert s.stats()["readers"] == n
        assert isinstance(s.stats()["populated_bytes"], int)
        s.close()
    with pytest.raises(pinmem.Error, match="readers 5: at most 64, and no more than the queue depth"):
        iter(pinmem.Stream(data_files, readers=5, qd=4, module=MODULE_MODE))


def test_items_cut_from_files(data_files):
    want = file_bytes(data_files[:2])
    s = pinmem.Stream(data_files[:2], item_bytes=1000, batch_items=4, module=MODULE_MODE)
    got = {}
    for b in s:
        with b:
            for it, v in zip(b.items, b.views):
                got[(it[1], it[2])] = bytes(memoryview(v))
    for (path_id, off), data in got.items():
        assert data == want[path_id][off:off + 1000]
    assert sum(len(d) for d in got.values()) == sum(len(w) for w in want)


def test_views_share_memory_with_the_slot(data_files):
    s = pinmem.Stream(data_files, batch_items=4, module=MODULE_MODE)
    b = next(iter(s))
    host = b.host
    for it, v in zip(b.items, b.views):
        a = numpy.from_dlpack(v)
        assert a.ctypes.data == host.ptr + it[4]
        w = numpy.asarray(v)                  # writable, through the buffer protocol
        w[0] ^= 0xFF                          # a write through one view shows in the other
        assert memoryview(host)[it[4]] == a[0] == w[0]
    assert host.pin_mode == "stream"
    b.release()
    s.close()


def test_release_semantics(data_files):
    s = pinmem.Stream(data_files, batch_items=1, slots=2, module=MODULE_MODE)
    it = iter(s)
    b = next(it)
    v = b.views[0]
    early = numpy.asarray(v)                 # exported before the release
    first = bytes(early)
    b.release()
    assert b.released and v.released
    with pytest.raises(ValueError, match="released"):
        memoryview(v)
    with pytest.raises(ValueError, match="released"):
        v.__dlpack__()
    with pytest.raises(ValueError, match="released"):
        b.views
    with pytest.raises(ValueError, match="released"):
        b.items                              # the slot's item list is reused
    with pytest.raises(ValueError, match="released"):
        b.item(0)
    b.release()                              # twice is fine
    # The array made before the release still maps the slot; the ring rewrites
    # it with later batches (what "must not be read" means): it shows the last
    # batch read into that slot, not the released one.
    last = None
    for nb in it:
        with nb:
            if nb.slot == b.slot:
                last = bytes(memoryview(nb.views[0]))
    assert last is not None
    n = min(len(last), len(first))
    assert bytes(early[:n]) == last[:n] != first[:n]
    s.close()


def test_with_statement_releases(data_files):
    s = pinmem.Stream(data_files, batch_items=5, module=MODULE_MODE)
    for b in s:
        with b as same:
            assert same is b and not b.released
        assert b.released
    s.close()


def test_unreleased_batches_holding_every_slot_raise(data_files):
    s = pinmem.Stream(data_files, batch_items=1, slots=2, prefetch=2, module=MODULE_MODE)
    it = iter(s)
    held = [next(it), next(it)]
    with pytest.raises(pinmem.Error, match="every slot is held"):
        next(it)
    held[0].release()
    assert next(it).seq == 2
    s.close()


@pytest.mark.parametrize("epochs,k", [(1, 1), (1, 3), (3, 5)])
def test_resume_gives_the_same_remaining_batches(data_files, epochs, k):
    kw = dict(batch_items=3, shuffle=True, seed=11, epochs=epochs, module=MODULE_MODE)
    full = run(pinmem.Stream(data_files, **kw))
    s = pinmem.Stream(data_files, **kw)
    it = iter(s)
    for _ in range(k):
        next(it).release()
    state = s.state_dict()
    assert state["batches"] == k
    s.close()
    r = pinmem.Stream(data_files, **kw)
    r.load_state_dict(state)
    assert run(r) == full[k:]
    assert r.state_dict()["batches"] == len(full)


def test_resume_reads_nothing_before(tmp_path):
    paths = []
    for i in range(40):
        p = tmp_path / ("r%02d" % i)
        p.write_bytes(bytes([i]) * 65536)
        paths.append(str(p))
    kw = dict(batch_items=2, shuffle=True, seed=2, epochs=2, slots=2, module=MODULE_MODE)
    full = run(pinmem.Stream(paths, **kw))
    k = len(full) * 9 // 10
    r = pinmem.Stream(paths, **kw)
    r.load_state_dict({"batches": k, "config": r._config()})
    assert run(r) == full[k:]
    st = r.stats()
    assert st["read_bytes"] <= 0.11 * 40 * 65536 * 2, st   # at 90%: at most 11% read
    r.close()


def out_of_order_files(tmp_path):
    """Every fourth item large, read in many small chunks, the rest tiny: with two
    readers a tiny batch finishes while a large one before it is still read."""
    paths = []
    for i in range(24):
        p = tmp_path / ("o%02d" % i)
        p.write_bytes(bytes([i + 1]) * ((2 << 20) if i % 4 == 0 else 100 + i))
        paths.append(str(p))
    return paths


def test_resume_as_completed_delivers_every_batch_once(tmp_path):
    paths = out_of_order_files(tmp_path)
    kw = dict(batch_items=1, order="as_completed", readers=2, qd=2, chunk_bytes=4096,
              slots=4, direct="off", epochs=2, module=MODULE_MODE)

    def take(b):
        with b:
            assert all(bytes(v) == bytes([it[0] % 24 + 1]) * it[3] for v, it in zip(b.views, b.items))
            return b.seq, (b.epoch, [it[0] for it in b.items])

    full = {}
    with pinmem.Stream(paths, **kw) as s:
        for b in s:
            seq, got = take(b)
            full[seq] = got
    assert sorted(full) == list(range(len(full)))
    for attempt in range(5):
        # checkpoint at the first batch taken while one before it is not
        s = pinmem.Stream(paths, **kw)
        before = {}
        for b in s:
            seq, got = take(b)
            before[seq] = got
            if max(before) >= len(before):
                break
        state = s.state_dict()
        s.close()
        if max(before) >= len(before):
            break
    else:
        pytest.skip("batches never finished out of order here")
    missing = sorted(set(range(max(before))) - set(before))
    assert state["batches"] == missing[0]
    assert state["delivered"] == sorted(q for q in before if q > missing[0])
    r = pinmem.Stream(paths, **kw)
    r.load_state_dict(state)
    after = {}
    for b in r:
        seq, got = take(b)
        assert seq not in after
        after[seq] = got
    assert not set(before) & set(after), "delivered twice"
    assert {**before, **after} == full, "a batch lost or different"
    assert r.state_dict() == {"batches": len(full), "delivered": [], "config": r._config()}
    assert r.stats()["batches"] == len(after) + len(state["delivered"])    # re-read, dropped
    r.close()


def test_resume_state_is_checked(data_files):
    s = pinmem.Stream(data_files, batch_items=3, seed=1, module=MODULE_MODE)
    good = s.state_dict()
    assert good == {"batches": 0, "delivered": [], "config": s._config()}
    for bad in (None, [], {"config": good["config"]},
                dict(good, batches=-1), dict(good, batches="2"), dict(good, batches=1.5),
                dict(good, batches=True), dict(good, delivered=5), dict(good, delivered="34"),
                dict(good, batches=2, delivered=[2]), dict(good, batches=2, delivered=[1]),
                dict(good, batches=2, delivered=[4, 4]), dict(good, delivered=[None])):
        r = pinmem.Stream(data_files, batch_items=3, seed=1, module=MODULE_MODE)
        with pytest.raises(ValueError):
            r.load_state_dict(bad)
        r.close()
    # a state without "delivered" (an older pinmem's) resumes at its batch
    full = run(pinmem.Stream(data_files, batch_items=3, seed=1, module=MODULE_MODE))
    r = pinmem.Stream(data_files, batch_items=3, seed=1, module=MODULE_MODE)
    r.load_state_dict({"batches": 2, "config": good["config"]})
    assert run(r) == full[2:]
    s.close()


def test_resume_refuses_other_options(data_files):
    s = pinmem.Stream(data_files, batch_items=3, seed=1)
    state = s.state_dict()
    other = pinmem.Stream(data_files, batch_items=3, seed=2)
    with pytest.raises(ValueError, match="saved with"):
        other.load_state_dict(state)


def test_rank_and_world_size_from_environment(data_files, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    items = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        s = pinmem.Stream(data_files, batch_items=2, shuffle=True, seed=3, module=MODULE_MODE)
        got = [i for _, idx in run(s) for i in idx]
        assert len(got) == 5
        items.append(got)
    assert sorted(items[0] + items[1]) == list(range(10))


def test_device_copy_views(data_files):
    want = file_bytes(data_files)
    s = pinmem.Stream(data_files, batch_items=4, device="host", module=MODULE_MODE)
    for b in s:
        with b:
            assert b.dev is not None and b.dev.ptr != b.host.ptr
            for it, v in zip(b.items, b.views):
                assert v.__dlpack_device__() == (1, 0)
                assert v.ptr == b.dev.ptr + it[4]
                assert bytes(memoryview(v)) == want[it[0]]
                assert bytes(memoryview(b.item(0, device=False))) == want[b.items[0][0]]


@pytest.mark.parametrize("handoff", ["copied", "queued"])
def test_handoff_and_stream_ordered_release(data_files, handoff):
    """The host backend runs the GPU hand-off's calls: wait, then release against a stream."""
    want = file_bytes(data_files)
    s = pinmem.Stream(data_files, batch_items=3, device="host", handoff=handoff,
                      module=MODULE_MODE)
    n = 0
    for b in s:
        b.wait(0)                             # the legacy default stream, as torch's would be
        for it, v in zip(b.items, b.views):
            assert bytes(memoryview(v)) == want[it[0]]
        b.release(stream=0)                   # reused after the work on stream 0
        assert b.released
        n += b.nitems
    assert n == 10
    with pytest.raises(ValueError, match="unknown handoff"):
        iter(pinmem.Stream(data_files, handoff="later", module=MODULE_MODE))


def test_host_handoff_without_device(data_files):
    s = pinmem.Stream(data_files, batch_items=5, module=MODULE_MODE)
    for b in s:
        assert b.dev is None
        assert all(v.__dlpack_device__() == (1, 0) for v in b.views)
        b.release(stream=0)
    assert s.stats()["pin"] in ("module", "mlock")


def test_bad_device():
    with pytest.raises(ValueError, match="device must be"):
        pinmem.Stream(["x"], device="tpu:0")


def test_missing_file_and_bad_item(tmp_path, data_files):
    with pytest.raises(FileNotFoundError):
        pinmem.Stream([str(tmp_path / "missing")])
    m = pinmem.Manifest()
    m.add(data_files[0], 0, 100)
    m.add(data_files[0], 2900, 1000)         # past the end of a 3000-byte file
    assert len(m) == 2 and m.nbytes == 1100
    s = pinmem.Stream(m, batch_items=1, module=MODULE_MODE)
    it = iter(s)
    next(it).release()
    with pytest.raises(pinmem.Error) as e:
        next(it)
    assert data_files[0] in str(e.value)
    s.close()


def test_item_larger_than_a_slot_names_batch_bytes(data_files):
    m = pinmem.Manifest()
    m.add(data_files[0], 0, 3000)
    # exactly a slot: fits (the check is exact); a byte less: refused, saying what to raise
    s = pinmem.Stream(m, batch_bytes=3000, direct="off", module=MODULE_MODE)
    assert [len(b.items) for b in s] == [1]
    s.close()
    with pytest.raises(pinmem.Error, match=r"needs 3000 bytes, more than a slot \(2999 bytes; "
                       r"raise batch_bytes: .*pinmem.Stream\(batch_bytes=...\)"):
        iter(pinmem.Stream(m, batch_bytes=2999, direct="off", module=MODULE_MODE))


def test_manifest_text_and_errors(tmp_path, data_files):
    m = pinmem.Manifest()
    m.parse("%s 0 10\n%s 10 20 # two\n" % (data_files[0], data_files[0]))
    assert len(m) == 2 and m.item(1)[1:] == (10, 20, None)
    with pytest.raises(ValueError, match="<string>:1: zero-length"):
        m.parse("%s 0 0\n" % data_files[0])
    with pytest.raises(IndexError):
        m.item(5)


def test_close_with_live_views_defers_unpin(data_files):
    base = pinned_bytes()
    s = pinmem.Stream(data_files, batch_items=10, module=MODULE_MODE)
    b = next(iter(s))
    a = numpy.from_dlpack(b.views[0])
    want = bytes(a)
    assert pinned_bytes() > base
    s.close()
    assert bytes(a) == want                   # the slot is still mapped
    del b
    assert pinned_bytes() > base
    del a
    assert pinned_bytes() == base


def test_manifest_cannot_change_under_an_open_stream(data_files):
    m = pinmem.Manifest()
    m.add_file(data_files[0])
    s = pinmem.Stream(m, batch_items=1, module=MODULE_MODE)
    b = next(iter(s))
    for change in (lambda: m.add(data_files[1], 0, 10), lambda: m.add_file(data_files[1]),
                   lambda: m.parse("%s 0 10\n" % data_files[1]), lambda: m.load("/nonexistent")):
        with pytest.raises(RuntimeError, match="read by 1 open stream"):
            change()
    assert len(m) == 1
    s.close()
    with pytest.raises(RuntimeError, match="open stream"):
        m.add(data_files[1], 0, 10)          # closed, but its batch still reads
    b.release()
    del b
    m.add(data_files[1], 0, 10)
    assert len(m) == 2


def test_device_views_take_their_device_from_the_context(data_files):
    ctx = pinmem.open(backend="host", module=MODULE_MODE)
    m = pinmem.Manifest()
    m.add_file(data_files[0])
    with pytest.raises(ValueError, match="backend is 'host', not 'cuda'"):
        pinmem._pinmem._Stream(ctx, m, cuda_device=1, views_on_device=True)
    with pytest.raises(ValueError, match="needs a context with the 'cuda' backend"):
        pinmem.Stream(data_files, device="cuda:1", ctx=ctx)
    with pinmem.Stream(data_files, batch_items=2, ctx=ctx, handoff="copied") as s:
        for b in s:
            with b:
                assert b.dev.__dlpack_device__() == (1, 0)    # host "device" memory
                assert b.views[0].__dlpack_device__() == (1, 0)
    ctx.close()


def test_close_from_another_thread_while_next_waits(tmp_path):
    """close() while next() waits for reads in another thread: the waiting call ends
    with ValueError (or the stream's end), nothing crashes (also under ASan: make
    python-check-asan), and every pin goes."""
    import os
    import threading
    import time
    base = pinned_bytes()
    path = tmp_path / "big.bin"
    numpy.random.default_rng(3).integers(0, 256, 48 << 20, dtype=numpy.uint8).tofile(path)
    outcomes = []
    for trial in range(8):
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)     # next() waits for the disk
        os.close(fd)
        # rank and world_size given: no torch.distributed import (libgcrypt, which torch
        # loads, mlocks 16 KiB of its own on first use)
        s = pinmem.Stream([str(path)], item_bytes=1 << 20, batch_bytes=8 << 20, slots=2,
                          rank=0, world_size=1, module=MODULE_MODE)
        it = iter(s)
        got = []

        def consume():
            try:
                while True:
                    next(it).release()
            except StopIteration:
                got.append("end")
            except ValueError as e:
                got.append(str(e))
        t = threading.Thread(target=consume)
        t.start()
        time.sleep(0.001 * trial)
        s.close()
        t.join(30)
        assert not t.is_alive()
        assert got and (got[0] == "end" or "closed" in got[0]), got
        outcomes.append(got[0])
        with pytest.raises(ValueError, match="closed"):
            next(it)
    del s, it
    assert pinned_bytes() == base, outcomes



def make_shard(path, fmt, samples, first=0):
    """A WebDataset shard: per sample an .input.npy (bytes that name it) and a .label.txt."""
    want = {}
    with tarfile.open(path, "w", format=fmt) as t:
        for k in range(first, first + samples):
            # past 100 bytes: GNU writes a long name, pax a path record, ustar a prefix
            key = "train/" + "d" * 90 + "/%06d" % k
            for field, data in (("input.npy", b"in%d-" % k * (1 + k % 7)),
                                ("label.txt", b"%d" % k)):
                info = tarfile.TarInfo("%s.%s" % (key, field))
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
                want[(k, field)] = data
    return want


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_tar_samples_stay_whole(tmp_path, fmt):
    shards, want = [], {}
    for n in range(3):
        p = str(tmp_path / ("shard-%d.tar" % n))
        want.update(make_shard(p, fmt, 25, first=25 * n))
        shards.append(p)
    seen = []
    for rank in range(2):
        s = pinmem.Stream(tar=shards, batch_items=4, shuffle=True, seed=3, rank=rank,
                          world_size=2, module=MODULE_MODE)
        m = s.manifest
        for b in s:
            with b:
                inputs, labels = b["input.npy"], b["label.txt"]
                assert len(inputs) == len(labels) == b.nitems // 2 <= 4
                for x, y in zip(inputs, labels):
                    k = int(bytes(memoryview(y)))
                    assert bytes(memoryview(x)) == want[(k, "input.npy")]
                    seen.append(k)
                # a sample's items are adjacent, its own fields
                for (i, *_), (j, *_) in zip(b.items[::2], b.items[1::2]):
                    assert m.sample(i) == m.sample(j)
                    assert (m.field(i), m.field(j)) == ("input.npy", "label.txt")
                with pytest.raises(KeyError, match="no item of this batch has the field 'cls'"):
                    b["cls"]
        s.close()
    assert sorted(seen) == list(range(75))  # every sample once, on one rank


def test_tar_errors(tmp_path):
    p = str(tmp_path / "s.tar")
    make_shard(p, tarfile.PAX_FORMAT, 2)
    data = open(p, "rb").read()
    cut = str(tmp_path / "cut.tar")
    open(cut, "wb").write(data[:700])
    with pytest.raises(ValueError, match=r"cut\.tar: header at offset 0: .*truncated"):
        pinmem.Stream(tar=[cut])
    bad = str(tmp_path / "bad.tar")
    open(bad, "wb").write(data[:5] + b"X" + data[6:])
    m = pinmem.Manifest()
    m.add_tar(p)
    n = len(m)
    with pytest.raises(ValueError, match=r"bad\.tar: header at offset 0: checksum mismatch"):
        m.add_tar(bad)
    assert len(m) == n                       # a bad shard adds nothing
    with pytest.raises(ValueError, match="tar= takes a list of shards"):
        pinmem.Stream(tar=p)
    with pytest.raises(ValueError, match="add the shards with manifest.add_tar"):
        pinmem.Stream(m, tar=[p])
    with pytest.raises(ValueError, match="give a source"):
        pinmem.Stream()


def test_manifest_group(data_files):
    m = pinmem.Manifest()
    for i in range(6):
        m.add(data_files[i], 0, 100)
    m.group(4, ["img", "cls"])
    assert [m.sample(i) for i in range(6)] == [0, 1, 2, 3, 4, 4]
    assert m.field(5) == "cls" and m.field(0) == ""
    with pytest.raises(ValueError, match="which would be split"):
        m.group(5)
    with pytest.raises(ValueError, match="2 fields for 1 items"):
        m.group(5, ["a", "b"])
    s = pinmem.Stream(m, batch_items=1, module=MODULE_MODE)
    sizes = []
    for b in s:
        with b:
            sizes.append(b.nitems)
    assert sorted(sizes) == [1, 1, 1, 1, 2]
    s.close()


def test_tar_coalesce(tmp_path):
    """coalesce="on" reads a batch's small members (and the headers between them) as one
    range: byte-exact items, counted in stats(); "off" reads item by item."""
    shards, want = [], {}
    for n in range(2):
        p = str(tmp_path / ("shard-%d.tar" % n))
        # members of about 3 KB: the headers and padding between them are fewer bytes
        with tarfile.open(p, "w", format=tarfile.USTAR_FORMAT) as t:
            for k in range(20 * n, 20 * n + 20):
                for field, data in (("input.npy", (b"in%d-" % k) * (500 + 37 * k)),
                                    ("label.txt", b"%d" % k)):
                    info = tarfile.TarInfo("%06d.%s" % (k, field))
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
                    want[(k, field)] = data
        shards.append(p)
    counts = {}
    for mode in ("on", "off", "auto"):
        s = pinmem.Stream(tar=shards, batch_items=8, coalesce=mode, module=MODULE_MODE)
        seen = []
        for b in s:
            with b:
                for x, y in zip(b["input.npy"], b["label.txt"]):
                    k = int(bytes(memoryview(y)))
                    assert bytes(memoryview(x)) == want[(k, "input.npy")]
                    seen += [(k, "input.npy"), (k, "label.txt")]
        assert sorted(seen) == sorted(want)
        st = s.stats()
        counts[mode] = (st["coalesced_reads"], st["coalesced_items"])
        s.close()
    assert counts["on"][0] > 0 and counts["on"][1] > counts["on"][0]
    assert counts["off"] == (0, 0)
    assert counts["auto"][0] > 0            # members of a few bytes: small runs
    with pytest.raises(ValueError, match=r"unknown coalesce 'sometimes' \(one of: auto, on, off\)"):
        iter(pinmem.Stream(tar=shards, coalesce="sometimes", module=MODULE_MODE))
    # which items a batch holds does not depend on it: a state resumes under another value
    s = pinmem.Stream(tar=shards, batch_items=8, coalesce="on", module=MODULE_MODE)
    with next(s):
        pass
    state = s.state_dict()
    s.close()
    r = pinmem.Stream(tar=shards, batch_items=8, coalesce="off", module=MODULE_MODE)
    r.load_state_dict(state)
    seqs = []
    for b in r:
        with b:
            seqs.append(b.seq)
    assert seqs == [1, 2, 3, 4]
    r.close()
