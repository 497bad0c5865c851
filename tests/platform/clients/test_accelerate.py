# SPDX-License-Identifier: MIT
"""HF Accelerate across 2 CPU processes: prepare() takes a pinmem.torch.DataLoader
and shards it exactly as it shards torch's (torch's loader is the oracle)."""
from conftest import run_job, torchrun


def test_prepare_shards_a_pinmem_loader_as_torchs(tmp_path):
    n = 48
    # torchrun, not `accelerate launch --cpu`: that runs one process without an
    # MPI host file (its simple launcher)
    r = run_job(tmp_path, torchrun(2, "accelerate_job.py", str(n)))
    assert sorted(r) == [0, 1] and all(r[k]["world"] == 2 for k in r), r
    for k in r:
        # prepare() rebuilds a loader from its attributes as torch's DataLoader (accelerate's
        # DataLoaderAdapter): the batches are right, pinmem's ring is not used
        # (docs/python.md says so, and how to keep it: the _ds case below)
        torch_dl = "torch.utils.data.dataloader.DataLoader"
        assert r[k]["pinmem_prepared"] == r[k]["torch_prepared"] == torch_dl, r[k]
        assert r[k]["pinmem"] == r[k]["torch"], "rank %d: pinmem's batches differ from torch's" % k
        assert r[k]["pinmem_weight"] == r[k]["torch_weight"]
        assert r[k]["pinmem_ds"] == r[k]["torch_ds"]
        assert r[k]["pinmem_ds_class"] == "pinmem.torch.DataLoader"
    for epoch in range(2):
        seen = [[i for b in r[k]["pinmem"][epoch] for i in b] for k in r]
        assert len(r[0]["pinmem"][epoch]) == len(r[1]["pinmem"][epoch]) == n // 8
        assert not set(seen[0]) & set(seen[1]), "a sample on both ranks"
        assert sorted(seen[0] + seen[1]) == list(range(n))
    seen = [[i for b in r[k]["pinmem_ds"] for i in b] for k in r]
    assert not set(seen[0]) & set(seen[1]) and sorted(seen[0] + seen[1]) == list(range(n))
