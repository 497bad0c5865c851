# SPDX-License-Identifier: MIT
"""torchrun --nproc_per_node=2 with gloo: pinmem.torch.DataLoader + DistributedSampler
and pinmem.Stream give every rank its own samples and the same number of steps."""
from conftest import run_job, torchrun


def test_torchrun_two_ranks_loader_and_stream(tmp_path):
    n, files = 104, 23
    r = run_job(tmp_path, torchrun(2, "torchrun_job.py", str(n), str(files)))
    assert sorted(r) == [0, 1] and all(r[k]["world"] == 2 and r[k]["local_rank"] == k for k in r)
    for k in r:
        assert r[k]["pinmem_class"] == "pinmem.torch.DataLoader"
        # torch's loader over the same DistributedSampler is the oracle, batch for batch
        assert r[k]["pinmem"] == r[k]["torch"]
    for epoch in range(2):
        steps = [len(r[k]["pinmem"][epoch]) for k in r]
        assert steps[0] == steps[1] == 11      # 52 samples a rank, batches of 5
        seen = [[i for b in r[k]["pinmem"][epoch] for i in b] for k in r]
        assert not set(seen[0]) & set(seen[1]), "a sample on both ranks"
        assert sorted(seen[0] + seen[1]) == list(range(n))
    assert r[0]["pinmem"][0] != r[0]["pinmem"][1]       # set_epoch reshuffled

    for epoch in range(2):
        per_rank = [[b[1] for b in r[k]["stream"] if b[0] == epoch] for k in r]
        assert len(per_rank[0]) == len(per_rank[1]) > 1      # equal steps per rank
        items = [set(i for b in batches for i in b) for batches in per_rank]
        assert not items[0] & items[1], "an item on both ranks"
        assert sorted(items[0] | items[1]) == list(range(files))
